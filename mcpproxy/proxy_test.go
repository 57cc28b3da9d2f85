package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

func post(t *testing.T, h http.Handler, body string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func errorCode(t *testing.T, body []byte) int {
	t.Helper()
	var m struct {
		Error struct{ Code int } `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("not a JSON-RPC error: %s", body)
	}
	return m.Error.Code
}

// A dead HTTP upstream still lets the proxy judge its own input.
func TestBadInput(t *testing.T) {
	tenants, _ := identity.ParseTenants("s3cret-token-0123456789=acme")
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: "http://127.0.0.1:1/mcp"}, MaxBody: 1 << 10, Tenants: tenants})
	if err != nil {
		t.Fatal(err)
	}
	auth := map[string]string{"Authorization": "Bearer s3cret-token-0123456789"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"Authorization": auth["Authorization"]}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		code   int
	}{
		{"no token", `{}`, nil, 401, 0},
		{"wrong token", `{}`, map[string]string{"Authorization": "Bearer nope"}, 401, 0},
		{"malformed JSON", `{"jsonrpc":"2.0",`, auth, 400, -32700},
		{"not a request", `{"jsonrpc":"2.0","id":1}`, auth, 400, -32600},
		{"batch in 2025-11-25", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, with("Mcp-Protocol-Version", "2025-11-25"), 400, -32600},
		{"too large", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"p":"` + strings.Repeat("a", 2000) + `"}}`, auth, 413, 0},
		{"foreign origin", `{}`, with("Origin", "http://evil.example"), 403, 0},
		{"upstream down", `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, auth, 502, codeUpstream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := post(t, p, tt.body, tt.hdr)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.code != 0 {
				if got := errorCode(t, rec.Body.Bytes()); got != tt.code {
					t.Errorf("code %d, want %d", got, tt.code)
				}
			}
		})
	}
	req := httptest.NewRequest(http.MethodPost, "http://attacker.example:8080/mcp", strings.NewReader(`{}`))
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("a rebinding Host got %d, want 403", rec.Code)
	}
}

// The upstream dying mid-call answers every request in flight with an
// error, on the HTTP face and on the stdio face.
func TestUpstreamDiesMidCall(t *testing.T) {
	// A stdio "server" that reads one message and dies without answering.
	die := &mcpproxy.CommandUpstream{Command: "sh", Args: []string{"-c", "read line; exit 3"}}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: die})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		done <- post(t, p, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	}()
	select {
	case rec := <-done:
		if got := errorCode(t, bytes.TrimPrefix(lastData(rec.Body.Bytes()), nil)); got != codeUpstream {
			t.Errorf("code %d, want %d: %s", got, codeUpstream, rec.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request hangs after the upstream died")
	}

	in, inW := io.Pipe()
	outR, out := io.Pipe()
	go p.ServeStdio(t.Context(), in, out)
	go inW.Write([]byte(`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}}` + "\n"))
	var resp struct {
		ID    string `json:"id"`
		Error struct{ Code int }
	}
	dec := json.NewDecoder(outR)
	errc := make(chan error, 1)
	go func() { errc <- dec.Decode(&resp) }()
	select {
	case err := <-errc:
		if err != nil || resp.ID != "a" || resp.Error.Code != codeUpstream {
			t.Errorf("stdio: %+v, %v", resp, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stdio request hangs after the upstream died")
	}
	inW.Close()
}

// lastData returns the last SSE data payload of body, or body itself
// when it is plain JSON.
func lastData(body []byte) []byte {
	if !bytes.HasPrefix(body, []byte("id:")) && !bytes.HasPrefix(body, []byte("data:")) && !bytes.HasPrefix(body, []byte("event:")) {
		return body
	}
	var last []byte
	r := sse.NewReader(bytes.NewReader(body), 0)
	for {
		ev, err := r.Next()
		if err != nil {
			return last
		}
		if len(ev.Data) > 0 {
			last = ev.Data
		}
	}
}

// Unknown methods, unknown fields and _meta cross the proxy untouched;
// the upstream is a loopback server of the test's own that echoes.
func TestTransparency(t *testing.T) {
	var seen []byte
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Custom", r.Header.Get("Mcp-Param-Region"))
		io.WriteString(w, `{"jsonrpc":"2.0","id":9,"result":{"x-new":{"deep":[1,"2"]},"_meta":{"k":"v"}},"x-env":1}`)
	}))
	defer echo.Close()
	p, _ := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: echo.URL}})
	body := `{"jsonrpc":"2.0","id":9,"method":"vendor/frobnicate","params":{"_meta":{"a":1},"zz":[true]}}`
	rec := post(t, p, body, map[string]string{"Mcp-Param-Region": "eu"})
	if string(seen) != body {
		t.Errorf("upstream saw %s", seen)
	}
	if rec.Body.String() != `{"jsonrpc":"2.0","id":9,"result":{"x-new":{"deep":[1,"2"]},"_meta":{"k":"v"}},"x-env":1}` {
		t.Errorf("client saw %s", rec.Body)
	}
	if rec.Header().Get("Mcp-Custom") != "eu" {
		t.Error("Mcp-Param-* headers must reach the upstream, and its headers the client")
	}
}

func TestParseCommand(t *testing.T) {
	c, err := mcpproxy.ParseCommand(`python3 -m "my server" --name 'a b'`)
	if err != nil || c.Command != "python3" || strings.Join(c.Args, "|") != "-m|my server|--name|a b" {
		t.Errorf("got %+v, %v", c, err)
	}
	if _, err := mcpproxy.ParseCommand(`x "open`); err == nil {
		t.Error("an unclosed quote must be an error")
	}
}

