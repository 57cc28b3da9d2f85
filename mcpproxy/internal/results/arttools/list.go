package arttools

import (
	"encoding/json"
	"fmt"
)

// uriProp is the uri argument every tool takes.
var uriProp = map[string]any{
	"type":        "string",
	"description": "The artifact: the spillway://artifacts/… uri of an offloaded result's resource_link.",
}

func intProp(desc string, lo, hi int) map[string]any {
	return map[string]any{"type": "integer", "minimum": lo, "maximum": hi, "description": desc}
}

// tool is one tools/list entry: read-only, closed world, taking the
// artifact's uri and props.
func tool(name, title, desc string, props map[string]any, required ...string) map[string]any {
	props["uri"] = uriProp
	return map[string]any{
		"name": name, "title": title, "description": desc,
		"inputSchema": map[string]any{"type": "object", "properties": props, "required": append([]string{"uri"}, required...)},
		"annotations": map[string]any{"readOnlyHint": true, "openWorldHint": false},
	}
}

// tools are the tools/list entries, in Names order.
var tools = []map[string]any{
	tool(Read, "Read part of a Spillway artifact",
		"Read a window of a large tool result that Spillway stored as an artifact (its spillway://artifacts/… uri is in the result's resource_link). "+
			"By lines: offset (first line, from 1) and limit, numbered lines back. Or by bytes: byteOffset and byteLength (text or base64). "+
			"The answer says where the next window starts.",
		map[string]any{
			"offset":     intProp("First line to read, from 1 (default 1).", 1, 1<<31-1),
			"limit":      intProp(fmt.Sprintf("Lines to read (default %d).", DefaultLines), 1, MaxLines),
			"byteOffset": intProp("First byte to read, from 0; reads by bytes instead of lines.", 0, 1<<53-1),
			"byteLength": intProp(fmt.Sprintf("Bytes to read (default %d).", DefaultByteLength), 1, MaxByteLength),
		}),
	tool(Grep, "Search a Spillway artifact",
		"Search a large tool result that Spillway stored as an artifact for lines matching a regular expression (Go RE2 syntax), "+
			"with context lines around each match. Answers line numbers and lines, as grep -n does (N: a match, N- context).",
		map[string]any{
			"pattern":    map[string]any{"type": "string", "maxLength": MaxPattern, "description": "Regular expression (RE2), matched against each line."},
			"ignoreCase": map[string]any{"type": "boolean", "description": "Match letters in any case."},
			"context":    intProp("Lines to show before and after each match (default 0).", 0, MaxContext),
			"maxMatches": intProp(fmt.Sprintf("Matching lines to return at most (default %d).", DefaultMatches), 1, MaxMatches),
		}, "pattern"),
	tool(JQ, "Query a Spillway artifact with jq",
		"Run a jq program over a large JSON or NDJSON tool result that Spillway stored as an artifact, e.g. `length`, `.[0]`, "+
			"`map(.status) | unique`, `.data.rows[:5]`. Each output is one line of compact JSON.",
		map[string]any{
			"program":    map[string]any{"type": "string", "maxLength": MaxProgram, "description": "The jq program."},
			"format":     map[string]any{"type": "string", "enum": []string{"auto", "json", "ndjson"}, "description": "json: one document; ndjson: one value per line, the program runs on each; auto (default): any sequence of JSON values."},
			"maxOutputs": intProp(fmt.Sprintf("Outputs to return at most (default %d).", DefaultOutputs), 1, MaxOutputs),
		}, "program"),
}

// List returns the tools/list entry of each tool whose name keep
// accepts (nil: every tool), in Names order.
func List(keep func(name string) bool) [][]byte {
	var out [][]byte
	for _, t := range tools {
		if keep != nil && !keep(t["name"].(string)) {
			continue
		}
		b, err := json.Marshal(t)
		if err != nil {
			panic("arttools: a tool did not encode: " + err.Error()) // the package's own values
		}
		out = append(out, b)
	}
	return out
}
