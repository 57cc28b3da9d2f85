//go:build !race

// The race detector drops sync.Pool items at random, so allocation
// counts are only exact without it.

package sse

import (
	"bytes"
	"strings"
	"testing"
)

// TestReaderBufferReused: a Reader's buffer and scratch space go back to
// the pool as they came and the next Reader takes them, stale bytes and
// all, and reads its own events from them: a Reader made, read and
// released costs only itself and its event's copies (before: a new
// pointer to the buffer at each Release, and new scratch space for the
// fields of each Reader's first event).
func TestReaderBufferReused(t *testing.T) {
	streams := [][]byte{
		[]byte("event: message\nid: 1\ndata: {\"a\":1}\n\n"),
		[]byte(": hi\nid: 2\ndata: {\"b\":2}\n\n"),
	}
	src := bytes.NewReader(nil)
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		want := streams[i%2]
		i++
		src.Reset(want)
		rd := NewReader(src, 0)
		ev, err := rd.Next()
		if err != nil || !bytes.Equal(rd.Raw(), want) || (i%2 == 0 && (string(ev.Data) != `{"b":2}` || ev.ID != "2" || ev.Comments[0] != "hi")) {
			t.Fatalf("read %q (%q, %v) from a reused buffer, want %q", rd.Raw(), ev.Data, err, want)
		}
		rd.Release()
	})
	t.Logf("%v allocations per Reader", allocs)
	// The Reader, its event's data and the comment's string (the ids "1"
	// and "2" and the name "message" take none; the fields' scratch space
	// comes with the buffer).
	if allocs > 3 {
		t.Errorf("%v allocations per Reader, want at most 3 (4 before the scratch space came with the buffer, 5 before Release stopped allocating)", allocs)
	}
}

// TestReaderScratchBounded: scratch space grown past maxScratch by a long
// field (an id of 4 KiB) is not put back in the pool with the buffer: an
// attacker's one long id is not kept for good.
func TestReaderScratchBounded(t *testing.T) {
	for _, n := range []int{maxScratch / 2, 4 * maxScratch} {
		rd := NewReader(strings.NewReader("id: "+strings.Repeat("i", n)+"\ndata: 1\n\n"), 0)
		m := rd.mem
		if ev, err := rd.Next(); err != nil || len(ev.ID) != n {
			t.Fatalf("id of %d: %d bytes, %v", n, len(ev.ID), err)
		}
		rd.Release()
		if kept := cap(m.scratch); kept > maxScratch || (n <= maxScratch && kept < n) {
			t.Errorf("after an id of %d bytes the pool keeps %d bytes of scratch space, want at most %d (and the %d)", n, kept, maxScratch, n)
		}
	}
}
