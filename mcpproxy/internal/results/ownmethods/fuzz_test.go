package ownmethods

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// ownedMethods are the methods whose responses After rewrites.
var ownedMethods = []string{"initialize", "server/discover", "resources/list", "resources/templates/list", "tools/list", "tools/call", "resources/read"}

// FuzzAfter: whatever result the upstream sends to a method the proxy
// owns, After answers the same request, with valid JSON, without
// panicking (a recovered panic is logged, and fails the test); a result
// it had to extend is either extended or a CodeUpstream error.
func FuzzAfter(f *testing.F) {
	for _, s := range []string{`null`, `{}`, `[]`, `"x"`, `{"capabilities":null}`, `{"capabilities":{"resources":[]}}`,
		`{"resources":null}`, `{"resources":[1,{"a":2}],"nextCursor":"x"}`, `{"resourceTemplates":{}}`, `{"tools":[{"name":"t","inputSchema":{"properties":{"a":{"x-mcp-header":"A"}}}}]}`,
		`{"content":[{"type":"text","text":"` + strings.Repeat("a", 200) + `"}]}`, `{"contents":[{"uri":"x://a","text":"` + strings.Repeat("b", 200) + `"}]}`,
		`{"capabilities":{"resources":{"stream":true}},"a":1,"a":2}`} {
		for i := range ownedMethods {
			f.Add(uint8(i), false, []byte(s))
		}
	}
	e := newEnv(f, nil, Options{OffloadResources: true, LearnTools: func(r []byte) {
		if !json.Valid(r) {
			panic("LearnTools got invalid JSON")
		}
	}})
	e.m.Remember("", e.publish(f, "", "text/plain", []byte("listed")))
	f.Fuzz(func(t *testing.T, method uint8, stdio bool, result []byte) {
		resp, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":9,"result":` + string(result) + `}`))
		if err != nil || resp.Result == nil {
			return
		}
		name := ownedMethods[int(method)%len(ownedMethods)]
		params := map[string]any{"name": "t", "uri": "x://a"}
		_, c := e.m.Before(ctx, Request{Stdio: stdio}, request(t, name, params))
		if c == nil {
			t.Fatalf("%s: no call", name)
		}
		out := e.m.After(ctx, c, resp)
		if out == nil || string(out.ID) != "9" || !json.Valid(out.Raw) {
			t.Fatalf("%s %s: answered %v", name, result, out)
		}
		if strings.Contains(e.logs.String(), "panicked") {
			t.Fatalf("%s %s: After panicked:\n%s", name, result, e.logs)
		}
		switch name {
		case "initialize", "server/discover":
			if out.Error == nil && !isObject(jsonrpc.Path(out.Result, "capabilities", "resources")) {
				t.Fatalf("%s %s → %s: no resources capability", name, result, out.Result)
			}
		case "resources/list", "resources/templates/list":
			key := map[string]string{"resources/list": "resources", "resources/templates/list": "resourceTemplates"}[name]
			if out.Error == nil && !bytes.Contains(jsonrpc.RawMember(out.Result, key), []byte("spillway://artifacts/")) {
				t.Fatalf("%s %s → %s: nothing of the proxy's added", name, result, out.Result)
			}
		}
		if out.Error != nil && out.ErrorCode() != jsonrpc.CodeUpstream {
			t.Fatalf("%s %s → unexpected error %s", name, result, out.Raw)
		}
	})
}
