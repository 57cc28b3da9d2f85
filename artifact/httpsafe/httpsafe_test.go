package httpsafe

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// chunkWriter records the size of each Write and fails after failAfter
// writes (0: never).
type chunkWriter struct {
	sizes     []int
	failAfter int
}

var errWrite = errors.New("write failed")

func (c *chunkWriter) Write(p []byte) (int, error) {
	if c.failAfter > 0 && len(c.sizes) == c.failAfter {
		return 0, errWrite
	}
	c.sizes = append(c.sizes, len(p))
	return len(p), nil
}

func TestWriteWithinSetsADeadlinePerChunk(t *testing.T) {
	var deadlines []time.Time
	w := &chunkWriter{}
	p := make([]byte, 2*StallChunk+10)
	start := time.Now()
	n, err := WriteWithin(w, p, time.Minute, func(d time.Time) error {
		deadlines = append(deadlines, d)
		return nil
	})
	if err != nil || n != len(p) {
		t.Fatalf("wrote %d, %v; want %d, nil", n, err, len(p))
	}
	if want := []int{StallChunk, StallChunk, 10}; len(w.sizes) != 3 || w.sizes[0] != want[0] || w.sizes[1] != want[1] || w.sizes[2] != want[2] {
		t.Errorf("chunks %v, want %v", w.sizes, want)
	}
	if len(deadlines) != 3 {
		t.Fatalf("%d deadlines set, want one per chunk (3)", len(deadlines))
	}
	for _, d := range deadlines {
		if d.Before(start.Add(time.Minute)) || d.After(time.Now().Add(time.Minute)) {
			t.Errorf("deadline %v is not now+timeout", d)
		}
	}
}

func TestWriteWithinStopsAtTheFirstError(t *testing.T) {
	errDeadline := errors.New("deadline refused")
	calls := 0
	n, err := WriteWithin(&chunkWriter{}, make([]byte, 3*StallChunk), time.Second, func(time.Time) error {
		if calls++; calls == 2 {
			return errDeadline
		}
		return nil
	})
	if n != StallChunk || !errors.Is(err, errDeadline) {
		t.Errorf("wrote %d, %v; want %d, the deadline's error", n, err, StallChunk)
	}
	n, err = WriteWithin(&chunkWriter{failAfter: 1}, make([]byte, 3*StallChunk), time.Second, func(time.Time) error { return nil })
	if n != StallChunk || !errors.Is(err, errWrite) {
		t.Errorf("wrote %d, %v; want %d, the writer's error", n, err, StallChunk)
	}
}

func TestWriteError(t *testing.T) {
	rec := httptest.NewRecorder()
	h := rec.Header()
	for _, k := range []string{"Content-Disposition", "Etag", "Accept-Ranges", "Expires", "Content-Range"} {
		h.Set(k, "set for the content")
	}
	if status := WriteError(rec, NewError(http.StatusServiceUnavailable, "busy", "retry shortly")); status != 503 {
		t.Errorf("returned %d, want 503", status)
	}
	if rec.Code != 503 || rec.Body.String() != `{"code":"busy","message":"retry shortly"}`+"\n" {
		t.Errorf("answered %d %q", rec.Code, rec.Body)
	}
	for _, k := range []string{"Content-Disposition", "Etag", "Accept-Ranges", "Expires", "Content-Range"} {
		if v := h.Get(k); v != "" {
			t.Errorf("%s: %q kept on an error", k, v)
		}
	}
	want := map[string]string{
		"Retry-After": "5", "Content-Type": "application/json", "Content-Length": "42",
		"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox; default-src 'none'",
		"Cache-Control": "private, no-store",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}

	// A 416 keeps its Content-Range (bytes */size); no other status has
	// Retry-After.
	rec = httptest.NewRecorder()
	rec.Header().Set("Content-Range", "bytes */10")
	WriteError(rec, NewError(http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable", "outside"))
	if rec.Header().Get("Content-Range") != "bytes */10" || rec.Header().Get("Retry-After") != "" {
		t.Errorf("416 headers: %v", rec.Header())
	}
}

func TestSetSafetyHeadersSharesNoWritableSlice(t *testing.T) {
	a, b := http.Header{}, http.Header{}
	SetSafetyHeaders(a)
	SetSafetyHeaders(b)
	a.Add("Cache-Control", "extra")
	if got := b.Values("Cache-Control"); len(got) != 1 || got[0] != "private, no-store" {
		t.Errorf("one response's Add reached another's header: %q", got)
	}
	if a.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", a.Get("X-Content-Type-Options"))
	}
}
