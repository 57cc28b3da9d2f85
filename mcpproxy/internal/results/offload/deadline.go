package offload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/preview"
)

// StallBytes is what storing must move within each Options.StoreStall:
// fewer, and the rewrite fails as stalled. It makes the rule a floor on
// the rate (64 KiB per 30 s by default, about 2 KiB/s) as well as a bound
// on silence, so that a store that trickles a byte now and then is cut as
// surely as one that sends nothing.
const StallBytes = 64 << 10

// ErrStalled is the cause of a rewrite's context ending because storing
// made no progress: fewer than StallBytes moved within Options.StoreStall.
var ErrStalled = errors.New("offload: the store made no progress")

// stallWatch ends a rewrite's context when storing stalls. Progress is
// counted in bytes read from a unit's source on its way to the store and
// bytes a store reports sending (artifact.ReportProgress); a source's end
// is progress too. Time alone never fails it: a large result on a slow
// store that keeps moving takes as long as it takes. Only time spent
// storing counts (see storing): the rewrite's own work (scanning a result,
// building a preview) is bounded by its own means, and on a loaded
// machine it may take longer than a stall interval without any store
// being slow.
type stallWatch struct {
	stall  time.Duration
	start  time.Time
	moved  atomic.Int64 // bytes moved so far
	mark   atomic.Int64 // moved at the last progress
	last   atomic.Int64 // time of the last progress, ns since start
	busy   atomic.Int32 // stores in progress
	cancel context.CancelCauseFunc

	// mu guards timer, which check re-arms from the timer's own
	// goroutine, and stopped, after which it is never re-armed.
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// watchKey is the context key of a rewrite's stallWatch.
type watchKey struct{}

// storing marks the start of a store's work under ctx's watch, if any,
// and returns the function that marks its end. Between the two, the
// stall rule applies.
func storing(ctx context.Context) (done func()) {
	w, ok := ctx.Value(watchKey{}).(*stallWatch)
	if !ok {
		return func() {}
	}
	w.busy.Add(1)
	w.progress()
	return func() { w.progress(); w.busy.Add(-1) }
}

// progress notes that something moved now.
func (w *stallWatch) progress() {
	w.mark.Store(w.moved.Load())
	w.last.Store(int64(time.Since(w.start)))
}

// watchStall returns ctx, detached from its cancellation (see Rewrite),
// ending with cause ErrStalled once storing stalls for stall. Call stop
// when the rewrite is over.
func watchStall(ctx context.Context, stall time.Duration) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	w := &stallWatch{stall: stall, start: time.Now(), cancel: cancel}
	w.mu.Lock()
	w.timer = time.AfterFunc(stall, w.check)
	w.mu.Unlock()
	ctx = context.WithValue(ctx, watchKey{}, w)
	return artifact.WithProgress(ctx, w.add), func() {
		w.mu.Lock()
		w.stopped = true
		w.timer.Stop()
		w.mu.Unlock()
		cancel(nil)
	}
}

// add counts n bytes moved; n == 0 is a source's end.
func (w *stallWatch) add(n int64) {
	if m := w.moved.Add(n); n == 0 || m-w.mark.Load() >= StallBytes {
		w.progress()
	}
}

// check runs when a stall interval may have passed without progress.
func (w *stallWatch) check() {
	idle := time.Since(w.start) - time.Duration(w.last.Load())
	if w.busy.Load() == 0 {
		idle = 0 // nothing is being stored: the rewrite's own work is not a stall
	}
	if idle < w.stall {
		w.mu.Lock()
		if !w.stopped {
			w.timer.Reset(w.stall - idle)
		}
		w.mu.Unlock()
		return
	}
	w.cancel(fmt.Errorf("%w: less than %d KiB moved in %v, after %d bytes", ErrStalled, StallBytes>>10, w.stall, w.moved.Load()))
}

// callKey is the context key of the call's own context, which the
// store's work outlives (Rewrite).
type callKey struct{}

// withCall returns ctx carrying itself as the call's own context, which
// previewWhileCalled reads once watchStall has detached the rewrite from
// the call's cancellation.
func withCall(ctx context.Context) context.Context { return context.WithValue(ctx, callKey{}, ctx) }

// previewWhileCalled builds pb's preview while both ctx (the store's
// watch) and the call's own context last: a thumbnail is for the
// client alone, and drawing one takes memory and CPU that the client's
// leaving should give back at once.
func previewWhileCalled(ctx context.Context, pb *preview.Builder) preview.Preview {
	if call, ok := ctx.Value(callKey{}).(context.Context); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(call, cancel)()
	}
	return pb.PreviewContext(ctx)
}
