//lint:file-ignore SA1019 the gateway carries logging, sampling and roots for the clients and servers that still use them (deprecated, not removed, in 2026-07-28), so the tests exercise them.
package mcpproxy_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/eratest"
	"github.com/spillway-dev/spillway/policy"
)

// gatewayFixture is a proxy in front of three real servers at once: the Go
// SDK's everything-server over Streamable HTTP (session era), a
// 2026-07-28-only server over stateless HTTP, and bigtool over stdio.
type gatewayFixture struct {
	url     string
	proxy   *mcpproxy.Proxy
	servers []mcpproxy.Server
}

// startGateway starts the fixture; edit, when not nil, changes the
// servers' settings first.
func startGateway(t *testing.T, o mcpproxy.Options, edit func([]mcpproxy.Server)) *gatewayFixture {
	t.Helper()
	servers := []mcpproxy.Server{
		{Name: "ev", Upstream: &mcpproxy.HTTPUpstream{URL: startEverything(t, false)}},
		{Name: "era", Upstream: &mcpproxy.HTTPUpstream{URL: serve(t, eratest.Handler())}},
		{Name: "big", Upstream: &mcpproxy.CommandUpstream{Command: buildBigtool(t)}},
	}
	if edit != nil {
		edit(servers)
	}
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o.Upstream = &mcpproxy.Gateway{Servers: servers}
	if o.Offloader == nil {
		svc := newService(t)
		o.Offloader = mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})
		o.Artifacts = svc
	}
	p, err := mcpproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	mux := http.NewServeMux()
	mux.Handle("/mcp", p)
	return &gatewayFixture{url: serve(t, mux), proxy: p, servers: servers}
}

func sessionClient(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "gw-test", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listedTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestGatewayListsAndCallsEveryServer(t *testing.T) {
	f := startGateway(t, mcpproxy.Options{}, nil)
	cs := sessionClient(t, f.url, nil)
	names := listedTools(t, cs)
	for _, want := range []string{"ev_test_simple_text", "era_echo", "era_big", "big_query", "big_small", "spillway_artifact_read"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	if n := strings.Count(strings.Join(names, " "), "spillway_artifact_read"); n != 1 {
		t.Errorf("spillway_artifact_read listed %d times", n)
	}
	ctx := context.Background()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev_test_simple_text"})
	if err != nil || textOf(r) == "" || r.IsError {
		t.Fatalf("ev_test_simple_text: %v %+v", err, r)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "era_echo", Arguments: map[string]any{"text": "hi era"}})
	if err != nil || !strings.Contains(textOf(r), "hi era") {
		t.Fatalf("era_echo: %v %+v", err, r)
	}
	// An unprefixed or unknown name is refused by name.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo"}); err == nil || !strings.Contains(err.Error(), "Unknown tool") {
		t.Errorf("unprefixed call: %v", err)
	}
	// Prompts and resources carry their server's name too.
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "era_greet", Arguments: map[string]string{"name": "ann"}})
	if err != nil || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "greet ann") {
		t.Fatalf("era_greet: %v %+v", err, pr)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "era+" + eratest.Resource})
	if err != nil || rr.Contents[0].Text != eratest.ResourceText || rr.Contents[0].URI != "era+"+eratest.Resource {
		t.Fatalf("read era+%s: %v %+v", eratest.Resource, err, rr)
	}
}

// A large output of each server is offloaded, its link byte-exact.
func TestGatewayOffloadsEachServer(t *testing.T) {
	f := startGateway(t, mcpproxy.Options{}, nil)
	cs := sessionClient(t, f.url, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"era_big", map[string]any{}},
		{"big_query", map[string]any{"rows": 20000}},
	} {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		link := firstLink(r)
		if link == nil {
			t.Fatalf("%s: nothing offloaded: %.300s", tc.tool, textOf(r))
		}
		body := fetchLink(t, link)
		if want := linkSHA(link); want != "" {
			sum := sha256.Sum256(body)
			if hex.EncodeToString(sum[:]) != want {
				t.Errorf("%s: fetched bytes do not match the link's checksum", tc.tool)
			}
		}
		if int64(len(body)) != *link.Size {
			t.Errorf("%s: fetched %d bytes, link says %d", tc.tool, len(body), *link.Size)
		}
	}
}

func firstLink(r *mcp.CallToolResult) *mcp.ResourceLink {
	for _, c := range r.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			return l
		}
	}
	return nil
}

func linkSHA(l *mcp.ResourceLink) string {
	meta, _ := l.Meta[artifact.MetaLink].(map[string]any)
	s, _ := meta["sha256"].(string)
	return s
}

func fetchLink(t *testing.T, l *mcp.ResourceLink) []byte {
	t.Helper()
	meta, _ := l.Meta[artifact.MetaLink].(map[string]any)
	u, _ := meta["httpUrl"].(string)
	if u == "" {
		t.Fatalf("link without httpUrl: %+v", l)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET link: %s", resp.Status)
	}
	b, _ := io.ReadAll(resp.Body)
	return b
}

