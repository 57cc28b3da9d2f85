//go:build !race

// The race detector drops sync.Pool items at random, so allocation
// counts are only exact without it.

package sse

import (
	"bytes"
	"testing"
)

// TestReaderBufferReused: a Reader's buffer goes back to the pool as it
// came and the next Reader takes it, stale bytes and all, and reads its
// own events from it: a Reader made, read and released costs only
// itself and its event's copies (before: a new pointer to the buffer at
// each Release, one allocation more).
func TestReaderBufferReused(t *testing.T) {
	streams := [][]byte{
		[]byte("event: message\nid: 1\ndata: {\"a\":1}\n\n"),
		[]byte("data: {\"b\":2}\n\n"),
	}
	src := bytes.NewReader(nil)
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		want := streams[i%2]
		i++
		src.Reset(want)
		rd := NewReader(src, 0)
		ev, err := rd.Next()
		if err != nil || !bytes.Equal(rd.Raw(), want) || (i%2 == 0 && string(ev.Data) != `{"b":2}`) {
			t.Fatalf("read %q (%q, %v) from a reused buffer, want %q", rd.Raw(), ev.Data, err, want)
		}
		rd.Release()
	})
	t.Logf("%v allocations per Reader", allocs)
	// The Reader and its event's data (the id "1" and the name
	// "message" take none).
	if allocs > 2 {
		t.Errorf("%v allocations per Reader, want at most 2 (3 before: Release allocated)", allocs)
	}
}
