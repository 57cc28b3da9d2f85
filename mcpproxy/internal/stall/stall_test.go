package stall

import (
	"sync/atomic"
	"testing"
	"time"
)

// A read that returns in time never fires the Watch, however often; one
// that waits past the timeout fires it once.
func TestWatch(t *testing.T) {
	var calls atomic.Int32
	w := New(300*time.Millisecond, func() { calls.Add(1) })
	for range 5 {
		w.Begin()
		time.Sleep(5 * time.Millisecond)
		w.End()
	}
	if w.Fired() || calls.Load() != 0 {
		t.Fatalf("reads of 5 ms against 300: fired %v, %d calls", w.Fired(), calls.Load())
	}
	w.Begin()
	time.Sleep(time.Second)
	w.End()
	w.Begin() // a later read: onStall is not run again
	time.Sleep(time.Second)
	w.End()
	if !w.Fired() || calls.Load() != 1 {
		t.Fatalf("reads of 1 s against 300 ms: fired %v, %d calls", w.Fired(), calls.Load())
	}
}
