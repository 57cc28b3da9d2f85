package mcpproxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// hangingUpstream is a hostile session-era Streamable HTTP upstream: it
// answers the handshake and tools/list, never answers a tools/call (its
// event stream stays open until the proxy closes it), answers any other
// request "method not found", and records every message it receives and
// every tools/call stream the proxy closed.
type hangingUpstream struct {
	mu       sync.Mutex
	messages []string
	closed   []string // ids of the tools/call requests whose stream the proxy closed
	sessions int
	calls    chan string
	answers  chan string // responses the client sent to the upstream's requests
	done     chan struct{}
}

func newHangingUpstream(t *testing.T) (*hangingUpstream, string) {
	h := &hangingUpstream{calls: make(chan string, 100), answers: make(chan string, 1), done: make(chan struct{})}
	url := serve(t, h)
	t.Cleanup(func() { close(h.done) })
	return h, url
}

func (h *hangingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	json.Unmarshal(body, &m)
	h.mu.Lock()
	h.messages = append(h.messages, string(body))
	h.mu.Unlock()
	reply := func(v string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%s}`, m.ID, v)
	}
	switch {
	case m.ID == nil || m.Method == "":
		if m.Method == "" && m.ID != nil { // a response: to the roots/list of ask
			select {
			case h.answers <- string(body):
			default:
			}
		}
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "initialize":
		h.mu.Lock()
		h.sessions++
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("hanging-session-%d", h.sessions))
		h.mu.Unlock()
		reply(`"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hanging","version":"1"}}`)
	case m.Method == "tools/list":
		reply(`"result":{"tools":[{"name":"hang","inputSchema":{"type":"object"}}]}`)
	case m.Method == "ping":
		reply(`"result":{}`)
	case m.Method == "tools/call" && bytes.Contains(body, []byte(`"name":"ask"`)):
		h.ask(w, r, m.ID)
	case m.Method == "tools/call":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		h.calls <- string(m.ID)
		select {
		case <-r.Context().Done():
			h.mu.Lock()
			h.closed = append(h.closed, string(m.ID))
			h.mu.Unlock()
		case <-h.done:
		}
	default:
		reply(`"error":{"code":-32601,"message":"Method not found"}`)
	}
}

// ask serves the tool "ask": on the call's stream it asks the client
// roots/list (after 300 ms), waits for the answer, then answers the call.
func (h *hangingUpstream) ask(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	time.Sleep(300 * time.Millisecond) // the client drops before the request
	fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"q1\",\"method\":\"roots/list\"}\n\n")
	w.(http.Flusher).Flush()
	select {
	case a := <-h.answers:
		text, _ := json.Marshal("the client answered: " + a)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%s}]}}\n\n", id, text)
	case <-r.Context().Done():
	case <-h.done:
	}
}

// hangingProxy serves a proxy with options o in front of a new
// hangingUpstream; it returns the upstream and the proxy's /mcp URL.
func hangingProxy(t *testing.T, o mcpproxy.Options) (*hangingUpstream, string) {
	t.Helper()
	up, upURL := newHangingUpstream(t)
	o.Upstream = &mcpproxy.HTTPUpstream{URL: upURL}
	p, err := mcpproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return up, serve(t, p)
}

// nextCall waits for a tools/call to reach the upstream and returns the
// id the upstream saw.
func (h *hangingUpstream) nextCall(t *testing.T) string {
	t.Helper()
	select {
	case id := <-h.calls:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the upstream")
		return ""
	}
}

// received returns every message the upstream received and the ids of
// the calls whose stream was closed.
func (h *hangingUpstream) received() (messages, closed []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.messages...), append([]string(nil), h.closed...)
}

// cancelledFor reports whether the upstream received notifications/cancelled
// for request id.
func (h *hangingUpstream) cancelledFor(id string) bool {
	msgs, _ := h.received()
	for _, s := range msgs {
		var m struct {
			Method string
			Params struct{ RequestID json.RawMessage }
		}
		if json.Unmarshal([]byte(s), &m) == nil && m.Method == "notifications/cancelled" && string(m.Params.RequestID) == id {
			return true
		}
	}
	return false
}

// streamCaller is a raw HTTP client of one tenant, in one era, declaring
// capabilities.streams (or nothing, when caps is nil).
type streamCaller struct {
	url, token, era string
	caps            map[string]any
	session         string
}

// post sends one message and returns the response.
func (c *streamCaller) post(t *testing.T, msg map[string]any) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(c.newRequest(msg))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// newRequest is the POST of msg, with the headers and _meta of c's era.
func (c *streamCaller) newRequest(msg map[string]any) *http.Request {
	params, _ := msg["params"].(map[string]any)
	if params == nil {
		params = map[string]any{}
		msg["params"] = params
	}
	req, _ := http.NewRequest(http.MethodPost, c.url, nil)
	if c.era == "stateless" {
		meta, _ := params["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
		meta["io.modelcontextprotocol/clientCapabilities"] = c.caps
		meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "t", "version": "1"}
		params["_meta"] = meta
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", msg["method"].(string))
		if n, ok := params["name"].(string); ok {
			req.Header.Set("Mcp-Name", n)
		}
	} else if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	msg["jsonrpc"] = "2.0"
	body, _ := json.Marshal(msg)
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req
}

// messages reads an answer to its end: its JSON-RPC messages, raw.
func messages(t *testing.T, resp *http.Response) []string {
	t.Helper()
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		if len(bytes.TrimSpace(b)) == 0 {
			return nil
		}
		return []string{string(b)}
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
			out = append(out, d)
		}
	}
	return out
}

// request sends a request and returns its response message, raw.
func (c *streamCaller) request(t *testing.T, id int, method string, params map[string]any) string {
	t.Helper()
	msgs := messages(t, c.post(t, map[string]any{"id": id, "method": method, "params": params}))
	if len(msgs) == 0 {
		t.Fatalf("%s: no answer", method)
	}
	return msgs[len(msgs)-1]
}

// initialize opens a session in the session era (nothing in the other).
func (c *streamCaller) initialize(t *testing.T) {
	t.Helper()
	if c.era != "session" {
		return
	}
	resp := c.post(t, map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": c.caps, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	c.session = resp.Header.Get("Mcp-Session-Id")
	messages(t, resp)
	if c.session == "" {
		t.Fatal("initialize: no session")
	}
	resp = c.post(t, map[string]any{"method": "notifications/initialized"})
	resp.Body.Close()
}

// openStream calls the hanging tool, reads its stream/create and drops
// the connection; it returns the stream's id.
func (c *streamCaller) openStream(t *testing.T, id int) string {
	t.Helper()
	resp := c.post(t, map[string]any{"id": id, "method": "tools/call", "params": map[string]any{"name": "hang", "arguments": map[string]any{}}})
	defer resp.Body.Close() // the drop: the call goes on without a reader
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			Method string
			Params struct{ Stream struct{ StreamID string } }
		}
		if json.Unmarshal([]byte(d), &m) == nil && m.Method == "notifications/stream/create" {
			return m.Params.Stream.StreamID
		}
	}
	t.Fatalf("tools/call: no notifications/stream/create (%s, %s)", resp.Status, resp.Header.Get("Content-Type"))
	return ""
}

// withoutID is a response without its id, for comparing two answers.
func withoutID(t *testing.T, raw string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("not JSON-RPC: %s", raw)
	}
	delete(m, "id")
	b, _ := json.Marshal(m)
	return string(b)
}

// TestStreamAbandoned: a stream left alone past resumeInterval.max (2 s
// here) is abandoned: the upstream is told (notifications/cancelled in the
// session era; its request's connection closed in 2026-07-28), and resume
// and poll then answer -32011. Another tenant's poll or resume of the
// stream's id, while it lives, gets exactly the unknown-id answer, as does
// (session era) a poll from another session of the same tenant.
func TestStreamAbandoned(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"session", "stateless"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			tenants, err := identity.NewTenants(map[string]string{"tokena-tokena-tokena": "a", "tokenb-tokenb-tokenb": "b"})
			if err != nil {
				t.Fatal(err)
			}
			up, url := hangingProxy(t, mcpproxy.Options{Tenants: tenants,
				Streams: mcpproxy.StreamOptions{ResumeMin: time.Second, ResumeMax: 2 * time.Second}})
			caps := map[string]any{"streams": map[string]any{}}
			a := &streamCaller{url: url, token: "tokena-tokena-tokena", era: era, caps: caps}
			b := &streamCaller{url: url, token: "tokenb-tokenb-tokenb", era: era, caps: caps}
			a.initialize(t)
			b.initialize(t)
			stream := a.openStream(t, 7)
			upID := up.nextCall(t)

			// Another tenant's resume and poll of the live stream's id: the
			// unknown-id answer, identical.
			unknown := strings.Repeat("0", 32)
			for _, method := range []string{"stream/poll", "stream/resume"} {
				want := withoutID(t, b.request(t, 20, method, map[string]any{"streamId": unknown}))
				got := withoutID(t, b.request(t, 21, method, map[string]any{"streamId": stream}))
				if got != want || !strings.Contains(want, `"code":-32011`) {
					t.Errorf("%s of another tenant's stream: %s; of an unknown id: %s (want the same -32011 error)", method, got, want)
				}
			}
			if era == "session" {
				// The same tenant in another session: the stream is bound to
				// the session that created it.
				a2 := &streamCaller{url: url, token: a.token, era: era, caps: caps}
				a2.initialize(t)
				want := withoutID(t, a2.request(t, 25, "stream/poll", map[string]any{"streamId": unknown}))
				if got := withoutID(t, a2.request(t, 26, "stream/poll", map[string]any{"streamId": stream})); got != want {
					t.Errorf("stream/poll from another session of the same tenant: %s, want the unknown-id answer %s", got, want)
				}
			}
			if len(a.request(t, 22, "stream/poll/all", map[string]any{})) == 0 ||
				!strings.Contains(a.request(t, 23, "stream/poll/all", map[string]any{}), stream) {
				t.Error("stream/poll/all of the stream's tenant lacks it")
			}
			if all := b.request(t, 24, "stream/poll/all", map[string]any{}); strings.Contains(all, stream) {
				t.Errorf("stream/poll/all of another tenant shows the stream: %s", all)
			}
			// The poll above counts as a touch of a's stream: max runs from it.
			started := time.Now()

			for deadline := started.Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				_, closed := up.received()
				if up.cancelledFor(upID) || (era == "stateless" && len(closed) > 0) {
					break
				}
				if time.Now().After(deadline) {
					msgs, closed := up.received()
					t.Fatalf("10 s after the drop (max 2 s), the upstream was neither told to cancel %s nor closed (closed: %v):\n%s",
						upID, closed, strings.Join(msgs, "\n"))
				}
			}
			if gone := time.Since(started); gone < 2*time.Second {
				t.Errorf("the stream was abandoned after %v, before max (2 s)", gone)
			}
			if era == "session" && !up.cancelledFor(upID) {
				t.Errorf("the upstream got no notifications/cancelled for %s", upID)
			}
			for i, method := range []string{"stream/resume", "stream/poll"} {
				want := withoutID(t, a.request(t, 30+i, method, map[string]any{"streamId": unknown}))
				got := withoutID(t, a.request(t, 40+i, method, map[string]any{"streamId": stream}))
				if got != want || !strings.Contains(got, `"code":-32011`) {
					t.Errorf("%s of the abandoned stream: %s, want the unknown-id answer %s", method, got, want)
				}
			}
		})
	}
}

// TestStreamUndeclared: a client that declares nothing is unaffected.
// Its initialize offers no streams, and its stream/* requests go to the
// upstream as before, which answers "method not found", and the client
// gets the upstream's bytes.
func TestStreamUndeclared(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"session", "stateless"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			up, url := hangingProxy(t, mcpproxy.Options{})
			c := &streamCaller{url: url, era: era, caps: map[string]any{}}
			if era == "session" {
				resp := c.post(t, map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
					"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
				c.session = resp.Header.Get("Mcp-Session-Id")
				if init := messages(t, resp); len(init) != 1 || strings.Contains(init[0], `"streams"`) {
					t.Errorf("initialize of a client that declared nothing: %v", init)
				}
				c.post(t, map[string]any{"method": "notifications/initialized"}).Body.Close()
			}
			for i, method := range []string{"stream/poll", "stream/resume", "stream/poll/all"} {
				id := 10 + i
				got := c.request(t, id, method, map[string]any{"streamId": strings.Repeat("0", 32)})
				want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,"message":"Method not found"}}`, id)
				if got != want {
					t.Errorf("%s: %s, want the upstream's answer %s", method, got, want)
				}
				msgs, _ := up.received()
				if !strings.Contains(strings.Join(msgs, "\n"), `"method":"`+method+`"`) {
					t.Errorf("%s never reached the upstream", method)
				}
			}
		})
	}
}
