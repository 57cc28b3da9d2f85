package mcpproxy

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	in := ": comment\n\nid: 1\nevent: message\ndata: {\"a\":\ndata: 1}\n\nretry: 500\ndata: x\r\n\r\ndata: lone\rid: 2\r\r"
	r := NewSSEReader(strings.NewReader(in))
	want := []Event{
		{ID: "1", Name: "message", Data: []byte("{\"a\":\n1}")},
		{Retry: 500, Data: []byte("x")},
		{ID: "2", Data: []byte("lone")},
	}
	for i, w := range want {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.ID != w.ID || ev.Name != w.Name || ev.Retry != w.Retry || !bytes.Equal(ev.Data, w.Data) {
			t.Errorf("event %d = %+v, want %+v", i, ev, w)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("end: %v, want EOF", err)
	}
	if _, err := NewSSEReader(strings.NewReader("data: cut")).Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated event: %v, want ErrUnexpectedEOF", err)
	}
}

// A 16 MB event is one line: no limit may cut it.
func TestSSEHugeEvent(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 16<<20)
	rec := httptest.NewRecorder()
	if err := NewSSEWriter(rec).Write(Event{ID: "9", Data: big}); err != nil {
		t.Fatal(err)
	}
	if rec.Header().Get("X-Accel-Buffering") != "no" {
		t.Error("SSE responses must disable proxy buffering")
	}
	ev, err := NewSSEReader(rec.Body).Next()
	if err != nil || !bytes.Equal(ev.Data, big) || ev.ID != "9" {
		t.Fatalf("round trip: %d bytes, id %q, %v", len(ev.Data), ev.ID, err)
	}
}

// FuzzSSE: whatever the reader makes of a stream, writing its events and
// reading them back gives the same events.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("id: 1\ndata: {}\n\n"))
	f.Add([]byte("data: a\ndata: b\r\n\r\n: c\n\nevent: x\nretry: 10\ndata:\n\n"))
	f.Add([]byte("data: a\rdata: b\r\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewSSEReader(bytes.NewReader(b))
		var evs []Event
		for len(evs) < 100 {
			ev, err := r.Next()
			if err != nil {
				break
			}
			evs = append(evs, ev)
		}
		rec := httptest.NewRecorder()
		w := NewSSEWriter(rec)
		var kept []Event
		for _, ev := range evs {
			if strings.ContainsAny(ev.ID, "\r\n") || strings.ContainsAny(ev.Name, "\r\n") {
				continue // cannot be written back as one field
			}
			ev.Data = bytes.ReplaceAll(ev.Data, []byte("\r"), nil)
			if err := w.Write(ev); err != nil {
				t.Fatal(err)
			}
			kept = append(kept, ev)
		}
		r2 := NewSSEReader(rec.Body)
		for i, want := range kept {
			got, err := r2.Next()
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			if got.ID != want.ID || got.Name != want.Name || !bytes.Equal(got.Data, want.Data) {
				if want.ID == "" && len(want.Data) == 0 {
					continue
				}
				t.Fatalf("event %d = %+v, want %+v", i, got, want)
			}
		}
	})
}
