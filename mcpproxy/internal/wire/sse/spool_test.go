package sse_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

func spooler(t *testing.T) *spill.Spooler {
	t.Helper()
	s, err := spill.New(spill.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// letters streams n bytes of a JSON string's inside: the same bytes
// however they are read (the alphabet runs on from one read to the next).
type letters struct{ n, at int }

func (r *letters) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n)
	for i := range p[:n] {
		p[i] = 'a' + byte((r.at+i)%26)
	}
	r.n -= n
	r.at += n
	return n, nil
}

// A 200 MB event from an upstream is never held: its long string goes to
// disk as it arrives, the event's Data is the message with a marker, and
// expanding it gives back the event's data byte for byte (its line
// breaks included). Before Spool, Data held the 200 MB.
func TestSpoolBigEvent(t *testing.T) {
	const size = 200 << 20
	head := "id: 7\ndata: {\"jsonrpc\":\"2.0\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\""
	tail := "\"}]},\ndata: \"id\":3}\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n\n"
	want := sha256.New()
	want.Write([]byte(strings.TrimPrefix(head, "id: 7\ndata: ")))
	io.Copy(want, &letters{n: size})
	want.Write([]byte("\"}]},\n\"id\":3}"))

	s := spooler(t)
	rd := sse.NewReader(io.MultiReader(strings.NewReader(head), &letters{n: size}, strings.NewReader(tail)), 1<<20)
	rd.Spool(s)
	ev, n := nextAllocating(t, rd)
	if n > 16<<20 {
		t.Errorf("%d bytes allocated to read a %d-byte event", n, size)
	}
	if len(ev.Data) > 1000 || ev.ID != "7" {
		t.Fatalf("Data is %d bytes, id %q", len(ev.Data), ev.ID)
	}
	got := sha256.New()
	if err := spill.Expand(got, ev.Data); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Errorf("the expanded data differs from the event's: %.200s", ev.Data)
	}
	// The Reader's buffer grew for the spilled event; the next event is
	// still read whole, and its bytes as they came.
	if ev, err := rd.Next(); err != nil || string(ev.Data) != `{"jsonrpc":"2.0","method":"notifications/x"}` {
		t.Fatalf("next: %q %v", ev.Data, err)
	}
	if raw := string(rd.Raw()); raw != "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n\n" {
		t.Errorf("Raw of the next event: %q", raw)
	}
}

// Data a Spooler cannot take (not JSON) drops that event alone, with a
// reason, and its ends for finding its request; a stream cut inside an
// event leaves nothing spilled.
func TestSpoolRefused(t *testing.T) {
	s := spooler(t)
	junk := strings.Repeat("not json ", 20000)
	rd := sse.NewReader(strings.NewReader("id: 1\ndata: "+junk+"\n\ndata: {\"ok\":true}\n\ndata: {\"text\":\""), 1<<20)
	rd.Spool(s)
	_, err := rd.Next()
	var big *sse.TooLargeError
	if !errors.As(err, &big) || big.Err == nil || !bytes.HasPrefix(big.Head, []byte("not json")) || big.ID != "1" {
		t.Fatalf("got %v (%+v)", err, big)
	}
	if ev, err := rd.Next(); err != nil || string(ev.Data) != `{"ok":true}` {
		t.Fatalf("next: %q %v", ev.Data, err)
	}
	rd = sse.NewReader(io.MultiReader(strings.NewReader("data: {\"text\":\""), &letters{n: 1 << 20}), 1<<20)
	rd.Spool(s)
	if _, err := rd.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a cut stream: %v", err)
	}
	if n := s.Alive(); n != 0 {
		t.Errorf("%d bytes still spilled after a cut stream", n)
	}
}

// An upstream that follows a spooled event's data with fields no event
// needs (a comment of 8 MiB, then ids and names) cannot make the Reader
// hold them: past 64 KiB they are dropped, the data arrives whole. Before,
// every comment line of a spooled event was kept, however long.
func TestSpoolFieldsBounded(t *testing.T) {
	s := spooler(t)
	head := "data: {\"text\":\""
	tail := "\"}\n: " + strings.Repeat("c", 8<<20) + "\nid: 9\nevent: message\n: short\ndata: \n\n"
	rd := sse.NewReader(io.MultiReader(strings.NewReader(head), &letters{n: 1 << 20}, strings.NewReader(tail)), 4<<20)
	rd.Spool(s)
	ev, n := nextAllocating(t, rd)
	if n > 4<<20 {
		t.Errorf("%d bytes allocated for a spooled event with an 8 MiB comment", n)
	}
	if ev.ID != "9" || ev.Name != "message" || len(ev.Comments) != 1 || ev.Comments[0] != "short" || rd.LastEventID() != "9" {
		t.Errorf("fields: id %q, name %q, %d comments", ev.ID, ev.Name, len(ev.Comments))
	}
	var b bytes.Buffer
	if err := spill.Expand(&b, ev.Data); err != nil {
		t.Fatal(err)
	}
	if b.Len() != len(head)-len("data: ")+1<<20+len("\"}\n") {
		t.Errorf("data of %d bytes", b.Len())
	}
}

// nextAllocating reads rd's next event, failing on an error, and tells
// how many bytes reading it allocated.
func nextAllocating(t *testing.T, rd *sse.Reader) (sse.Event, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ev, err := rd.Next()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	return ev, after.TotalAlloc - before.TotalAlloc
}