// An HTTP upstream that dies in the middle of an SSE response: the
// client still gets an error for its request.
func TestHTTPUpstreamDiesMidStream(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-stream
	}))
	defer up.Close()
	p, _ := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL}})
	rec := post(t, p, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}`, nil)
	if got := errorCode(t, lastData(rec.Body.Bytes())); got != codeUpstream {
		t.Errorf("code %d, want %d: %s", got, codeUpstream, rec.Body)
	}
	if !strings.Contains(rec.Body.String(), "notifications/progress") {
		t.Error("what the upstream sent before dying must reach the client")
	}
}

// A proxy that serves artifacts lists its artifact template, streamable,
// after the upstream's own (an upstream without templates answers
// -32601).
func TestArtifactTemplate(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`)
	}))
	defer up.Close()
	p, _ := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL, Transport: "streamable"}, Artifacts: newService(t)})
	rec := post(t, p, `{"jsonrpc":"2.0","id":1,"method":"resources/templates/list","params":{}}`, nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"uriTemplate":"spillway://artifacts/{id}"`) || !strings.Contains(rec.Body.String(), `"streamable":true`) {
		t.Errorf("templates: %d %s", rec.Code, rec.Body)
	}
	rec = post(t, p, `{"jsonrpc":"2.0","id":1,"method":"resources/templates/list","params":{"cursor":"2"}}`, nil)
	if strings.Contains(rec.Body.String(), "spillway://") {
		t.Errorf("the template is added to the first page only: %s", rec.Body)
	}
}

// Stateless era: a client closing its stream cancels the request at a
// stdio upstream (notifications/cancelled with the id the upstream knows).
func TestStatelessCancelPropagates(t *testing.T) {
	seen := filepath.Join(t.TempDir(), "seen")
	// A stdio "server" that records what it gets and answers only
	// tools/list (which the proxy sends first, to learn the tool's
	// Mcp-Param headers: were it left unanswered, the call would wait for
	// it past the client's cancel and, Send honouring its context, never
	// be sent at all). It answers neither server/discover nor initialize,
	// so its era cannot be learned: the request is forwarded as it is
	// (StrictEras says so at once; a bridged call's cancellation is
	// TestSharedChildKeepsClientsApart's).
	p, err := mcpproxy.New(mcpproxy.Options{StrictEras: true, Upstream: &mcpproxy.CommandUpstream{Command: "sh", Args: []string{"-c", `while read l; do echo "$l" >> ` + seen + `
		case "$l" in *'"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}\n' "$(echo "$l" | sed 's/.*"id":\([0-9]*\).*/\1/')";; esac; done`}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	url := serve(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"slow","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "slow")
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(seen)
		if strings.Contains(string(b), `"notifications/cancelled"`) {
			var call struct {
				ID json.RawMessage `json:"id"`
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"tools/call"`) {
					json.Unmarshal([]byte(line), &call)
				}
			}
			if call.ID == nil || !strings.Contains(string(b), `"requestId":`+string(call.ID)) {
				t.Errorf("cancelled names another id than the upstream's %s:\n%s", call.ID, b)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cancellation reached the upstream:\n%s", b)
		}
	}
}

// codeUpstream is the JSON-RPC error of a request whose upstream failed.
const codeUpstream = -32000
