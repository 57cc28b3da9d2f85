package sse

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// An event whose data holds spill markers goes out with the original
// bytes, whatever its other fields hold (a quote in the id must not hide a
// marker), on as many data lines as the data had; a marker that no longer
// resolves fails the Write with nothing written.
func TestWriterExpandsMarkers(t *testing.T) {
	s, err := spill.New(spill.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	text := strings.Repeat(`0123456789\"\\`, 20000)
	orig := "{\"result\":{\"text\":\"" + text + "\"},\n\"jsonrpc\":\"2.0\",\"id\":1}"
	raw, err := s.Read(strings.NewReader(orig), 0)
	if err != nil || !spill.HasMarkers(raw) {
		t.Fatalf("Read = %s, %v", raw, err)
	}
	var b bytes.Buffer
	sw := NewWriter(&b)
	if err := sw.Write(Event{ID: `a"b`, HasID: true, Name: "message", Data: raw}); err != nil {
		t.Fatal(err)
	}
	want := "id: a\"b\nevent: message\ndata: {\"result\":{\"text\":\"" + text + "\"},\ndata: \"jsonrpc\":\"2.0\",\"id\":1}\n\n"
	if b.String() != want {
		t.Fatalf("wrote %d bytes %.120q…, want %d", b.Len(), b.String(), len(want))
	}
	if s.Alive() == 0 {
		t.Fatal("an event with an id, which may be replayed, was released")
	}
	b.Reset()
	if err := sw.Write(Event{Data: raw}); err != nil || s.Alive() != 0 {
		t.Fatalf("an event without an id: %v, %d bytes still spilled", err, s.Alive())
	}
	b.Reset()
	if err := sw.Write(Event{ID: "x", Data: raw}); !errors.Is(err, spill.ErrGone) || b.Len() != 0 {
		t.Fatalf("a released marker: %v, %d bytes written", err, b.Len())
	}
	// A client that stopped reading keeps nothing on disk: the event is
	// never written again.
	if raw, err = s.Read(strings.NewReader(orig), 0); err != nil {
		t.Fatal(err)
	}
	if err := NewWriter(failWriter{}).Write(Event{Data: raw}); err == nil || s.Alive() != 0 {
		t.Fatalf("a failed write: %v, %d bytes still spilled", err, s.Alive())
	}
	// A Final writer (a relay's) releases events with ids too.
	if raw, err = s.Read(strings.NewReader(orig), 0); err != nil {
		t.Fatal(err)
	}
	if err := NewWriter(&b).Final().Write(Event{ID: "y", HasID: true, Data: raw}); err != nil || s.Alive() != 0 {
		t.Fatalf("a Final writer: %v, %d bytes still spilled", err, s.Alive())
	}
}

// failWriter is a client that has gone.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }
