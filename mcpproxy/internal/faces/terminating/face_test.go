package terminating

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
)

// server is an upstream connection answering as a small MCP server of
// the session era would: initialize with the revision asked for, and any
// other request with a result naming its method and the tenant the
// connection was dialed for.
type server struct {
	tenant string
	recv   chan *jsonrpc.Message

	mu      sync.Mutex
	closed  bool
	methods []string // what it received, in order
}

func (s *server) Send(_ context.Context, m *jsonrpc.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return mux.ErrClosed
	}
	s.methods = append(s.methods, m.Method)
	if !m.IsRequest() {
		return nil
	}
	result, _ := json.Marshal(map[string]string{"method": m.Method, "tenant": s.tenant})
	if m.Method == "initialize" {
		result = []byte(`{"protocolVersion":"` + jsonrpc.StringMember(m.Params, "protocolVersion") + `","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)
	}
	s.recv <- jsonrpc.Response(m.ID, result) // buffered: a test sends few
	return nil
}

func (s *server) Recv() <-chan *jsonrpc.Message { return s.recv }
func (s *server) Err() error                    { return nil }

func (s *server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.recv)
	}
	return nil
}

// received is what the server got so far.
func (s *server) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.methods...)
}

// front is a Face behind an HTTP server; a request's tenant is its
// X-Tenant header (the caller's authentication, in the proxy).
type front struct {
	f     *Face
	url   string
	mu    sync.Mutex
	dials []*server
}

func newFront(t *testing.T, o Options) *front {
	t.Helper()
	fr := &front{}
	o.Dial = func(ctx context.Context) (mux.Conn, error) {
		s := &server{tenant: pool.TenantOf(ctx), recv: make(chan *jsonrpc.Message, 256)}
		fr.mu.Lock()
		fr.dials = append(fr.dials, s)
		fr.mu.Unlock()
		return s, nil
	}
	quiet := slog.New(slog.DiscardHandler)
	o.Methods = ownmethods.New(ownmethods.Options{Logger: quiet})
	o.Logger = quiet
	fr.f = New(o)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fr.f.ServeHTTP(w, r, ownmethods.Request{Tenant: r.Header.Get("X-Tenant")})
	}))
	fr.url = hs.URL
	t.Cleanup(func() {
		fr.f.Close()
		hs.Close()
	})
	return fr
}

// dialed is how many upstream connections the face opened.
func (fr *front) dialed() int {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return len(fr.dials)
}

// conn is the i-th upstream connection the face dialed.
func (fr *front) conn(i int) *server {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.dials[i]
}

// call is one HTTP request to the face.
type call struct {
	method, tenant, session, version, accept, contentType, body string
}

// reply is what the face answered.
type reply struct {
	status int
	header http.Header
	body   string
}

// msg decodes the body as one JSON-RPC message.
func (r reply) msg(t *testing.T) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.DecodeMessage([]byte(r.body))
	if err != nil {
		t.Fatalf("HTTP %d, body %q: %v", r.status, r.body, err)
	}
	return m
}

func (fr *front) do(t *testing.T, c call) reply {
	t.Helper()
	resp := fr.send(t, c)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// send sends c and returns the response unread.
func (fr *front) send(t *testing.T, c call) *http.Response {
	t.Helper()
	if c.method == "" {
		c.method = http.MethodPost
	}
	req, err := http.NewRequest(c.method, fr.url, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	set := func(k, v string) {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	if c.method == http.MethodPost && c.contentType == "" {
		c.contentType = "application/json"
	}
	if c.accept == "" {
		c.accept = "application/json"
	}
	set("Content-Type", c.contentType)
	set("Accept", c.accept)
	set("X-Tenant", c.tenant)
	set("Mcp-Session-Id", c.session)
	set("Mcp-Protocol-Version", c.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`

// startSession initializes a session for tenant and returns its id.
func (fr *front) startSession(t *testing.T, tenant string) string {
	t.Helper()
	r := fr.do(t, call{tenant: tenant, body: initBody})
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d, session %q, %s", r.status, sid, r.body)
	}
	if v := jsonrpc.StringMember(r.msg(t).Result, "protocolVersion"); v != "2025-11-25" {
		t.Fatalf("initialize answered %s", r.body)
	}
	fr.do(t, call{tenant: tenant, session: sid, version: "2025-11-25", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`})
	return sid
}

// An initialize creates a session with its own upstream connection,
// dialed for its tenant. The session answers that tenant only: another
// tenant's POST, GET and DELETE with its id are told it does not exist,
// and do not end it; its own DELETE does.
func TestSessionBoundToTenant(t *testing.T) {
	fr := newFront(t, Options{})
	sid := fr.startSession(t, "a")
	if fr.f.Sessions() != 1 || fr.dialed() != 1 || fr.conn(0).tenant != "a" {
		t.Fatalf("%d sessions, %d connections dialed", fr.f.Sessions(), fr.dialed())
	}
	echo := `{"jsonrpc":"2.0","id":1,"method":"x/echo"}`
	r := fr.do(t, call{tenant: "a", session: sid, version: "2025-11-25", body: echo})
	if m := r.msg(t); r.status != http.StatusOK || string(m.ID) != "1" || jsonrpc.StringMember(m.Result, "tenant") != "a" {
		t.Fatalf("the owner's call: HTTP %d %s", r.status, r.body)
	}

	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		accept := ""
		if method == http.MethodGet {
			accept = "text/event-stream"
		}
		r := fr.do(t, call{method: method, tenant: "b", session: sid, version: "2025-11-25", accept: accept, body: echo})
		if r.status != http.StatusNotFound || !strings.Contains(r.body, "session not found") {
			t.Errorf("another tenant's %s: HTTP %d %s", method, r.status, r.body)
		}
	}
	if fr.f.Sessions() != 1 {
		t.Fatal("another tenant's DELETE ended the session")
	}
	if got := fr.conn(0).received(); len(got) != 3 || got[2] != "x/echo" {
		t.Errorf("the session's upstream got %v; want initialize, initialized and the owner's call only", got)
	}

	if r := fr.do(t, call{method: http.MethodDelete, tenant: "a", session: sid}); r.status != http.StatusNoContent {
		t.Fatalf("the owner's DELETE: HTTP %d %s", r.status, r.body)
	}
	if fr.f.Sessions() != 0 {
		t.Error("the session outlived its DELETE")
	}
	if r := fr.do(t, call{tenant: "a", session: sid, version: "2025-11-25", body: echo}); r.status != http.StatusNotFound {
		t.Errorf("a POST after DELETE: HTTP %d %s", r.status, r.body)
	}
}

// A client that takes an event stream gets its answer as an event, after
// a priming event (an id, no data) that it may resume from.
func TestSessionEventStream(t *testing.T) {
	fr := newFront(t, Options{})
	sid := fr.startSession(t, "a")
	r := fr.do(t, call{tenant: "a", session: sid, version: "2025-11-25", accept: "application/json, text/event-stream",
		body: `{"jsonrpc":"2.0","id":"x","method":"x/echo"}`})
	if ct := r.header.Get("Content-Type"); r.status != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("HTTP %d, %s: %s", r.status, ct, r.body)
	}
	events := strings.Split(strings.TrimSpace(r.body), "\n\n")
	if len(events) != 2 {
		t.Fatalf("%d events, want a priming event and the answer: %q", len(events), r.body)
	}
	if !strings.Contains(events[0], "id: ") || strings.Contains(events[0], `"jsonrpc"`) {
		t.Errorf("the priming event: %q", events[0])
	}
	if !strings.Contains(events[1], "id: ") || !strings.Contains(events[1], `"id":"x"`) || !strings.Contains(events[1], `"result"`) {
		t.Errorf("the answer's event: %q", events[1])
	}
}

// A stateless-era request creates no session: it goes on a connection of
// its tenant's own (prepared with the proxy's initialize), and is
// answered as plain JSON; a POST of notifications alone gets 202.
func TestStatelessPOST(t *testing.T) {
	fr := newFront(t, Options{})
	for _, tenant := range []string{"a", "b", "a"} {
		r := fr.do(t, call{tenant: tenant, version: mcpheader.FirstStateless, body: `{"jsonrpc":"2.0","id":3,"method":"x/echo"}`})
		m := r.msg(t)
		if r.status != http.StatusOK || string(m.ID) != "3" || jsonrpc.StringMember(m.Result, "tenant") != tenant {
			t.Fatalf("tenant %s: HTTP %d %s", tenant, r.status, r.body)
		}
		if r.header.Get("Mcp-Session-Id") != "" {
			t.Errorf("a stateless request got a session: %s", r.header.Get("Mcp-Session-Id"))
		}
	}
	if fr.f.Sessions() != 0 || fr.dialed() != 2 {
		t.Fatalf("%d sessions, %d connections: want none, and one per tenant", fr.f.Sessions(), fr.dialed())
	}
	if got := fr.conn(0).received(); len(got) < 2 || got[0] != "initialize" || got[1] != "notifications/initialized" {
		t.Errorf("a tenant's connection got %v: want the proxy's handshake first", got)
	}
	r := fr.do(t, call{tenant: "a", version: mcpheader.FirstStateless, body: `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`})
	if r.status != http.StatusAccepted {
		t.Errorf("notifications alone: HTTP %d %s", r.status, r.body)
	}
}

// What may not pass is refused before any upstream is dialed, each with
// the status and JSON-RPC error that say why.
func TestRefusedRequests(t *testing.T) {
	fr := newFront(t, Options{})
	for _, tc := range []struct {
		name     string
		c        call
		status   int
		code     int    // the JSON-RPC error's; 0: the body is text
		contains string // in the body
		allow    string
	}{
		{"id null", call{body: `{"jsonrpc":"2.0","id":null,"method":"x/echo"}`, version: "2025-11-25"},
			http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "not null", ""},
		{"a batch in 2025-11-25", call{body: `[{"jsonrpc":"2.0","id":1,"method":"x/echo"}]`, version: "2025-11-25"},
			http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "batches", ""},
		{"a stateless batch", call{body: `[{"jsonrpc":"2.0","id":1,"method":"x/echo"}]`, version: mcpheader.FirstStateless},
			http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "batches", ""},
		{"not JSON", call{body: `{"jsonrpc":`}, http.StatusBadRequest, jsonrpc.CodeParseError, "not JSON", ""},
		{"not application/json", call{body: initBody, contentType: "text/plain"}, http.StatusUnsupportedMediaType, 0, "application/json", ""},
		{"a session-era call without a session", call{body: `{"jsonrpc":"2.0","id":1,"method":"x/echo"}`, version: "2025-11-25"},
			http.StatusBadRequest, 0, "Mcp-Session-Id header required", ""},
		{"a GET without a session", call{method: http.MethodGet, accept: "text/event-stream"}, http.StatusBadRequest, 0, "Mcp-Session-Id", ""},
		{"a stateless GET", call{method: http.MethodGet, version: mcpheader.FirstStateless}, http.StatusMethodNotAllowed, 0, "", "POST"},
		{"PUT", call{method: http.MethodPut, body: initBody}, http.StatusMethodNotAllowed, 0, "", "GET, POST, DELETE"},
		{"an unknown session", call{session: "nope", body: `{"jsonrpc":"2.0","id":1,"method":"x/echo"}`}, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fr.do(t, tc.c)
			if r.status != tc.status || !strings.Contains(r.body, tc.contains) {
				t.Fatalf("HTTP %d %q; want %d with %q", r.status, r.body, tc.status, tc.contains)
			}
			if tc.code != 0 {
				if m := r.msg(t); m.ErrorCode() != tc.code || string(m.ID) != "null" {
					t.Errorf("error %s; want code %d, id null", r.body, tc.code)
				}
			}
			if tc.allow != "" && r.header.Get("Allow") != tc.allow {
				t.Errorf("Allow: %q, want %q", r.header.Get("Allow"), tc.allow)
			}
		})
	}
	if n := fr.dialed(); n != 0 {
		t.Errorf("refused requests dialed %d upstream connections", n)
	}
}

// Close ends a session's open GET stream at once, and ends the session.
func TestCloseEndsStreams(t *testing.T) {
	fr := newFront(t, Options{KeepAlive: -1})
	sid := fr.startSession(t, "a")
	resp := fr.send(t, call{method: http.MethodGet, tenant: "a", session: sid, version: "2025-11-25", accept: "text/event-stream"})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: HTTP %d", resp.StatusCode)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, bufio.NewReader(resp.Body))
		ended <- err
	}()
	select {
	case err := <-ended:
		t.Fatalf("the stream ended before Close: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	var closed atomic.Bool
	go func() { fr.f.Close(); closed.Store(true) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the GET stream outlived Close")
	}
	deadline := time.Now().Add(10 * time.Second)
	for (!closed.Load() || fr.f.Sessions() != 0) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if fr.f.Sessions() != 0 {
		t.Errorf("%d sessions after Close", fr.f.Sessions())
	}
}