// A server's own offload settings apply to its results only.
func TestGatewayServerOffloadSettings(t *testing.T) {
	f := startGateway(t, mcpproxy.Options{}, func(s []mcpproxy.Server) {
		s[1].Offload = &mcpproxy.ServerOffload{Never: []string{"big"}}
		s[2].Offload = &mcpproxy.ServerOffload{Budget: 2 << 20, TextThreshold: 2 << 20}
	})
	cs := sessionClient(t, f.url, nil)
	ctx := context.Background()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "era_big", Arguments: map[string]any{}})
	if err != nil || firstLink(r) != nil || len(textOf(r)) != eratest.Big {
		t.Errorf("era_big (never offloaded): err %v, link %v, %d bytes inline", err, firstLink(r) != nil, len(textOf(r)))
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "big_query", Arguments: map[string]any{"rows": 2000}})
	if err != nil || firstLink(r) != nil {
		t.Errorf("big_query of 2000 rows under a 2 MiB budget: err %v, offloaded %v", err, firstLink(r) != nil)
	}
	// The default settings still offload the same call elsewhere: the
	// everything server's tools are untouched, and bigtool's rows above
	// its own budget leave.
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "big_query", Arguments: map[string]any{"rows": 20000}})
	if err != nil || firstLink(r) == nil {
		t.Errorf("big_query of 20000 rows: err %v, offloaded %v", err, firstLink(r) != nil)
	}
}

