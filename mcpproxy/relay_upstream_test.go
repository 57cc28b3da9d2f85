package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy/policytest"
)

// seen records what one upstream received.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func (s *seen) record(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	s.body = append(s.body, string(b))
}

// recordingUpstream records every request and answers each with an
// empty result for id 1.
func recordingUpstream(t *testing.T) (*seen, *httptest.Server) {
	s := &seen{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	t.Cleanup(up.Close)
	return s, up
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// relayPost posts body to the proxy's url with the headers in hdr.
func relayPost(t *testing.T, url, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// No client credential, of any form, and no identity a client asserts
// reaches the upstream; the configured URL reaches it whole. Before: the
// client's query replaced the configured one (the upstream's ?key= was
// lost, the client's ?access_token= arrived), and Forwarded,
// X-Forwarded-For, X-Real-IP, Cookie, X-Api-Key and a header named in
// Connection all passed.
func TestRelayUpstreamSeesOnlySpillway(t *testing.T) {
	got, up := recordingUpstream(t)
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL + "/mcp?key=upstream-key", Transport: "streamable",
		Header: http.Header{"Authorization": {"Bearer spillway-own"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	url := serve(t, p)
	resp := relayPost(t, url+"?access_token=client-token", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{
		"Authorization": "Bearer client-token", "Cookie": "sid=client-cookie", "X-Api-Key": "client-key",
		"Forwarded": "for=203.0.113.9", "X-Forwarded-For": "203.0.113.9", "X-Forwarded-Host": "evil.example",
		"X-Real-Ip": "203.0.113.9", "Connection": "X-Hop", "X-Hop": "hop-value",
		"Mcp-Protocol-Version": "2025-11-25", "Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	if got.count() != 1 {
		t.Fatalf("the upstream got %d requests", got.count())
	}
	r := got.reqs[0]
	if r.URL.RawQuery != "key=upstream-key" || r.URL.Path != "/mcp" {
		t.Errorf("the upstream was asked %s?%s, want /mcp?key=upstream-key", r.URL.Path, r.URL.RawQuery)
	}
	if a := r.Header.Values("Authorization"); len(a) != 1 || a[0] != "Bearer spillway-own" {
		t.Errorf("Authorization at the upstream: %q", a)
	}
	for _, k := range []string{"Cookie", "X-Api-Key", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip", "X-Hop"} {
		if v := r.Header.Get(k); v != "" {
			t.Errorf("%s reached the upstream: %q", k, v)
		}
	}
	for k, vs := range r.Header {
		if strings.Contains(strings.Join(vs, " "), "client-") {
			t.Errorf("a client credential reached the upstream in %s: %q", k, vs)
		}
	}
	if r.Header.Get("Mcp-Protocol-Version") != "2025-11-25" || r.Header.Get("Traceparent") == "" {
		t.Errorf("the transport's headers were lost: %v", r.Header)
	}
}

// An upstream's redirect to another origin is not followed: the
// upstream's credentials and the client's body stay home. Before: the
// relay followed a 307 with both.
func TestRelayRedirectStaysHome(t *testing.T) {
	elsewhere, other := recordingUpstream(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer up.Close()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL, Transport: "streamable",
		Header: http.Header{"Authorization": {"Bearer spillway-own"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	resp := relayPost(t, serve(t, p), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"secret-body"}}`, nil)
	io.Copy(io.Discard, resp.Body)
	if n := elsewhere.count(); n != 0 {
		t.Fatalf("the redirect was followed to another origin: it got %d requests, Authorization %q, body %q",
			n, elsewhere.reqs[0].Header.Get("Authorization"), elsewhere.body[0])
	}
	if resp.StatusCode < 300 {
		t.Errorf("a refused redirect answered %s", resp.Status)
	}
}

// An upstream's 401 refuses Spillway's credentials (the client's never
// reach it): the client gets a 502 with a JSON-RPC error for its request,
// not a WWW-Authenticate that would start an OAuth flow against the
// upstream's authorization server, in a loop. Before: 401 (and 403)
// relayed as is.
func TestRelayUpstream401IsNotTheClients(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) { upstreamRefusal(t, status) })
	}
}

// upstreamRefusal is TestRelayUpstream401IsNotTheClients for an upstream
// that answers status with a WWW-Authenticate challenge (a 403 asks for
// more scopes, RFC 6750 insufficient_scope).
func upstreamRefusal(t *testing.T, status int) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", resource_metadata="https://up.example/.well-known/oauth-protected-resource"`)
		http.Error(w, "refused", status)
	}))
	defer up.Close()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL, Transport: "streamable"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	resp := relayPost(t, serve(t, p), `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("WWW-Authenticate") != "" {
		t.Fatalf("answered %s, WWW-Authenticate %q: %s", resp.Status, resp.Header.Get("WWW-Authenticate"), body)
	}
	var m struct {
		ID    int `json:"id"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.ID != 7 || !strings.Contains(m.Error.Message, "refused Spillway's credentials") {
		t.Errorf("body %s (%v)", body, err)
	}
}

// An unreachable upstream is logged without its URL's query or user
// information, which may be credentials. Before: the whole URL.
func TestRelayLogsNoUpstreamCredentials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var logs policytest.Buffer
	p, err := mcpproxy.New(mcpproxy.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Upstream: &mcpproxy.HTTPUpstream{URL: "http://user:pass-secret@" + addr + "/mcp?key=key-secret", Transport: "streamable"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	resp := relayPost(t, serve(t, p), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %s", resp.Status)
	}
	t.Log(logs.String())
	if s := logs.String(); strings.Contains(s, "secret") || !strings.Contains(s, "unreachable") {
		t.Errorf("log: %s", s)
	}
}

// bigObjectEvent is an SSE event answering id with a result whose
// structuredContent is one object of small members, n bytes or more:
// nothing in it spills, all of it is held while it is read.
func bigObjectEvent(id string, n int) []byte {
	var b strings.Builder
	b.WriteString(`data: {"jsonrpc":"2.0","id":` + id + `,"result":{"content":[],"structuredContent":{`)
	for i := 0; b.Len() < n; i++ {
		b.WriteString(`"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i) + `,`)
	}
	b.WriteString(`"end":true}}}` + "\n\n")
	return []byte(b.String())
}

// TestInlineMaxAcrossCalls: two answers that each fit --max-message but
// not --inline-max together. While the first is still being read (its
// upstream stalls mid-event), the second's client gets a JSON-RPC error
// for it; the first then arrives whole, and a third, alone, fits. Before
// --inline-max both were held whatever their number.
func TestInlineMaxAcrossCalls(t *testing.T) {
	const size = 768 << 10
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if req.Method != "tools/call" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{}}`)
			return
		}
		ev := bigObjectEvent(string(req.ID), size)
		w.Header().Set("Content-Type", "text/event-stream")
		if req.Params.Name == "stall" {
			w.Write(ev[:700<<10])
			w.(http.Flusher).Flush()
			held <- struct{}{}
			<-release
			ev = ev[700<<10:]
		}
		w.Write(ev)
	}))
	t.Cleanup(up.Close)
	// Cleanups run last first: a failure before the upstream is released
	// releases it, so that up.Close does not wait for ever on its handler.
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	url := proxyURL(t, mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL, Transport: "streamable"},
		SpillDir: t.TempDir(), InlineMax: 1 << 20})
	call := func(id int, name string) map[string]json.RawMessage {
		resp := relayPost(t, url, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"`+name+`"}}`, nil)
		defer resp.Body.Close()
		var got map[string]json.RawMessage
		sseMessages(t.Context(), resp, func(m map[string]json.RawMessage) { got = m })
		return got
	}
	first := make(chan map[string]json.RawMessage, 1)
	go func() { first <- call(1, "stall") }()
	<-held
	// The first answer's 700 KiB are flushed, most likely read by now,
	// not surely. Whichever of two answers comes second to the memory is
	// refused: a second one, at once, or the first, whose reader then
	// discards the rest of its event and says so when the event ends
	// (after the release). So ask a few times, then release: one of the
	// answers must have been refused, never both held.
	time.Sleep(100 * time.Millisecond)
	var refused map[string]json.RawMessage // a refused second answer
	for n, until := 0, time.Now().Add(2*time.Second); refused == nil && (n < 5 || time.Now().Before(until)); n++ {
		m := call(2, "whole")
		if m["error"] != nil {
			refused = m
		} else if len(m["result"]) < size-1024 {
			t.Fatalf("second answer: %.200s", m["result"])
		}
	}
	releaseOnce()
	m := <-first
	if refused == nil {
		refused = m // then the first lost
	} else if len(m["result"]) < size-1024 {
		t.Fatalf("first answer, once its upstream went on: result %.200s, error %s", m["result"], m["error"])
	}
	if !strings.Contains(string(refused["error"]), "no room") {
		t.Fatalf("no answer refused, or refused for another reason: error %s, want one saying there is no room", refused["error"])
	}
	if m := call(3, "whole"); len(m["result"]) < size-1024 {
		t.Fatalf("third answer, alone: result %.200s, error %s", m["result"], m["error"])
	}
}

// TestJSONAnswerTooLarge: a JSON body past --max-message answers its
// request with a JSON-RPC error saying so, whole (before: 502 with
// "upstream response unreadable" as text/plain, which a client waiting for
// a JSON-RPC answer cannot read), with the body sent chunked or with its
// length (the upstream's Content-Length is its own: the error's body is
// read whole, to its end).
func TestJSONAnswerTooLarge(t *testing.T) {
	for _, sized := range []bool{false, true} {
		t.Run(map[bool]string{false: "chunked", true: "Content-Length"}[sized], func(t *testing.T) { jsonAnswerTooLarge(t, sized) })
	}
}

func jsonAnswerTooLarge(t *testing.T, sized bool) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		ev := bigObjectEvent(string(req.ID), 2<<20)
		body := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
		w.Header().Set("Content-Type", "application/json")
		if sized {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		w.Write(body)
	}))
	t.Cleanup(up.Close)
	url := proxyURL(t, mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL, Transport: "streamable"},
		SpillDir: t.TempDir(), MaxMessage: 1 << 20})
	resp := relayPost(t, url, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"big"}}`, nil)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer (Content-Length %d): %v after %d bytes", resp.ContentLength, err, len(b))
	}
	var m struct {
		ID    int
		Error struct{ Message string }
	}
	if err := json.Unmarshal(b, &m); err != nil || m.ID != 5 || !strings.Contains(m.Error.Message, "exceeds the 1048576 byte limit") {
		t.Errorf("a JSON answer past --max-message: %s, id %d, error %q (%v)", resp.Status, m.ID, m.Error.Message, err)
	}
}

