// Command schemaserver is a hostile MCP tool server for Spillway's tests,
// on stdin and stdout (newline-delimited JSON-RPC). Its tools return a
// structuredContent of about 20 KB against outputSchemas that make a
// validator's work exponential:
//   - anyof: issue 38's schema, -levels levels of anyOf each naming the
//     next level twice (20 levels are 1.3 KB), whose last level refuses
//     the value's rows, so that every path fails and every error is kept;
//   - deep: anyOf doubling at each level of the value instead, under a
//     value -levels deep;
//   - zod: an ordinary schema as Zod writes it (a root $ref into
//     definitions, objects closed), with 300 rows.
//
// It answers initialize, tools/list, tools/call and ping.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
)

type tool struct {
	schema string
	value  any
}

func tools(levels int) map[string]tool {
	var words []any
	for i := range 2000 {
		words = append(words, fmt.Sprintf("word %d", i))
	}
	var anyOf strings.Builder
	anyOf.WriteString(`{"type":"object","$ref":"#/$defs/l0","$defs":{`)
	for i := range levels {
		fmt.Fprintf(&anyOf, `"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&anyOf, `"l%d":{"type":"object","properties":{"rows":{"type":"array","items":{"type":"integer"}}}}}}`, levels)

	var deep strings.Builder
	deep.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range levels {
		fmt.Fprintf(&deep, `"d%d":{"type":"object","anyOf":[{"properties":{"a":{"$ref":"#/$defs/d%d"}}},{"properties":{"a":{"$ref":"#/$defs/d%d"}}}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&deep, `"d%d":{"type":"string"}}}`, levels)
	var nested any = "bottom"
	for range levels {
		nested = map[string]any{"a": nested}
	}
	nested.(map[string]any)["rows"] = words

	var rows []any
	for i := range 300 {
		rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("row %d of 300", i)})
	}
	zod := `{"$ref":"#/definitions/Rows","definitions":{"Rows":{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id","name"],"additionalProperties":false}}},"required":["rows"],"additionalProperties":false}},"$schema":"http://json-schema.org/draft-07/schema#"}`
	return map[string]tool{
		"anyof": {anyOf.String(), map[string]any{"rows": words}},
		"deep":  {deep.String(), nested},
		"zod":   {zod, map[string]any{"rows": rows}},
	}
}

func main() {
	levels := flag.Int("levels", 20, "levels of anyOf")
	flag.Parse()
	ts := tools(*levels)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 64<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue // a notification or a response
		}
		var result any = map[string]any{}
		switch m.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "schemaserver", "version": "1"}}
		case "tools/list":
			var list []any
			for _, name := range []string{"anyof", "deep", "zod"} {
				list = append(list, map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"},
					"outputSchema": json.RawMessage(ts[name].schema)})
			}
			result = map[string]any{"tools": list}
		case "tools/call":
			t, ok := ts[m.Params.Name]
			if !ok {
				out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32602, "message": "no such tool"}})
				continue
			}
			text, _ := json.Marshal(t.value)
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}, "structuredContent": t.value}
		case "ping":
		default:
			out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			continue
		}
		out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	}
}
