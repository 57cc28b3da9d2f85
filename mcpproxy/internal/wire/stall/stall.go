// Package stall times the reads of a peer that stopped in the middle of a
// message: the one rule behind --upstream-stall-timeout, for a stdio
// child's lines and an HTTP upstream's events and bodies alike. Only time
// spent in reads that started mid-message counts: not the silence between
// messages, nor the time the reader spends elsewhere. It adds up until the
// peer has sent MinProgress bytes, so one that trickles a byte now and
// then is stopped as one that sends nothing.
package stall

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// MinProgress is how many bytes a peer must send, mid-message, for the
// time its reads waited to start again from zero.
const MinProgress = 1 << 10

// A Watch runs its onStall once the reads it is told of, mid-message, have
// waited its timeout without MinProgress bytes. Make one with New. Begin,
// End and Stop are called by the one reading goroutine; Fired is safe from
// any.
type Watch struct {
	d       time.Duration
	onStall func()
	t       *time.Timer // made at the first Begin: most messages come in one read
	fired   atomic.Bool

	begun  time.Time     // when the read under way began
	waited time.Duration // in reads since the last progress
	got    int           // bytes since the last progress
}

// New returns a Watch that calls onStall (on a goroutine of its own, once)
// when reads wait d.
func New(d time.Duration, onStall func()) *Watch { return &Watch{d: d, onStall: onStall} }

// Begin starts the clock for a read that starts mid-message.
func (w *Watch) Begin() {
	w.begun = time.Now()
	left := max(w.d-w.waited, 0)
	if w.t == nil {
		w.t = time.AfterFunc(left, w.fire)
		return
	}
	w.t.Reset(left)
}

// End stops the clock once that read returned n bytes; mid says whether
// the message goes on after them (if not, the next one starts from zero).
func (w *Watch) End(n int, mid bool) {
	w.Stop()
	w.waited += time.Since(w.begun)
	w.got += n
	if !mid || w.got >= MinProgress {
		w.waited, w.got = 0, 0
	}
}

// Stop stops the clock (the reader stopped reading).
func (w *Watch) Stop() {
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

// A Reader reads an upstream's HTTP body and closes it once its reads
// have waited the Watch's timeout in the middle of a message (see Watch):
// inside an SSE event (after some of its bytes, before the blank line that
// ends it), or inside a JSON body (after its first byte). The read waiting then fails,
// and its caller answers what is open; Why says what to tell them. Make
// one with Events or Message. Like a Watch it is read by one goroutine;
// Why is safe from any.
type Reader struct {
	r     io.ReadCloser
	d     time.Duration // ≤ 0: never closed
	w     *Watch        // made at the first read that starts mid-message: most bodies come whole
	whole bool          // one message, not events: any byte starts it
	left  int64         // with whole, the bytes still to come when known (Content-Length), else -1
	mid   bool          // the bytes so far end inside a message
	ends  [4]byte
	nEnds int // the line-end bytes the stream so far ends with (the first four)
}

// Events guards r, an SSE stream, with timeout d (0: r is only read).
func Events(r io.ReadCloser, d time.Duration) *Reader { return &Reader{r: r, d: d} }

// Message guards r, a body of one message whose size is known when
// size >= 0, with timeout d (0: r is only read).
func Message(r io.ReadCloser, d time.Duration, size int64) *Reader {
	g := Events(r, d)
	g.whole, g.left = true, size
	return g
}

func (g *Reader) Read(p []byte) (int, error) {
	if g.d <= 0 {
		return g.r.Read(p)
	}
	timed := g.mid
	if timed {
		if g.w == nil {
			g.w = New(g.d, func() { g.r.Close() })
		}
		g.w.Begin()
	}
	n, err := g.r.Read(p)
	// A message that ended inside these bytes is done with: the next
	// one's clock starts from zero even if it goes on after them. (Past
	// MinProgress bytes it does anyway: only short reads are looked at.)
	goesOn := timed && !(n < MinProgress && g.endsIn(p[:n]))
	if n > 0 {
		g.note(p[:n])
	}
	if timed {
		g.w.End(n, g.mid && goesOn)
	}
	return n, err
}

// endsIn reports whether b, after the bytes so far, holds the end of an
// event: two line ends in a row (CR, LF or CRLF each). A body of one
// message ends when its length says (see note), not here.
func (g *Reader) endsIn(b []byte) bool {
	if g.whole {
		return false
	}
	ends, last := 0, byte(0)
	end := func(c byte) bool {
		switch {
		case c == '\n' && last == '\r': // a CRLF's LF: the same line end
		case c == '\n' || c == '\r':
			ends++
		default:
			ends = 0
		}
		last = c
		return ends >= 2
	}
	for _, c := range g.ends[:g.nEnds] {
		end(c)
	}
	for _, c := range b {
		if end(c) {
			return true
		}
	}
	return false
}

// Stop ends the guard's clock (the caller stopped reading). Nil-safe.
func (g *Reader) Stop() {
	if g != nil && g.w != nil {
		g.w.Stop()
	}
}

// Why is what a request left unanswered by a stalled upstream is told
// (what: the body's kind, "stream" or "answer"), "" when g did not close
// the body (or is nil).
func (g *Reader) Why(what string) string {
	if g == nil || g.w == nil || !g.w.Fired() {
		return ""
	}
	return fmt.Sprintf("upstream MCP server stalled mid-message for %v; its %s was closed", g.w.Timeout(), what)
}

// note follows where b leaves the body: inside a message, or after it
// (for events, after the blank line that ends one: two line ends in a row,
// CR, LF or CRLF; the stream's trailing line-end bytes are kept, four
// being two line ends whatever they are).
func (g *Reader) note(b []byte) {
	if g.whole {
		if g.left >= 0 {
			g.left -= int64(len(b))
		}
		g.mid = g.left != 0 // all of a known length read: the read for EOF waits for nothing
		return
	}
	k := len(b)
	for k > 0 && (b[k-1] == '\n' || b[k-1] == '\r') {
		k--
	}
	if k > 0 {
		g.nEnds = 0 // other bytes came: only the line ends after them count
	}
	for _, c := range b[max(k, len(b)-len(g.ends)):] {
		if g.nEnds == len(g.ends) {
			break
		}
		g.ends[g.nEnds] = c
		g.nEnds++
	}
	lines := 0
	for i := 0; i < g.nEnds; i++ {
		if g.ends[i] == '\r' && i+1 < g.nEnds && g.ends[i+1] == '\n' {
			i++
		}
		lines++
	}
	g.mid = lines < 2
}