// TestHTTPUpstreamStallsMidEvent: a Streamable HTTP upstream that sends
// half of an answer's event and then nothing has its stream closed after
// UpstreamStallTimeout, and the call gets an error saying so instead of
// waiting as long as its client does. One that is silent for longer
// before its answer's event (a slow tool) is never cut.
func TestHTTPUpstreamStallsMidEvent(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage       `json:"id"`
			Method string                `json:"method"`
			Params struct{ Name string } `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if req.Method != "tools/call" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{}}`)
			return
		}
		ev := `data: {"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"content":[{"type":"text","text":"done"}]}}` + "\n\n"
		if req.Params.Name == "half-json" { // half a JSON body, no length
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, ev[len("data: "):len(ev)/2])
			w.(http.Flusher).Flush()
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		switch req.Params.Name {
		case "half":
			io.WriteString(w, ev[:len(ev)/2])
			w.(http.Flusher).Flush()
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		case "slow":
			time.Sleep(1500 * time.Millisecond) // three timeouts before the event starts
			io.WriteString(w, ev)
		}
	}))
	t.Cleanup(up.Close)
	url := proxyURL(t, mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL, Transport: "streamable"},
		UpstreamStallTimeout: 500 * time.Millisecond})
	call := patientCaller(t, url)
	if m, d := call(1, "half"); !strings.Contains(string(m["error"]), "stalled mid-message") || d > 10*time.Second {
		t.Errorf("a call whose upstream stalled mid-event: after %v, %s", d, m["error"])
	}
	if m, d := call(2, "slow"); !strings.Contains(string(m["result"]), "done") {
		t.Errorf("a call whose upstream was silent before its answer: after %v, result %s, error %s", d, m["result"], m["error"])
	}
	// Half a JSON body: the same, as a JSON-RPC error in a JSON body.
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"half-json"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req) // the client's own patience
	if err != nil {
		t.Fatalf("a JSON answer stalled midway: after %v, %v", time.Since(start), err)
	}
	defer resp.Body.Close()
	var m struct {
		ID    int
		Error struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.ID != 3 || !strings.Contains(m.Error.Message, "stalled mid-message") {
		t.Errorf("a JSON answer stalled midway: after %v, %s, id %d, error %q (%v)", time.Since(start), resp.Status, m.ID, m.Error.Message, err)
	}
}

