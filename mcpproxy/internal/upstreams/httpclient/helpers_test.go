package httpclient

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// serve runs h on loopback until the test ends and returns its URL.
func serve(t testing.TB, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// dial returns a Conn closed when the test ends.
func dial(t testing.TB, o Options) *Conn {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// msg builds a message from JSON text.
func msg(t testing.TB, s string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.DecodeMessage([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return m
}

const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

// send sends s, failing the test on error.
func send(t testing.TB, c *Conn, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Send(ctx, msg(t, s)); err != nil {
		t.Fatalf("Send(%.60s): %v", s, err)
	}
}

// await returns the response with id (JSON text) from Recv, and what came
// before it; it fails the test after 10 s.
func await(t testing.TB, c *Conn, id string) (resp *jsonrpc.Message, before []*jsonrpc.Message) {
	t.Helper()
	return awaitFor(t, c, id, 10*time.Second)
}

// awaitFor is await with a bound of d.
func awaitFor(t testing.TB, c *Conn, id string, d time.Duration) (resp *jsonrpc.Message, before []*jsonrpc.Message) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m, ok := <-c.Recv():
			if !ok {
				t.Fatalf("Recv closed while waiting for %s (Err %v)", id, c.Err())
			}
			if m.IsResponse() && string(m.ID) == id {
				return m, before
			}
			before = append(before, m)
		case <-timeout:
			t.Fatalf("no response %s in %v (got %d other messages)", id, d, len(before))
		}
	}
}

// call sends a request and waits for its response.
func call(t testing.TB, c *Conn, s string) *jsonrpc.Message {
	t.Helper()
	m := msg(t, s)
	send(t, c, s)
	r, _ := await(t, c, string(m.ID))
	return r
}

// handshake initializes a session-era connection.
func handshake(t testing.TB, c *Conn) {
	t.Helper()
	if r := call(t, c, initialize); r.Error != nil {
		t.Fatalf("initialize: %s", r.Error)
	}
	send(t, c, initialized)
}

// journal records what a test server received, in order.
type journal struct {
	mu  sync.Mutex
	got []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	j.got = append(j.got, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.got...)
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// request reads the message a test server was POSTed.
func request(r *http.Request) *jsonrpc.Message {
	b, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return &jsonrpc.Message{}
	}
	return m
}

// answer writes a JSON response with result to the request m.
func answer(w http.ResponseWriter, m *jsonrpc.Message, result string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
}

// events starts an event stream and writes raw to it.
func events(w http.ResponseWriter, raw ...string) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
	io.WriteString(w, strings.Join(raw, ""))
	w.(http.Flusher).Flush()
}

// runtimeMem is the process's allocation count, to bound what a test
// allocates.
type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.total = s.TotalAlloc
}
