package httpclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// A session-era server that records every request: the client POSTs
// first (no GET probe), carries the session and the negotiated version,
// opens the GET stream after notifications/initialized, and ends the
// session with DELETE on Close.
func TestSessionLifecycle(t *testing.T) {
	var j journal
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m := request(r)
		j.add("%s %s sid=%s v=%s", r.Method, m.Method, r.Header.Get("Mcp-Session-Id"), r.Header.Get("Mcp-Protocol-Version"))
		switch {
		case r.Method == http.MethodGet:
			events(w, ": open\n\n")
			<-r.Context().Done()
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			answer(w, m, `{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)
		case m.IsRequest():
			answer(w, m, `{}`)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	c := dial(t, Options{URL: url})
	handshake(t, c)
	call(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	waitFor(t, 5*time.Second, "the GET stream", func() bool { return len(j.list()) >= 4 })
	c.Close()
	want := []string{
		"POST initialize sid= v=",
		"POST notifications/initialized sid=s1 v=2025-06-18",
		"GET  sid=s1 v=2025-06-18",
		"POST tools/list sid=s1 v=2025-06-18",
		"DELETE  sid=s1 v=2025-06-18",
	}
	got := j.list()
	// The GET runs beside the POSTs: only its place after initialized is fixed.
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[4] != want[4] ||
		!(got[2] == want[2] && got[3] == want[3] || got[2] == want[3] && got[3] == want[2]) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An upstream that answers "result": null, pretty-printed JSON, and
// multi-line event data: every answer reaches the caller, decoded.
func TestOddButValidAnswers(t *testing.T) {
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m := request(r)
		switch m.Method {
		case "null/json":
			answer(w, m, "null")
		case "null/sse":
			events(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+string(m.ID)+",\"result\":null}\n\n")
		case "pretty/json":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			io.WriteString(w, "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": "+string(m.ID)+",\n  \"result\": {\n    \"a\": 1\n  }\n}\n")
		case "pretty/sse":
			events(w, "event: message\r\ndata: {\r\ndata:   \"jsonrpc\": \"2.0\",\r\ndata:   \"id\": "+string(m.ID)+",\r\n",
				"data:   \"result\": {\"a\": 1}\r\ndata: }\r\n\r\n")
		}
	})
	c := dial(t, Options{URL: url, Transport: Streamable})
	for i, method := range []string{"null/json", "null/sse", "pretty/json", "pretty/sse"} {
		id := string(rune('1' + i))
		r := call(t, c, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`"}`)
		if !r.IsResponse() || r.Error != nil {
			t.Errorf("%s: %s", method, r.Raw)
		}
		if strings.HasPrefix(method, "null") && string(r.Result) != "null" {
			t.Errorf("%s: result %s", method, r.Result)
		}
	}
}

// SEP-1699 polling: the server ends the response stream after an event id
// and a retry hint; the client waits that long, then resumes with GET and
// Last-Event-ID and gets the answer there.
func TestRetryHintThenResume(t *testing.T) {
	var closed atomic.Int64
	var j journal
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			j.add("GET last=%s sid=%s after=%v", r.Header.Get("Last-Event-ID"), r.Header.Get("Mcp-Session-Id"),
				time.Since(time.Unix(0, closed.Load())) >= 400*time.Millisecond)
			if r.Header.Get("Last-Event-ID") == "" {
				w.WriteHeader(http.StatusMethodNotAllowed) // no standalone stream
				return
			}
			events(w, "id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"ok\":true}}\n\n")
			return
		}
		m := request(r)
		switch {
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			answer(w, m, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)
		case m.Method == "tools/call":
			events(w, "id: e1\nretry: 400\ndata:\n\n")
			closed.Store(time.Now().UnixNano())
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	c := dial(t, Options{URL: url})
	handshake(t, c)
	if r := call(t, c, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}`); r.Error != nil {
		t.Fatalf("answer: %s", r.Raw)
	}
	var resumed []string
	for _, g := range j.list() {
		if strings.Contains(g, "last=e1") {
			resumed = append(resumed, g)
		}
	}
	if len(resumed) != 1 || resumed[0] != "GET last=e1 sid=s1 after=true" {
		t.Errorf("resumption: %q (want one GET with Last-Event-ID e1, the session, after the 400 ms hint)", j.list())
	}
}

// A server that forgot the session (404): the client initializes again
// with the remembered handshake, sends the message once more, and the
// caller sees only the answer it asked for.
func TestSessionExpiredReinitializes(t *testing.T) {
	var sessions atomic.Int32
	var j journal
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		m := request(r)
		sid := r.Header.Get("Mcp-Session-Id")
		j.add("%s %s %s", m.Method, string(m.ID), sid)
		live := "s" + string(rune('0'+sessions.Load()))
		switch {
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s"+string(rune('0'+sessions.Add(1))))
			answer(w, m, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)
		case sid != live:
			http.Error(w, "no such session", http.StatusNotFound)
		case m.IsRequest():
			answer(w, m, `{"session":"`+sid+`"}`)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	c := dial(t, Options{URL: url})
	handshake(t, c)
	call(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	sessions.Add(1) // the server restarts: s1 is gone
	r, before := await2(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if string(r.Result) != `{"session":"s3"}` || len(before) != 0 {
		t.Errorf("answer %s after %d other messages", r.Raw, len(before))
	}
	want := `initialize 0 |notifications/initialized  s1|tools/list 1 s1|tools/list 2 s1|` +
		`initialize "spillway-reinitialize" |notifications/initialized  s3|tools/list 2 s3`
	if got := strings.Join(j.list(), "|"); got != want {
		t.Errorf("requests\n%s\nwant\n%s", got, want)
	}
}

// await2 sends a request and returns its answer and what came before.
func await2(t *testing.T, c *Conn, s string) (*jsonrpc.Message, []*jsonrpc.Message) {
	t.Helper()
	send(t, c, s)
	return await(t, c, string(msg(t, s).ID))
}

// A server that never answers: Send of an initialize honours its context
// while waiting for headers, other requests go out meanwhile whether
// headers come (a silent stream) or not (Send does not wait for them),
// and Close ends everything within 5 s.
func TestNeverAnswers(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m := request(r)
		if m.Method == "silent/stream" {
			events(w, ": nothing more\n\n")
		}
		select { // no headers for the others, ever
		case <-hang:
		case <-r.Context().Done():
		}
	})
	c := dial(t, Options{URL: url, Transport: Streamable})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Send(ctx, msg(t, initialize))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("Send = %v after %v, want the deadline", err, time.Since(start))
	}
	send(t, c, `{"jsonrpc":"2.0","id":1,"method":"no/headers"}`)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"silent/stream"}`) // the queue moved on
	start = time.Now()
	c.Close()
	waitFor(t, 5*time.Second, "Recv closed after Close", func() bool {
		select {
		case _, ok := <-c.Recv():
			return !ok
		default:
			return false
		}
	})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := c.Send(context.Background(), msg(t, initialized)); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close = %v", err)
	}
}

// Close is bounded even when the server never answers the DELETE.
func TestCloseBoundedWhenDeleteHangs(t *testing.T) {
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m := request(r)
		switch {
		case r.Method == http.MethodDelete, r.Method == http.MethodGet:
			<-r.Context().Done()
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			answer(w, m, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	c := dial(t, Options{URL: url})
	handshake(t, c)
	start := time.Now()
	c.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
}
