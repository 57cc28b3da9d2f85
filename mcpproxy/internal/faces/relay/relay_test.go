package relay

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
)

// sessionUpstream is a session-era upstream on loopback: each initialize
// opens a new session, a tools/call is never answered (its stream stays
// open until the client leaves), a GET stream stays open, anything else
// is accepted.
func sessionUpstream(t *testing.T) string {
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), `"initialize"`):
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", n.Add(1)))
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"u","version":"1"}}}`)
		case r.Method == http.MethodGet || strings.Contains(string(body), `"tools/call"`):
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(up.Close)
	return up.URL
}

// front serves rl on loopback; the test's X-Tenant header names the
// caller (the proxy's inbound auth, out of this package).
func front(t *testing.T, rl *Relay) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rl.ServeHTTP(w, r, ownmethods.Request{Tenant: r.Header.Get("X-Tenant"), Header: r.Header}, 1<<20)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// client talks to the relay as one tenant.
type client struct {
	t      *testing.T
	url    string
	tenant string
	hdr    map[string]string
}

// do sends one request and returns the response with its headers read;
// the body is the caller's.
func (c *client) do(ctx context.Context, method, sid, body string) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Tenant", c.tenant)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	for k, v := range c.hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// open starts a session and returns its id.
func (c *client) open() string {
	c.t.Helper()
	resp := c.do(context.Background(), http.MethodPost, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		c.t.Fatalf("initialize: %s, no session", resp.Status)
	}
	return sid
}

// abandon sends a tools/call in sid and leaves once its stream opened.
func (c *client) abandon(sid string, id int) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := c.do(ctx, http.MethodPost, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t"}}`, id))
	resp.Body.Close()
}

// status is the status of a ping in sid (404: the relay forgot it).
func (c *client) status(sid string) int {
	c.t.Helper()
	resp := c.do(context.Background(), http.MethodPost, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// held counts what the relay remembers of tenant's calls: how many, in
// how many sessions, and the bytes of client headers among them.
func held(rl *Relay, tenant string) (calls, sessions, headerBytes int) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for _, s := range rl.sessions {
		if s.tenant.name != tenant {
			continue
		}
		sessions++
		for _, en := range s.calls {
			calls++
			for k, vs := range en.call.Request.Header {
				headerBytes += len(k) + len(strings.Join(vs, ""))
			}
		}
	}
	return
}

// Calls whose client left before the answer are bounded per session and
// per tenant, and keep no client headers. Before: every abandoned call
// was kept with the client's whole header map, in sessions that never
// expire (4,000 calls with 8 KiB of headers each: 35 MiB for good).
func TestAbandonedCallsBounded(t *testing.T) {
	rl := New(Options{URL: sessionUpstream(t), Methods: ownmethods.New(ownmethods.Options{}), MaxCalls: 40, MaxTenantCallBytes: 20 << 10})
	c := &client{t: t, url: front(t, rl), tenant: "a", hdr: map[string]string{"X-Junk": strings.Repeat("j", 8<<10)}}
	const sessions, perSession = 3, 150
	for range sessions {
		sid := c.open()
		for i := range perSession {
			c.abandon(sid, i+1)
		}
	}
	calls, n, hb := held(rl, "a")
	t.Logf("%d abandoned calls in %d sessions: %d remembered, %d bytes of client headers", sessions*perSession, n, calls, hb)
	rl.mu.Lock()
	bytes := rl.tenants["a"].bytes
	rl.mu.Unlock()
	if calls > 80 || bytes > 20<<10 || hb != 0 {
		t.Errorf("remembered %d calls (%d bytes, %d bytes of headers); want at most 80 (%d bytes), no headers", calls, bytes, hb, 20<<10)
	}
	if calls == 0 {
		t.Error("nothing remembered: a response on another stream could not be rewritten")
	}
}

// A session idle past SessionIdle is forgotten (its client gets 404),
// but not one holding a stream open. Before: sessions never expired.
func TestIdleSessionsExpire(t *testing.T) {
	rl := New(Options{URL: sessionUpstream(t), Methods: ownmethods.New(ownmethods.Options{}), SessionIdle: time.Hour})
	var mu sync.Mutex
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rl.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	c := &client{t: t, url: front(t, rl), tenant: "a"}
	idle, streaming := c.open(), c.open()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get := c.do(ctx, http.MethodGet, streaming, "") // held open
	defer get.Body.Close()
	mu.Lock()
	clock = clock.Add(2 * time.Hour)
	mu.Unlock()
	c.open() // a new session sweeps the table
	_, n, _ := held(rl, "a")
	if n != 2 {
		t.Errorf("%d sessions after the idle one expired; want 2 (the streaming one and the new one)", n)
	}
	if s := c.status(idle); s != http.StatusNotFound {
		t.Errorf("the idle session answered %d, want 404", s)
	}
	if s := c.status(streaming); s != http.StatusAccepted {
		t.Errorf("the session holding a stream answered %d, want 202", s)
	}
}

// At the cap a tenant's own least recently used session makes room:
// tenant A's flood never evicts tenant B's session, per tenant or across
// tenants. Before: one global cap with a random victim, any tenant's.
func TestSessionCapEvictsOwnTenant(t *testing.T) {
	rl := New(Options{URL: sessionUpstream(t), Methods: ownmethods.New(ownmethods.Options{}), MaxSessions: 4})
	rl.maxTotal = 6
	url := front(t, rl)
	a, b, c, d := &client{t: t, url: url, tenant: "a"}, &client{t: t, url: url, tenant: "b"},
		&client{t: t, url: url, tenant: "c"}, &client{t: t, url: url, tenant: "d"}
	bs, cs := b.open(), c.open()
	first := a.open()
	for range 30 {
		a.open()
	}
	d.open() // the table is full (4 + 1 + 1): the biggest tenant gives
	if _, n, _ := held(rl, "a"); n > 4 {
		t.Errorf("tenant a holds %d sessions, cap 4", n)
	}
	if s := b.status(bs); s != http.StatusAccepted {
		t.Errorf("tenant b's session answered %d after a's flood", s)
	}
	if s := c.status(cs); s != http.StatusAccepted {
		t.Errorf("tenant c's session answered %d after a's flood", s)
	}
	if s := a.status(first); s != http.StatusNotFound {
		t.Errorf("a's least recently used session answered %d, want 404", s)
	}
}
