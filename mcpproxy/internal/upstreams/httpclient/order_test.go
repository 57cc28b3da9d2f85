package httpclient

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// holdingServer is a session-era upstream in JSON-response mode (its
// POSTs' response headers come with the result) whose tools/call holds
// its POST open until the client cancels the call: the shape of a slow
// tool on a stateless deployment.
type holdingServer struct {
	j       journal
	mu      sync.Mutex
	pending map[string]chan struct{} // tools/call id → closed by its cancellation
}

func (hs *holdingServer) held() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.pending)
}

func (hs *holdingServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed) // no GET stream
		return
	}
	m := request(r)
	switch m.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "s1")
		answer(w, m, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)
	case "tools/call":
		cancelled := make(chan struct{})
		hs.mu.Lock()
		hs.pending[string(m.ID)] = cancelled
		hs.mu.Unlock()
		select {
		case <-cancelled:
			answer(w, m, `{"content":[],"isError":true}`)
		case <-r.Context().Done():
		}
	case "ping":
		hs.j.add("ping while %d calls held", hs.held())
		answer(w, m, `{}`)
	case jsonrpc.MethodCancelled:
		id := string(jsonrpc.CancelledID(m))
		hs.mu.Lock()
		ch := hs.pending[id]
		delete(hs.pending, id)
		hs.mu.Unlock()
		if ch != nil {
			hs.j.add("cancelled %s while held", id)
			close(ch)
		} else {
			hs.j.add("cancelled %s, not held", id)
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

// Item 7 of issue 20: a call whose POST holds its headers until its
// result holds up nothing. Two calls are held at once, a ping is answered
// while they are, and each cancellation reaches the upstream while its
// call is still held (before, the second Send waited for the first call's
// headers, that is for ever).
func TestSlowJSONCallHoldsNothingUp(t *testing.T) {
	hs := &holdingServer{pending: map[string]chan struct{}{}}
	url := serve(t, hs.serveHTTP)
	c := dial(t, Options{URL: url})
	handshake(t, c)
	send(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}`)
	waitFor(t, 10*time.Second, "both calls held at once", func() bool { return hs.held() == 2 })
	if r := call(t, c, `{"jsonrpc":"2.0","id":3,"method":"ping"}`); r.Error != nil {
		t.Fatalf("ping: %s", r.Raw)
	}
	for _, id := range []string{"2", "1"} {
		send(t, c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`}}`)
		await(t, c, id) // the held POST ends once the upstream has the cancellation
	}
	want := "ping while 2 calls held,cancelled 2 while held,cancelled 1 while held"
	if got := strings.Join(hs.j.list(), ","); got != want {
		t.Errorf("the upstream saw %s\nwant %s", got, want)
	}
}

// What the protocol orders stays ordered: nothing follows initialize
// before its response headers (they bring the session id), nor
// notifications/initialized before its own.
func TestHandshakeIsABarrier(t *testing.T) {
	var j journal
	release := make(chan struct{})
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		m := request(r)
		j.add("%s sid=%s", m.Method, r.Header.Get("Mcp-Session-Id"))
		switch {
		case m.Method == "initialize" || m.Method == "notifications/initialized":
			<-release
			w.Header().Set("Mcp-Session-Id", "s1")
			if m.IsRequest() {
				answer(w, m, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)
				return
			}
			w.WriteHeader(http.StatusAccepted)
		case m.IsRequest():
			answer(w, m, `{}`)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	c := dial(t, Options{URL: url})
	for _, barrier := range []string{initialize, initialized} {
		done := make(chan error, 2)
		go func() { done <- c.Send(context.Background(), msg(t, barrier)) }()
		waitFor(t, 10*time.Second, "the barrier at the upstream", func() bool { return len(j.list())%2 == 1 })
		go func() { done <- c.Send(context.Background(), msg(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)) }()
		time.Sleep(50 * time.Millisecond) // room for a ping that would overtake it
		release <- struct{}{}
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		await(t, c, `"p"`)
	}
	want := "initialize sid=,ping sid=s1,notifications/initialized sid=s1,ping sid=s1"
	if got := strings.Join(j.list(), ","); got != want {
		t.Errorf("the upstream saw %s\nwant %s", got, want)
	}
}

// A request whose POST was written but never answered (the connection
// dropped) gets an error response on Recv: Send has returned by then.
func TestDroppedPOSTIsAnswered(t *testing.T) {
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m := request(r)
		if m.Method == "tools/call" {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
			return
		}
		answer(w, m, `{}`)
	})
	c := dial(t, Options{URL: url, Transport: Streamable})
	send(t, c, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`)
	r, _ := await(t, c, "7")
	if r.Error == nil || !strings.Contains(string(r.Raw), "unreachable") {
		t.Errorf("answer %s", r.Raw)
	}
}
