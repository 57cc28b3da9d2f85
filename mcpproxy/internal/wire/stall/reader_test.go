package stall

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// note tells inside an event from between events, whatever the line
// ends (CR, LF, CRLF) and wherever the reads cut them.
func TestReaderNote(t *testing.T) {
	for _, c := range []struct {
		chunks []string
		mid    bool
	}{
		{nil, false},
		{[]string{"data: {"}, true},
		{[]string{"data: {}\n"}, true},
		{[]string{"data: {}\n\n"}, false},
		{[]string{"data: {}\r\n\r\n"}, false},
		{[]string{"data: {}\r\r"}, false},
		{[]string{"data: {}\r\n", "\r\n"}, false},
		{[]string{"data: {}\r", "\n"}, true},
		{[]string{"data: {}\r", "\n", "\n"}, false},
		{[]string{": keep-alive\n\n"}, false},
		{[]string{"data: x\n\ndata: y"}, true},
		{[]string{"x", "\n\n\n\n\n\n"}, false},
		{[]string{"data: x\n\n", "data: y\n"}, true},
		{[]string{"data: x\n", "\n", "data"}, true},
	} {
		g := &Reader{}
		for _, ch := range c.chunks {
			g.note([]byte(ch))
		}
		if g.mid != c.mid {
			t.Errorf("%q: mid %v, want %v", c.chunks, g.mid, c.mid)
		}
	}
}

// The guard closes the stream when a read waits its timeout mid-event,
// not when the stream is silent between events.
func TestReaderCloses(t *testing.T) {
	pr, pw := io.Pipe()
	g := Events(pr, 50*time.Millisecond)
	defer g.Stop()
	go pw.Write([]byte("data: {}\n\n"))
	buf := make([]byte, 64)
	if n, err := g.Read(buf); err != nil || n == 0 {
		t.Fatalf("first read: %d, %v", n, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := g.Read(buf) // between events: waits as long as it takes
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a read between events ended: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	pw.Write([]byte(`data: {"hal`))
	if err := <-done; err != nil {
		t.Fatalf("the half event: %v", err)
	}
	if !strings.HasPrefix(string(buf), `data: {"hal`) {
		t.Fatalf("read %q", buf)
	}
	if _, err := g.Read(buf); err == nil || !g.w.Fired() {
		t.Fatalf("a read waiting mid-event: err %v, stalled %v", err, g.w.Fired())
	}
	if why := g.Why("stream"); !strings.Contains(why, "stalled mid-message for 50ms; its stream was closed") {
		t.Fatalf("Why: %q", why)
	}
}

// With no timeout the body is only read: a read mid-message waits.
func TestReaderNoTimeout(t *testing.T) {
	pr, pw := io.Pipe()
	g := Events(pr, 0)
	defer g.Stop()
	go pw.Write([]byte(`data: {"hal`))
	buf := make([]byte, 64)
	if _, err := g.Read(buf); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := g.Read(buf)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a read mid-event with no timeout ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	pw.Close()
	if err := <-done; !errors.Is(err, io.EOF) || g.Why("stream") != "" {
		t.Fatalf("after the end: %v, Why %q", err, g.Why("stream"))
	}
	var nilg *Reader
	nilg.Stop()
	if nilg.Why("answer") != "" {
		t.Fatal("a nil Reader has a reason")
	}
}

// A JSON body is one message: inside it from its first byte to its last,
// its last known from Content-Length when there is one.
func TestReaderNoteMessage(t *testing.T) {
	g := Message(nil, 0, 10)
	if g.note([]byte("{\"a\":")); !g.mid {
		t.Error("5 of 10 bytes: not inside")
	}
	if g.note([]byte("1}\n\n\n")); g.mid {
		t.Error("10 of 10 bytes: still inside")
	}
	g = Message(nil, 0, -1)
	if g.note([]byte("{}\n\n")); !g.mid {
		t.Error("a body of unknown length: not inside after its bytes")
	}
}

// Small events each cut in two across reads that wait (the first half
// now, the rest with the next event's start 120 ms later) are each a
// message of their own: the waits do not add up from one to the next, and
// a 300 ms guard never closes the stream, however many come.
func TestReaderEventsEndInsideReads(t *testing.T) {
	pr, pw := io.Pipe()
	g := Events(pr, 300*time.Millisecond)
	defer g.Stop()
	go func() {
		pw.Write([]byte("data: a"))
		for range 6 {
			time.Sleep(120 * time.Millisecond)
			pw.Write([]byte("\r\n\r\ndata: b"))
		}
		time.Sleep(120 * time.Millisecond)
		pw.Write([]byte("\n\n"))
		pw.Close()
	}()
	if _, err := io.Copy(io.Discard, g); err != nil || g.Why("stream") != "" {
		t.Fatalf("seven small events read over 840 ms: %v, %q", err, g.Why("stream"))
	}
}

// endsIn finds a blank line among the bytes read so far's trailing line
// ends and the next read's, whatever the line ends and wherever the read
// cuts them.
func TestReaderEndsIn(t *testing.T) {
	for _, c := range []struct {
		before, b string
		want      bool
	}{
		{"data: x", "\n\ndata: y", true},
		{"data: x\r", "\n\r\ndata: y", true},
		{"data: x\n", "\ndata", true},
		{"data: x\r", "\rdata", true},
		{"data: x\r", "\ndata", false}, // one CRLF
		{"data: x", "\r\ndata: y\r\nid", false},
		{"data: x\n", "id: 1\n", false},
	} {
		g := &Reader{}
		g.note([]byte(c.before))
		if got := g.endsIn([]byte(c.b)); got != c.want {
			t.Errorf("%q then %q: %v, want %v", c.before, c.b, got, c.want)
		}
	}
}
