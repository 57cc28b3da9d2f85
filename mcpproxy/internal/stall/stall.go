// Package stall times the reads of a peer that stopped in the middle of a
// message: the one rule behind --upstream-stall-timeout, for a stdio
// child's lines and an HTTP upstream's events and bodies alike. Only time
// spent in a read that started mid-message counts: not the silence
// between messages, nor the time the reader spends elsewhere.
package stall

import (
	"sync/atomic"
	"time"
)

// A Watch runs its onStall once a read it is told of waits its timeout.
// Make one with New. Begin and End are called by the one reading
// goroutine (End also once it stops reading); Fired is safe from any.
type Watch struct {
	d       time.Duration
	onStall func()
	t       *time.Timer // made at the first Begin: most messages come in one read
	fired   atomic.Bool
}

// New returns a Watch that calls onStall (on a goroutine of its own, once)
// when a read waits d.
func New(d time.Duration, onStall func()) *Watch { return &Watch{d: d, onStall: onStall} }

// Begin starts the clock for a read that starts mid-message.
func (w *Watch) Begin() {
	if w.t == nil {
		w.t = time.AfterFunc(w.d, w.fire)
		return
	}
	w.t.Reset(w.d)
}

// End stops the clock once that read returned.
func (w *Watch) End() {
	if w.t != nil {
		w.t.Stop()
	}
}

func (w *Watch) fire() {
	if w.fired.CompareAndSwap(false, true) {
		w.onStall()
	}
}

// Fired reports whether onStall ran (or is running).
func (w *Watch) Fired() bool { return w.fired.Load() }

// Timeout is the Watch's d.
func (w *Watch) Timeout() time.Duration { return w.d }