// gatewayPolicy is the example gateway policy (examples/policies/gateway)
// with its data set for the fixture: tenant "a" may call only read-like
// tools (and bigtool's small), and the era server's echo is the "SQL tool"
// whose text may not hold DROP.
func gatewayPolicy(t *testing.T) *policy.Engine {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(moduleRoot(t), "examples", "policies", "gateway")
	for _, f := range []string{"main.rego", "tenants.rego", "sql.rego"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o600)
	}
	os.WriteFile(filepath.Join(dir, "data.json"), []byte(`{"gateway_config": {"read_only_tenants": ["a"],
		"read_tool_patterns": ["get_*", "list_*", "read_*"], "read_tools": {"big": ["small"]},
		"sql_tools": {"era": ["echo"]}, "sql_argument": "text"}}`), 0o600)
	eng, err := policy.New(context.Background(), policy.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func tenantClient(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "tenant-" + token, Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestGatewayCallDecision(t *testing.T) {
	tenants, err := identity.NewTenants(map[string]string{"tokena-tokena-tokena": "a", "tokenb-tokenb-tokenb": "b"})
	if err != nil {
		t.Fatal(err)
	}
	f := startGateway(t, mcpproxy.Options{Tenants: tenants, CallPolicy: gatewayPolicy(t)}, nil)
	a, b := tenantClient(t, f.url, "tokena-tokena-tokena"), tenantClient(t, f.url, "tokenb-tokenb-tokenb")
	ctx := context.Background()
	if names := listedTools(t, a); slices.Contains(names, "big_query") || !slices.Contains(names, "big_small") {
		t.Errorf("tenant a's tools: %v", names)
	}
	if names := listedTools(t, b); !slices.Contains(names, "big_query") {
		t.Errorf("tenant b's tools lack big_query: %v", names)
	}
	_, err = a.CallTool(ctx, &mcp.CallToolParams{Name: "big_query", Arguments: map[string]any{"rows": 1}})
	if err == nil || !strings.Contains(err.Error(), "may call only read-only tools") {
		t.Errorf("tenant a calling big_query by name: %v", err)
	}
	if _, err := b.CallTool(ctx, &mcp.CallToolParams{Name: "big_query", Arguments: map[string]any{"rows": 1}}); err != nil {
		t.Errorf("tenant b calling big_query: %v", err)
	}
	_, err = b.CallTool(ctx, &mcp.CallToolParams{Name: "era_echo", Arguments: map[string]any{"text": "drop table users"}})
	if err == nil || !strings.Contains(err.Error(), "DROP is not allowed") {
		t.Errorf("echo with DROP: %v", err)
	}
	if r, err := b.CallTool(ctx, &mcp.CallToolParams{Name: "era_echo", Arguments: map[string]any{"text": "select 1"}}); err != nil || !strings.Contains(textOf(r), "select 1") {
		t.Errorf("echo without DROP: %v %+v", err, r)
	}
}

// Through the gateway a call's server requests reach the client that made
// it, progress and logs arrive, and logging/setLevel reaches the servers
// that log: a session-era client in front of the stateless-only server
// (bridged) and the session-era everything server.
func TestGatewayServerRequestsProgressLogs(t *testing.T) {
	f := startGateway(t, mcpproxy.Options{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs, progress := make(chan string, 64), make(chan string, 64)
	alice := sessionClientWith(t, ctx, f.url, "alice", clientEvents{logs: logs, progress: progress})
	bob := sessionClientWith(t, ctx, f.url, "bob", clientEvents{})
	if got := toolText(t)(alice.CallTool(ctx, &mcp.CallToolParams{Name: "era_sample", Arguments: map[string]any{"text": "hi"}})); !strings.Contains(got, "alice heard say hi") {
		t.Errorf("alice's sampling: %q", got)
	}
	if got := toolText(t)(bob.CallTool(ctx, &mcp.CallToolParams{Name: "era_elicit"})); !strings.Contains(got, "bob") {
		t.Errorf("bob's elicitation: %q", got)
	}
	if err := alice.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}
	toolText(t)(alice.CallTool(ctx, &mcp.CallToolParams{Name: "era_log"}))
	var levels []string
	for len(levels) < 2 {
		select {
		case l := <-logs:
			levels = append(levels, l)
		case <-ctx.Done():
			t.Fatalf("logs: %v", levels)
		}
	}
	if !slices.Equal(levels, []string{"warning", "error"}) {
		t.Errorf("logs at warning and above: %v", levels)
	}
	p := &mcp.CallToolParams{Name: "era_progress", Arguments: map[string]any{"text": "step"}}
	p.SetProgressToken("tok-1")
	toolText(t)(alice.CallTool(ctx, p))
	for range 3 {
		select {
		case got := <-progress:
			if got != "tok-1 step" {
				t.Errorf("progress: %q", got)
			}
		case <-ctx.Done():
			t.Fatal("no progress")
		}
	}
}

// A 2026-07-28 client in front of the gateway: server/discover merges the
// servers, and its calls reach each server, offloaded as usual.
func TestGatewayStatelessClient(t *testing.T) {
	f := startGateway(t, mcpproxy.Options{}, nil)
	c := client20260728{url: f.url, caps: map[string]any{}}
	d := c.result(t, 1, "server/discover", nil)
	if string(d["supportedVersions"]) != `["2026-07-28"]` || !strings.Contains(string(d["instructions"]), "## era") {
		t.Errorf("server/discover: %v", d)
	}
	names := strings.Join(toolNames(t, c.result(t, 2, "tools/list", nil)), " ")
	for _, want := range []string{"ev_test_simple_text", "era_echo", "big_small"} {
		if !strings.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %s", want, names)
		}
	}
	if r := c.result(t, 3, "tools/call", map[string]any{"name": "era_echo", "arguments": map[string]any{"text": "hi"}}); !strings.Contains(string(r["content"]), "echo: hi") {
		t.Errorf("era_echo: %v", r)
	}
	r := c.result(t, 4, "tools/call", map[string]any{"name": "big_query", "arguments": map[string]any{"rows": 20000}})
	if !strings.Contains(string(r["content"]), `"resource_link"`) || len(r["content"]) > 16<<10 {
		t.Errorf("big_query not offloaded: %d bytes of content", len(r["content"]))
	}
}

// The stdio face in front of the gateway.
func TestGatewayStdioFace(t *testing.T) {
	f := startGateway(t, mcpproxy.Options{}, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.proxy.ServeStdio(ctx, inR, outW) }()
	defer func() { cancel(); inW.Close(); <-done }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 16<<20)
	ask := func(msg string) map[string]json.RawMessage {
		t.Helper()
		io.WriteString(inW, msg+"\n")
		for lines.Scan() {
			var m map[string]json.RawMessage
			json.Unmarshal(lines.Bytes(), &m)
			if m["id"] != nil {
				return m
			}
		}
		t.Fatal("stdio output ended")
		return nil
	}
	init := ask(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stdio","version":"1"}}}`)
	if !strings.Contains(string(init["result"]), `"2025-06-18"`) {
		t.Fatalf("initialize: %s", init["result"])
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	tl := ask(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	for _, want := range []string{`"ev_test_simple_text"`, `"era_echo"`, `"big_small"`} {
		if !strings.Contains(string(tl["result"]), want) {
			t.Errorf("tools/list lacks %s", want)
		}
	}
	r := ask(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"era_echo","arguments":{"text":"over stdio"}}}`)
	if !strings.Contains(string(r["result"]), "echo: over stdio") {
		t.Errorf("era_echo: %s", r["result"])
	}
}

// A stateless-only server whose tool binds an argument to an Mcp-Param
// header (x-mcp-header), which the official SDK checks: through the
// gateway, the call carries the header of the server's own binding under
// the server's own tool name.
func TestGatewayStatelessHeaderBindings(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "hdr", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{eratest.Version}})
	s.AddReceivingMiddleware(eratest.Strict)
	s.AddTool(&mcp.Tool{Name: "where", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "region " + string(req.Params.Arguments)}}}, nil
		})
	url := serve(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.Gateway{Servers: []mcpproxy.Server{
		{Name: "hdr", Upstream: &mcpproxy.HTTPUpstream{URL: url}},
		{Name: "era", Upstream: &mcpproxy.HTTPUpstream{URL: serve(t, eratest.Handler())}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	mux := http.NewServeMux()
	mux.Handle("/mcp", p)
	cs := sessionClient(t, serve(t, mux), nil)
	ctx := context.Background()
	// Called before any listing (the gateway learns the binding first),
	// then again.
	for range 2 {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hdr_where", Arguments: map[string]any{"region": "eu"}})
		if err != nil || r.IsError || !strings.Contains(textOf(r), `"eu"`) {
			t.Fatalf("hdr_where: %v %+v", err, r)
		}
	}
}
