package stall

import (
	"sync/atomic"
	"testing"
	"time"
)

// Reads that bring MinProgress bytes, or end their message, never fire
// the Watch however long they take together; reads that each wait a while
// for a byte fire it once their waits add up to the timeout (the time
// between reads not counted); a read that waits past it fires it, once.
func TestWatch(t *testing.T) {
	var calls atomic.Int32
	w := New(300*time.Millisecond, func() { calls.Add(1) })
	read := func(d time.Duration, n int, mid bool) {
		w.Begin()
		time.Sleep(d)
		w.End(n, mid)
	}
	for range 6 {
		read(100*time.Millisecond, MinProgress, true)
	}
	for range 6 {
		read(100*time.Millisecond, 1, false)
	}
	if w.Fired() || calls.Load() != 0 {
		t.Fatalf("reads of 100 ms making progress against 300: fired %v, %d calls", w.Fired(), calls.Load())
	}
	// A trickle: a byte per read of 120 ms, mid-message, with pauses.
	read(120*time.Millisecond, 1, true)
	if w.Fired() {
		t.Fatal("one read of 120 ms against 300 fired")
	}
	for range 3 {
		time.Sleep(200 * time.Millisecond) // not in a read: does not count
		read(120*time.Millisecond, 1, true)
	}
	if !w.Fired() || calls.Load() != 1 {
		t.Fatalf("four reads of 120 ms, a byte each, against 300 ms: fired %v, %d calls", w.Fired(), calls.Load())
	}
	read(time.Second, 0, true) // a later read: onStall is not run again
	if calls.Load() != 1 {
		t.Fatalf("%d calls", calls.Load())
	}
	w2 := New(300*time.Millisecond, func() { calls.Add(1) })
	w2.Begin()
	time.Sleep(time.Second)
	w2.End(0, true)
	if !w2.Fired() {
		t.Fatal("a read of 1 s against 300 ms did not fire")
	}
}
