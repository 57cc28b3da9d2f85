package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// sessionPost posts a session-era message and returns the response; with
// a token, as its bearer.
func sessionPost(ctx context.Context, url, sid, body string, token ...string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for _, tok := range token {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return http.DefaultClient.Do(req)
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// initSession opens a session-era session and returns its id; with a
// token, as its bearer.
func initSession(t *testing.T, ctx context.Context, url string, token ...string) string {
	t.Helper()
	resp, err := sessionPost(ctx, url, "", initBody, token...)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: no session (%s)", resp.Status)
	}
	if r, err := sessionPost(ctx, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, token...); err == nil {
		r.Body.Close()
	}
	return sid
}

// event is one SSE event as a raw client sees it.
type event struct{ id, data string }

// readEvents yields events until f returns false or the stream ends.
func readEvents(r io.Reader, f func(event) bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 128<<20)
	var ev event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev != (event{}) && !f(ev) {
				return
			}
			ev = event{}
		case strings.HasPrefix(line, "id:"):
			ev.id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			ev.data += strings.TrimPrefix(line[5:], " ")
		}
	}
}

// TestResumeTakesOverPendingResponse: a client's POST stream goes silent
// in the middle of a call (a half-open connection the server cannot tell
// from a live one) and the client resumes it with GET and Last-Event-ID:
// the GET takes the stream over and gets every progress notification and
// the result exactly once, though they were meant for the old connection.
func TestResumeTakesOverPendingResponse(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := initSession(t, ctx, url)
	resp, err := sessionPost(ctx, url, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"p"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	last := ""
	readEvents(resp.Body, func(ev event) bool {
		if ev.id != "" {
			last = ev.id
		}
		if ev.data != "" {
			seen[ev.data]++
		}
		return len(seen) < 3
	})
	defer resp.Body.Close() // open, but never read again
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", last)
	get, err := http.DefaultClient.Do(req)
	if err != nil || get.StatusCode != http.StatusOK {
		t.Fatalf("resuming: %v %v", err, get)
	}
	defer get.Body.Close()
	result := 0
	readEvents(get.Body, func(ev event) bool {
		seen[ev.data]++
		if strings.Contains(ev.data, `"id":5`) {
			result++
			return false
		}
		return true
	})
	progress := 0
	for d, n := range seen {
		if n > 1 {
			t.Errorf("delivered %d times: %s", n, d)
		}
		if strings.Contains(d, "notifications/progress") {
			progress++
		}
	}
	if result != 1 || progress != 100 {
		t.Fatalf("after resuming: %d results, %d distinct progress notifications (want 1 and 100)", result, progress)
	}
}

// TestCloseEndsOpenStreams: closing the proxy ends a client's open GET
// stream at once, so a server's graceful shutdown does not wait for it.
func TestCloseEndsOpenStreams(t *testing.T) {
	p, url := childProxy(t, "plain", mcpproxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := initSession(t, ctx, url)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, resp.Body); close(ended) }()
	p.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the GET stream stayed open after Close")
	}
}

// TestRelayOffloadsResultOnGET: an HTTP upstream closes a call's stream
// early (SEP-1699 polling) and delivers the result on the session's GET
// stream; the proxy still offloads it under the caller's context.
func TestRelayOffloadsResultOnGET(t *testing.T) {
	pending := make(chan json.RawMessage, 1)
	up := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case id := <-pending:
				text := strings.Repeat("late result ", 20000)
				res, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
				fmt.Fprintf(w, "id: g1\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", id, res)
			case <-r.Context().Done():
			}
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &m)
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "S1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"u","version":"1"}}}`, m.ID)
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, "id: p1\nretry: 100\ndata:\n\n") // priming, then closed for polling
			pending <- m.ID
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	svc := newService(t)
	eng, err := policy.New(t.Context(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up, Transport: "streamable"}, Artifacts: svc,
		Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	url := serve(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := initSession(t, ctx, url)
	resp, err := sessionPost(ctx, url, sid, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"late","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", "p1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got string
	readEvents(resp.Body, func(ev event) bool { got = ev.data; return !strings.Contains(ev.data, `"id":9`) })
	if !strings.Contains(got, "resource_link") || len(got) > 20000 {
		t.Fatalf("the result that came on the GET stream was not offloaded (%d bytes): %.200s", len(got), got)
	}
}

// TestSilentCallGetsHeadersAtOnce: a session-era call that sends nothing
// for a long time still gets its response headers and a priming event
// (an event id and a retry hint) at once, so a client's header timeout
// does not fire and the client has an id to resume from.
func TestSilentCallGetsHeadersAtOnce(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := initSession(t, ctx, url)
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second) // a client's header timeout
	defer hcancel()
	resp, err := sessionPost(hctx, url, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"silent","arguments":{}}}`)
	if err != nil {
		t.Fatalf("no response headers for a silent call: %v", err)
	}
	defer resp.Body.Close()
	var first event
	readEvents(resp.Body, func(ev event) bool { first = ev; return false })
	if first.id == "" {
		t.Fatalf("the stream did not open with an event id: %+v", first)
	}
}

// TestRelayedSessionBelongsToItsTenant: a session relayed to an HTTP
// upstream answers only the tenant that created it; another tenant with
// the session id gets what an unknown session gets.
func TestRelayedSessionBelongsToItsTenant(t *testing.T) {
	upstream, _, _ := bigServer(t)
	tenants, err := identity.ParseTenants("tok-aaaaaaaaaaaaaaaa=A,tok-bbbbbbbbbbbbbbbb=B")
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: upstream, Transport: "streamable"}, Tenants: tenants})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	url := serve(t, p)
	post := func(token, sid, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("tok-aaaaaaaaaaaaaaaa", "", initBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session: %s", resp.Status)
	}
	if got := post("tok-bbbbbbbbbbbbbbbb", sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`); got.StatusCode != http.StatusNotFound {
		t.Fatalf("tenant B used tenant A's session: %s", got.Status)
	}
	if got := post("tok-aaaaaaaaaaaaaaaa", sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`); got.StatusCode != http.StatusOK {
		t.Fatalf("tenant A's own session: %s", got.Status)
	}
}

// TestCancelledCallEndsItsStream: a client that cancels its call gets no
// response for it (the spec says so), so the POST stream that waited for
// it ends; before, it stayed open for ever and took the session's later
// server messages from the GET stream.
func TestCancelledCallEndsItsStream(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := initSession(t, ctx, url)
	resp, err := sessionPost(ctx, url, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"silent","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if r, err := sessionPost(ctx, url, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"no longer needed"}}`); err != nil || r.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %v %v", err, r)
	} else {
		r.Body.Close()
	}
	ended := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		ended <- string(b)
	}()
	select {
	case b := <-ended:
		if strings.Contains(b, `"id":7`) {
			t.Errorf("the cancelled call was answered: %s", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call's stream is still open after 5 s")
	}
}
