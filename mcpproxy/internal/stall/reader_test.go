package stall

import (
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
	if err := <-done; err != io.EOF || g.Why("stream") != "" {
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
