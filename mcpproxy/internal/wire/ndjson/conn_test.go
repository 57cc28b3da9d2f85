package ndjson

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

func msg(_ testing.TB, s string) *jsonrpc.Message { return jsonrpc.MustDecode(s) }

// within fails the test unless f returns within d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// Pretty-printed JSON (as an HTTP upstream may send it) goes out as one
// line: the stdio face used to write "{" alone on the first line.
func TestWriterOneLine(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, nil)
	defer w.Close()
	if err := w.Write(context.Background(), []byte("{\n  \"jsonrpc\": \"2.0\",\r\n  \"method\": \"n\"\n}\n")); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != `{"jsonrpc":"2.0","method":"n"}`+"\n" {
		t.Fatalf("wrote %q", got)
	}
}

// countingWriter records how many Write calls it got.
type countingWriter struct {
	mu    sync.Mutex
	calls int
	buf   bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.buf.Write(p)
}

// Concurrent writers: every message is one Write of one whole line.
func TestWriterConcurrent(t *testing.T) {
	cw := &countingWriter{}
	w := NewWriter(cw, nil)
	defer w.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				raw := fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":{"g":%d,"i":%d,"pad":%q}}`, g, i, strings.Repeat("p", i*50))
				if err := w.Write(context.Background(), []byte(raw)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(cw.buf.String(), "\n"), "\n")
	if len(lines) != 1600 || cw.calls != 1600 {
		t.Fatalf("%d lines in %d writes; want 1600 in 1600", len(lines), cw.calls)
	}
	for _, l := range lines {
		if _, err := jsonrpc.DecodeMessage([]byte(l)); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
	}
}

// A peer that never reads: the blocked write returns when its context
// ends, the next caller waits its own turn, and Close does not wait.
func TestWriterBlockedPeer(t *testing.T) {
	pr, pw := io.Pipe() // nobody reads pr
	defer pr.Close()
	w := NewWriter(pw, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	within(t, 5*time.Second, "a blocked Write", func() {
		if err := w.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"a"}`)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Write = %v; want the deadline", err)
		}
	})
	second := make(chan error, 1)
	go func() { second <- w.Write(context.Background(), []byte(`{"jsonrpc":"2.0","method":"b"}`)) }()
	within(t, 5*time.Second, "Close", func() { w.Close() })
	select {
	case err := <-second:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("a waiting Write after Close = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting Write did not return after Close")
	}
	if err := w.Write(context.Background(), []byte(`{"jsonrpc":"2.0","method":"c"}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v", err)
	}
}

type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("writer bug") }

func TestWriterPanic(t *testing.T) {
	w := NewWriter(panicWriter{}, nil)
	defer w.Close()
	for range 2 {
		if err := w.Write(context.Background(), []byte(`{"jsonrpc":"2.0","method":"a"}`)); err == nil || !strings.Contains(err.Error(), "writer bug") {
			t.Fatalf("Write = %v; want the panic as an error", err)
		}
	}
}

// peer is the other end of a Conn: what it writes, the Conn reads.
type peer struct {
	in  *io.PipeWriter // to the Conn
	out *bufio.Reader  // from the Conn
}

func newPair(t *testing.T, o Options) (*Conn, *peer) {
	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	o.Stop = func() error { cr.Close(); cw.Close(); return nil }
	c := NewConn(cr, cw, o)
	t.Cleanup(func() { c.Close(); pw.Close(); pr.Close() })
	return c, &peer{in: pw, out: bufio.NewReader(pr)}
}

func recv(t *testing.T, c *Conn) *jsonrpc.Message {
	t.Helper()
	select {
	case m := <-c.Recv():
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received")
		return nil
	}
}