// A legacy HTTP+SSE upstream (the proxy terminates the protocol for it)
// that stops in the middle of an event on its stream: the call waiting
// on it gets an error within the stall timeout, the stream is opened
// again, and the next call is answered.
func TestLegacyUpstreamStallsMidEvent(t *testing.T) {
	var mu sync.Mutex
	var stream chan string // the event stream now open
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet:
			out := make(chan string, 8)
			mu.Lock()
			stream = out
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: endpoint\ndata: /messages\n\n")
			w.(http.Flusher).Flush()
			for {
				select {
				case e := <-out:
					io.WriteString(w, e)
					w.(http.Flusher).Flush()
					if !strings.HasSuffix(e, "\n\n") {
						<-r.Context().Done() // half an event, then nothing
						return
					}
				case <-r.Context().Done():
					return
				}
			}
		case r.URL.Path != "/messages":
			w.WriteHeader(http.StatusMethodNotAllowed) // no Streamable HTTP
		default:
			var req struct {
				ID     json.RawMessage       `json:"id"`
				Method string                `json:"method"`
				Params struct{ Name string } `json:"params"`
			}
			json.NewDecoder(r.Body).Decode(&req)
			w.WriteHeader(http.StatusAccepted)
			if req.ID == nil {
				return
			}
			result := `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"old","version":"1"}}`
			if req.Method == "tools/call" {
				result = `{"content":[{"type":"text","text":"done"}]}`
			}
			ev := "event: message\ndata: " + `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + result + "}\n\n"
			if req.Params.Name == "half" {
				ev = ev[:len(ev)/2]
			}
			mu.Lock()
			out := stream
			mu.Unlock()
			out <- ev
		}
	}))
	t.Cleanup(up.Close)
	url := proxyURL(t, mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL + "/sse", Transport: "sse"},
		UpstreamStallTimeout: 500 * time.Millisecond})
	call := patientCaller(t, url)
	if m, d := call(1, "half"); !strings.Contains(string(m["error"]), "stalled mid-message") || d > 10*time.Second {
		t.Errorf("a call whose legacy upstream stalled mid-event: after %v, %s", d, m["error"])
	}
	var m map[string]json.RawMessage
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(100 * time.Millisecond) {
		if m, _ = call(2, "ok"); strings.Contains(string(m["result"]), "done") {
			return
		}
	}
	t.Errorf("no call answered after the stall: %s", m["error"])
}

// patientCaller returns a stateless tools/call of the tool named, as a
// client waiting at most 20 s: its last message and how long it took.
func patientCaller(t *testing.T, url string) func(id int, name string) (map[string]json.RawMessage, time.Duration) {
	return func(id int, name string) (map[string]json.RawMessage, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := statelessPost(ctx, url, id, "tools/call", map[string]any{"name": name})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]json.RawMessage
		sseMessages(ctx, resp, func(m map[string]json.RawMessage) { got = m })
		return got, time.Since(start)
	}
}

// proxyURL serves a proxy made with o (its logs discarded) until the test
// ends and returns its /mcp URL.
func proxyURL(t *testing.T, o mcpproxy.Options) string {
	t.Helper()
	o.Logger = slog.New(slog.DiscardHandler)
	p, err := mcpproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() }) // before the upstream's own cleanup: register that one first
	return serve(t, p)
}
