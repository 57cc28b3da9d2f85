package mcpproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// toolResult is what a test reads of a tools/call result.
type toolResult struct {
	Content []struct {
		Type, Text, URI, MimeType string
	} `json:"content"`
	IsError    bool   `json:"isError"`
	ResultType string `json:"resultType"`
}

func (r toolResult) text() string {
	var s []string
	for _, c := range r.Content {
		s = append(s, c.Text)
	}
	return strings.Join(s, "\n")
}

// link is the uri of the result's resource_link of mime type mime.
func (r toolResult) link(t *testing.T, mime string) string {
	t.Helper()
	for _, c := range r.Content {
		if c.Type == "resource_link" && c.MimeType == mime {
			return c.URI
		}
	}
	t.Fatalf("no %s resource_link in %.500s", mime, r.text())
	return ""
}

func decodeTool(t *testing.T, raw []byte) toolResult {
	t.Helper()
	var r toolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%v: %.300s", err, raw)
	}
	return r
}

// body is an answer's text after its header line.
func body(s string) string {
	_, b, _ := strings.Cut(s, "\n")
	return b
}

// The artifact tools through a real proxy in front of an MCP Go SDK
// server: listed after its tool, and answering on the artifact its 5 MB
// result became (values checked against the server's own rows).
func TestArtifactToolsEndToEnd(t *testing.T) {
	upstream, jsonText, _ := bigServer(t)
	var rows []map[string]any
	if err := json.Unmarshal(jsonText, &rows); err != nil {
		t.Fatal(err)
	}
	a := &agent{url: offloadingProxy(t, upstream, nil)}
	a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "tools", "version": "1"}})
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	json.Unmarshal(a.call(t, "tools/list", map[string]any{}), &list)
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, []string{"report", "spillway_artifact_read", "spillway_artifact_grep", "spillway_artifact_jq"}) {
		t.Fatalf("tools/list: %v", names)
	}
	uri := decodeTool(t, a.call(t, "tools/call", map[string]any{"name": "report", "arguments": map[string]any{}})).link(t, "application/json")
	tool := func(name string, args map[string]any) string {
		t.Helper()
		args["uri"] = uri
		r := decodeTool(t, a.call(t, "tools/call", map[string]any{"name": name, "arguments": args}))
		if r.IsError {
			t.Fatalf("%s: %s", name, r.text())
		}
		return r.text()
	}
	last := rows[len(rows)-1]
	if got, want := body(tool("spillway_artifact_jq", map[string]any{"program": "length, .[-1].customer, (map(.amount) | max)"})),
		fmt.Sprintf("%d\n%q\n%v\n", len(rows), last["customer"], last["amount"]); got != want {
		t.Errorf("jq: %q, want %q", got, want)
	}
	if got := body(tool("spillway_artifact_read", map[string]any{"byteOffset": 1000, "byteLength": 300})); got != string(jsonText[1000:1300]) {
		t.Errorf("read: %q, want %q", got, jsonText[1000:1300])
	}
	needle := `"customer":"customer 4242"`
	got := tool("spillway_artifact_grep", map[string]any{"pattern": needle})
	if !strings.Contains(got, "1 matching lines") || !strings.Contains(got, needle) {
		t.Errorf("grep: %.500s", got)
	}

	// The Go SDK's client accepts the tools as listed and calls one.
	c := mcp.NewClient(&mcp.Implementation{Name: "sdk", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: a.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(lt.Tools) != 4 || lt.Tools[3].Name != "spillway_artifact_jq" || lt.Tools[3].InputSchema == nil {
		t.Fatalf("the SDK's tools/list: %v %+v", err, lt)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "spillway_artifact_jq", Arguments: map[string]any{"uri": uri, "program": ".[7].id"}})
	if err != nil || res.IsError || len(res.Content) != 1 || body(res.Content[0].(*mcp.TextContent).Text) != "7\n" {
		t.Errorf("the SDK's call: %v %+v", err, res)
	}
}

// The tools on the stdio face and in the stateless era, in front of a
// stdio child whose echo result is offloaded.
func TestArtifactToolsStdioAndStateless(t *testing.T) {
	svc := newService(t)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	o := mcpproxy.Options{Artifacts: svc, Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})}
	var ids []int
	for i := 0; i < 20000; i++ {
		ids = append(ids, i*3)
	}
	args := map[string]any{"ids": ids}
	want := fmt.Sprintf("%d\n%d\n", len(ids), ids[len(ids)-1])
	jq := func(uri string) map[string]any {
		return map[string]any{"name": "spillway_artifact_jq", "arguments": map[string]any{"uri": uri, "program": ".ids | length, .[-1]"}}
	}

	p, url := childProxy(t, "echo", o)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	post := func(params map[string]any) toolResult {
		t.Helper()
		resp, err := statelessPost(ctx, url, 1, "tools/call", params)
		if err != nil {
			t.Fatal(err)
		}
		var r toolResult
		sseMessages(ctx, resp, func(m map[string]json.RawMessage) {
			if m["result"] != nil {
				r = decodeTool(t, m["result"])
			}
		})
		return r
	}
	r := post(map[string]any{"name": "echo", "arguments": args})
	r = post(jq(r.link(t, "application/json")))
	if r.IsError || body(r.text()) != want || r.ResultType != "complete" {
		t.Errorf("stateless: %+v, want %q", r, want)
	}

	call := stdioClient(t, ctx, p)
	call(1, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}})
	call(0, "notifications/initialized", nil)
	if l := call(4, "tools/list", map[string]any{}); !strings.Contains(string(l), `"name":"spillway_artifact_jq"`) {
		t.Errorf("stdio tools/list: %s", l)
	}
	r = decodeTool(t, call(2, "tools/call", map[string]any{"name": "echo", "arguments": args}))
	r = decodeTool(t, call(3, "tools/call", jq(r.link(t, "application/json"))))
	if r.IsError || body(r.text()) != want {
		t.Errorf("stdio: %+v, want %q", r, want)
	}
}

// A stateless call of an artifact tool is answered without asking the
// upstream anything: in front of a child that never answers tools/list,
// it still returns. Before, the proxy first listed the upstream's tools
// (to learn the call's header bindings) and the call waited for them.
func TestArtifactToolsStatelessAskNothingUpstream(t *testing.T) {
	_, url := childProxy(t, "nolist", mcpproxy.Options{Artifacts: newService(t)})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	resp, err := statelessPost(ctx, url, 1, "tools/call", map[string]any{"name": "spillway_artifact_read",
		"arguments": map[string]any{"uri": artifact.URI(artifact.NewID())}})
	if err != nil {
		t.Fatal(err)
	}
	var r *toolResult
	sseMessages(ctx, resp, func(m map[string]json.RawMessage) {
		if m["result"] != nil {
			d := decodeTool(t, m["result"])
			r = &d
		}
	})
	if r == nil || !r.IsError || !strings.HasPrefix(r.text(), "resource not found: ") {
		t.Fatalf("no answer (ctx: %v) or not a tool error: %+v", ctx.Err(), r)
	}
}