// A response over the cap is answered with an error to its caller, a
// request over it with an error to the peer; whatever end of the message
// the id is at. The connection goes on.
func TestConnTooLarge(t *testing.T) {
	c, p := newPair(t, Options{MaxMessage: 1 << 20, Peer: "upstream"})
	go func() {
		for _, idFirst := range []bool{true, false} {
			io.Copy(p.in, newMessage(idFirst, 4<<20)) // each: an oversize response, then id 42
		}
		fmt.Fprintf(p.in, "{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"sampling/createMessage\",\"params\":{\"p\":\"%s\"}}\n", strings.Repeat("y", 2<<20))
		fmt.Fprintf(p.in, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"p\":\"%s\"}}\n", strings.Repeat("y", 2<<20))
		fmt.Fprintln(p.in, `{"jsonrpc":"2.0","method":"last"}`)
	}()
	for range 2 {
		m := recv(t, c)
		if string(m.ID) != "41" || m.ErrorCode() != jsonrpc.CodeUpstream || !strings.Contains(string(m.Error), "upstream message exceeds the 1048576 byte limit") {
			t.Fatalf("got %s; want an error response for id 41", m.Raw)
		}
		if m := recv(t, c); string(m.ID) != "42" {
			t.Fatalf("got %s; want id 42", m.Raw)
		}
	}
	if m := recv(t, c); m.Method != "last" { // the oversize request and notification are not delivered
		t.Fatalf("got %s", m.Raw)
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	if m := msg(t, string(line)); string(m.ID) != `"s1"` || m.ErrorCode() != jsonrpc.CodeInvalidRequest {
		t.Fatalf("the peer got %s; want an error for its request s1", line)
	}
}

// Err: the peer's end after it closes, nil after Close, the panic's text
// after a panic; Recv is closed in each case.
func TestConnErr(t *testing.T) {
	c, p := newPair(t, Options{})
	fmt.Fprintln(p.in, `{"jsonrpc":"2.0","method":"a"}`)
	p.in.Close()
	recv(t, c)
	if m := recv(t, c); m != nil || !errors.Is(c.Err(), ErrPeerClosed) {
		t.Fatalf("after the peer closed: %v, Err %v", m, c.Err())
	}

	c, _ = newPair(t, Options{})
	within(t, 5*time.Second, "Close", func() { c.Close() })
	if m := recv(t, c); m != nil || c.Err() != nil {
		t.Fatalf("after Close: %v, Err %v", m, c.Err())
	}
	if err := c.Send(context.Background(), msg(t, `{"jsonrpc":"2.0","method":"a"}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close = %v", err)
	}

	c, p = newPair(t, Options{End: func(error) error { panic("end bug") }})
	p.in.Close()
	if m := recv(t, c); m != nil || c.Err() == nil || !strings.Contains(c.Err().Error(), "end bug") {
		t.Fatalf("after a panic: %v, Err %v", m, c.Err())
	}
}

// Send waits for the peer only as long as its context allows, and Close
// does not wait behind it.
func TestConnSendBlockedPeer(t *testing.T) {
	c, _ := newPair(t, Options{}) // the peer never reads
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	within(t, 5*time.Second, "Send", func() {
		if err := c.Send(ctx, msg(t, `{"jsonrpc":"2.0","method":"a"}`)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Send = %v", err)
		}
	})
	within(t, 5*time.Second, "Close", func() { c.Close() })
}

// With Answer, a peer that floods junk and never reads what it is sent
// costs at most maxAnswers goroutines, however much it sends; reading goes
// on, and the next message is delivered.
func TestConnAnswersBounded(t *testing.T) {
	c, p := newPair(t, Options{Peer: "client", Answer: true}) // the peer never reads
	before := runtime.NumGoroutine()
	go func() {
		for range 10 * maxAnswers {
			io.WriteString(p.in, "not json\n")
		}
		io.WriteString(p.in, `{"jsonrpc":"2.0","id":null,"method":"ping"}`+"\n")
		io.WriteString(p.in, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
	}()
	if m := recv(t, c); m == nil || string(m.ID) != "1" {
		t.Fatalf("after the junk: %v, want the ping with id 1 (and not the one with id null)", m)
	}
	if n := runtime.NumGoroutine() - before; n > maxAnswers+2 {
		t.Errorf("%d goroutines more after %d junk lines, want at most %d", n, 10*maxAnswers, maxAnswers+2)
	}
}
