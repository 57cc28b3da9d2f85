package httpclient

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// sessionServer is a session-era upstream: initialize opens session "s",
// notifications are accepted, a tools/call is answered on an event stream
// after a server request of its own (id "asked"), and get serves the GET
// stream.
func sessionServer(get func(w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			get(w, r)
			return
		}
		if r.Method != http.MethodPost {
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, _ := jsonrpc.DecodeMessage(body)
		switch {
		case m == nil || !m.IsRequest():
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", `{"jsonrpc":"2.0","id":"asked","method":"sampling/createMessage","params":{}}`)
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", m.ID)
		}
	}
}

// stream starts an event stream carrying msgs and holds it open until
// the client goes.
func stream(w http.ResponseWriter, r *http.Request, msgs ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, m := range msgs {
		fmt.Fprintf(w, "data: %s\n\n", m)
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// awaitMethod returns the first message with method from Recv; it fails
// the test after 10 s (a deadline for "never arrived").
func awaitMethod(t *testing.T, c *Conn, method string) *jsonrpc.Message {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-c.Recv():
			if !ok {
				t.Fatalf("Recv closed while waiting for %s", method)
			}
			if m.Method == method {
				return m
			}
		case <-timeout:
			t.Fatalf("no %s", method)
		}
	}
}

// An upstream that refuses the GET stream once (a load balancer's 502,
// the TypeScript SDK's 409 while another GET holds the session's stream)
// and then serves it: the stream is opened again, and the server's later
// notification arrives.
func TestListenRetriesAfterRefusal(t *testing.T) {
	for _, status := range []int{http.StatusBadGateway, http.StatusConflict} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var gets atomic.Int32
			url := serve(t, sessionServer(func(w http.ResponseWriter, r *http.Request) {
				if gets.Add(1) == 1 {
					http.Error(w, "not now", status)
					return
				}
				stream(w, r, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			}))
			c := dial(t, Options{URL: url, Transport: Streamable})
			handshake(t, c)
			awaitMethod(t, c, "notifications/tools/list_changed")
			if n := gets.Load(); n != 2 {
				t.Errorf("%d GETs, want 2", n)
			}
		})
	}
}

// A server request sent on a call's response stream names that call (as
// it went upstream) in Related; one sent on the GET stream names none.
func TestServerRequestRelated(t *testing.T) {
	url := serve(t, sessionServer(func(w http.ResponseWriter, r *http.Request) {
		stream(w, r, `{"jsonrpc":"2.0","id":"unrelated","method":"ping"}`)
	}))
	c := dial(t, Options{URL: url, Transport: Streamable})
	handshake(t, c)
	if m := awaitMethod(t, c, "ping"); m.Related != nil {
		t.Errorf("a request on the GET stream relates to %s", m.Related)
	}
	send(t, c, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`)
	_, before := await(t, c, "7")
	var asked *jsonrpc.Message
	for _, m := range before {
		if m.Method == "sampling/createMessage" {
			asked = m
		}
	}
	if asked == nil || string(asked.Related) != "7" {
		t.Errorf("the server request on the call's stream: %v", asked)
	}
}
