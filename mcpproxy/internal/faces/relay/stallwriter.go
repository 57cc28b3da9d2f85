package relay

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/artifact/httpsafe"
)

// stallWriter writes a response body under a write deadline that extends
// on progress (httpsafe.WriteWithin): a client that stops reading fails
// the write after timeout, one that reads slowly never does. It keeps
// the first error. Once ctx is done every later write fails. Not safe
// for concurrent use (sse.Writer serialises).
type stallWriter struct {
	ctx     context.Context
	w       http.ResponseWriter
	ctl     http.ResponseController // by value: one allocation less per request
	timeout time.Duration
	err     error
	stop    func() bool
	closing context.Context
	armed   atomic.Bool // Close cuts a write to the client (see arm)
	used    bool        // written or flushed: done has something to finish
	dirty   bool        // written since the last flush
	until   time.Time   // the write deadline last set; zero: none
}

// stalled reports whether the client was cut for not reading (rather
// than gone, or ended by Close).
func (s *stallWriter) stalled() bool {
	return errors.Is(s.err, os.ErrDeadlineExceeded) && s.closing.Err() == nil
}

// newStallWriter returns a stallWriter to w. ctx is the request's; once
// closing is done, cancel is called (it ends ctx) and, once armed, a
// write blocked on the client fails at once.
func newStallWriter(ctx, closing context.Context, cancel context.CancelFunc, w http.ResponseWriter, timeout time.Duration) *stallWriter {
	s := &stallWriter{ctx: ctx, closing: closing, w: w, ctl: *http.NewResponseController(w), timeout: timeout}
	s.stop = context.AfterFunc(closing, func() {
		cancel()
		if s.armed.Load() {
			s.ctl.SetWriteDeadline(time.Now())
		}
	})
	return s
}

// arm makes Close cut writes to the client from now on: the relayed
// response's, not the ones the handler makes before it (an error, the
// proxy's own answer, another face's response).
func (s *stallWriter) arm() {
	s.armed.Store(true)
	if s.closing.Err() != nil { // Close came first: its hook may have passed
		s.ctl.SetWriteDeadline(time.Now())
	}
}

// deadlineSlack is how close to the deadline in force a new one may be
// and not be set: an event's write and its flush, microseconds apart,
// share one (each SetWriteDeadline takes the connection's lock and moves
// a runtime timer). A client is cut at most this much before timeout.
const deadlineSlack = time.Millisecond

func (s *stallWriter) deadline(t time.Time) error {
	if err := s.ctx.Err(); err != nil && !t.IsZero() {
		return err
	}
	if d := t.Sub(s.until); !t.IsZero() && !s.until.IsZero() && d < deadlineSlack && d > -deadlineSlack {
		return nil
	}
	err := s.ctl.SetWriteDeadline(t)
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	if err == nil {
		s.until = t
	}
	return err
}

func (s *stallWriter) keep(err error) error {
	if s.err == nil {
		s.err = err
	}
	return err
}

func (s *stallWriter) Write(p []byte) (int, error) {
	s.used, s.dirty = true, true
	if s.timeout < 0 {
		if err := s.ctx.Err(); err != nil {
			return 0, s.keep(err)
		}
		n, err := s.w.Write(p)
		return n, s.keep(err)
	}
	n, err := httpsafe.WriteWithin(s.w, p, s.timeout, s.deadline)
	return n, s.keep(err)
}

// Flush sends what is buffered, under the deadline.
func (s *stallWriter) Flush() error {
	s.used = true
	if s.timeout >= 0 {
		if err := s.deadline(time.Now().Add(s.timeout)); err != nil {
			return s.keep(err)
		}
	}
	if err := s.ctl.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return s.keep(err)
	}
	s.dirty = false
	return nil
}

// done flushes under the deadline what was written since the last flush,
// then clears the deadline: the connection may serve further requests,
// which must not inherit it. Unused, it does nothing (the response may be
// another face's, see Options.DetectLegacy).
func (s *stallWriter) done() {
	if !s.stop() || !s.used || s.ctx.Err() != nil {
		return
	}
	if s.dirty && s.Flush() != nil {
		return
	}
	s.deadline(time.Time{})
}
