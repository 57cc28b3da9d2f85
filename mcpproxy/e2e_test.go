package mcpproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
	"github.com/spillway-dev/spillway/policy"
)

// newService is an artifact service on a temp dir whose fetch endpoint
// listens on loopback.
func newService(t testing.TB) *artifact.Service {
	t.Helper()
	store, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := serviceOn(t, store)
	return svc
}

// serviceOn is newService on any store; it also returns the fetch handler.
func serviceOn(t testing.TB, store artifact.Store) (*artifact.Service, http.Handler) {
	return artifacttest.Serve(t, store, artifacttest.Options{})
}

// serve serves h on loopback until t ends and returns its /mcp URL.
func serve(t testing.TB, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// bigServer is an official-SDK MCP server whose tool returns 5 MB of
// JSON text and a 2 MB image.
func bigServer(t *testing.T) (url string, jsonText, png []byte) {
	var rows []map[string]any
	for i := 0; len(jsonText) < 5<<20; i++ {
		rows = append(rows, map[string]any{"id": i, "customer": fmt.Sprintf("customer %d", i), "amount": i * 7, "note": strings.Repeat("n", 40)})
		if i%1000 == 999 {
			jsonText, _ = json.Marshal(rows)
		}
	}
	png = make([]byte, 2<<20)
	rand.Read(png)
	copy(png, "\x89PNG\r\n\x1a\n")
	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "report", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: string(jsonText)},
				&mcp.ImageContent{Data: png, MIMEType: "image/png"},
			}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: false})
	return serve(t, h), jsonText, png
}

// agent is a raw JSON-RPC client: it sees exactly the bytes an agent's
// context would get.
type agent struct {
	url, session string
	id           int
}

func (a *agent) call(t *testing.T, method string, params any) (result []byte) {
	t.Helper()
	a.id++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a.id, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, a.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if a.session != "" {
		req.Header.Set("Mcp-Session-Id", a.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		a.session = s
	}
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r := sse.NewReader(resp.Body, 0)
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			msgs = append(msgs, ev.Data)
		}
	} else {
		b, _ := io.ReadAll(bufio.NewReader(resp.Body))
		msgs = append(msgs, b)
	}
	for _, m := range msgs {
		var env struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(m, &env) == nil && env.ID == a.id {
			if env.Error != nil {
				t.Fatalf("%s: %s", method, env.Error)
			}
			return env.Result
		}
	}
	t.Fatalf("%s: no response (%s)", method, resp.Status)
	return nil
}

func TestOffloadEndToEnd(t *testing.T) {
	upstream, jsonText, png := bigServer(t)
	svc := newService(t)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, up := range []struct {
		name string
		up   mcpproxy.Upstream
	}{{"http", &mcpproxy.HTTPUpstream{URL: upstream}}} {
		t.Run(up.name, func(t *testing.T) {
			p, err := mcpproxy.New(mcpproxy.Options{Upstream: up.up, Artifacts: svc,
				Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			a := &agent{url: serve(t, p)}
			init := a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "e2e", "version": "1"}})
			if !bytes.Contains(init, []byte(`"resources"`)) {
				t.Errorf("initialize does not declare resources: %s", init)
			}
			res := a.call(t, "tools/call", map[string]any{"name": "report", "arguments": map[string]any{}})
			if len(res) >= 8<<10 {
				t.Errorf("the agent got %d bytes, want under 8 KiB", len(res))
			}
			t.Logf("a %d-byte JSON text and a %d-byte image reach the agent as %d bytes", len(jsonText), len(png), len(res))
			var r struct {
				Content []map[string]any `json:"content"`
			}
			json.Unmarshal(res, &r)
			var links []map[string]any
			for _, c := range r.Content {
				if c["type"] == "resource_link" {
					links = append(links, c)
				}
			}
			if len(links) != 2 {
				t.Fatalf("want 2 resource_links, got %d in %s", len(links), res)
			}
			for i, orig := range [][]byte{jsonText, png} {
				l := links[i]
				if l["httpUrlExpiresAt"] == nil {
					t.Errorf("link %d has no httpUrlExpiresAt", i)
				}
				resp, err := http.Get(l["httpUrl"].(string)) // a plain GET, no session
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				h, want := sha256.Sum256(got), sha256.Sum256(orig)
				if resp.StatusCode != 200 || h != want {
					t.Errorf("link %d: %s, %d bytes, sha256 %x; want %d bytes %x", i, resp.Status, len(got), h, len(orig), want)
				}
				if l["_meta"].(map[string]any)[artifact.MetaSHA256] != hex.EncodeToString(want[:]) {
					t.Errorf("link %d: _meta sha256 differs", i)
				}
			}
			// The artifact is a resource of the proxy's too.
			read := a.call(t, "resources/read", map[string]any{"uri": links[1]["uri"]})
			if !bytes.Contains(read, []byte(`"blob"`)) {
				t.Errorf("resources/read of the image: %.200s", read)
			}
			list := a.call(t, "resources/list", map[string]any{})
			if !bytes.Contains(list, []byte(links[0]["uri"].(string))) {
				t.Errorf("resources/list lacks the offloaded artifact: %.300s", list)
			}
		})
	}
}

// An upstream that has only the legacy HTTP+SSE transport (the official
// SDK's SSE handler) works through both faces, offloading included.
func TestLegacySSEUpstream(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "old", Version: "1"}, nil)
	big := strings.Repeat("legacy line\n", 5000)
	s.AddTool(&mcp.Tool{Name: "dump", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil
		})
	legacyURL := strings.TrimSuffix(serve(t, mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)), "/mcp")

	svc := newService(t)
	eng, _ := policy.New(context.Background(), policy.Options{})
	up := &mcpproxy.HTTPUpstream{URL: legacyURL}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: up, Artifacts: svc,
		Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a := &agent{url: serve(t, p)}
	a.call(t, "initialize", map[string]any{"protocolVersion": "2024-11-05", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "e2e", "version": "1"}})
	if a.session == "" {
		t.Fatal("no session from the proxy for a legacy upstream")
	}
	res := a.call(t, "tools/call", map[string]any{"name": "dump", "arguments": map[string]any{}})
	if !bytes.Contains(res, []byte(`"resource_link"`)) || len(res) > 8<<10 {
		t.Errorf("legacy upstream result not offloaded: %.300s", res)
	}
}
