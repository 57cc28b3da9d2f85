package terminating

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact/httpsafe"
)

// errCut is a write refused because the face closed.
var errCut = errors.New("terminate: the face closed")

// out is the ResponseWriter of one request the face serves: every write is
// under a write deadline that extends on progress, and Close cuts it at
// once, even in the middle of a write to a client that stopped reading (a
// handler blocked there would hold the server's shutdown, and the
// request's upstream call, for ever). Only its handler's goroutine writes
// to it; Close may cut it from any.
type out struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration

	mu  sync.Mutex
	cut bool
}

// open wraps a request's ResponseWriter; the caller must call done before
// its handler returns.
func (f *Face) open(w http.ResponseWriter) *out {
	o := &out{w: w, rc: http.NewResponseController(w), stall: f.o.WriteStall}
	f.outsMu.Lock()
	defer f.outsMu.Unlock()
	if f.outs == nil {
		o.cut = true // closed already
		o.rc.SetWriteDeadline(time.Now())
	} else {
		f.outs[o] = struct{}{}
	}
	return o
}

// done unregisters o. What is still buffered is flushed under one last
// deadline, which is then cleared (the connection may serve further
// requests, which must not inherit it).
func (f *Face) done(o *out) {
	f.outsMu.Lock()
	delete(f.outs, o)
	f.outsMu.Unlock()
	if o.FlushError() == nil {
		o.SetWriteDeadline(time.Time{})
	}
}

// cutAll cuts every open response: the face is closing.
func (f *Face) cutAll() {
	f.outsMu.Lock()
	outs := f.outs
	f.outs = nil
	f.outsMu.Unlock()
	for o := range outs {
		o.mu.Lock()
		o.cut = true
		// A deadline in the past fails a write blocked now.
		o.rc.SetWriteDeadline(time.Now())
		o.mu.Unlock()
	}
}

// SetWriteDeadline sets the write deadline t (zero: none), unless the
// face closed. http.ResponseController finds it, so code that sets its
// own deadlines (the fetch handler) cannot undo a cut.
func (o *out) SetWriteDeadline(t time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cut {
		return errCut
	}
	if err := o.rc.SetWriteDeadline(t); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// deadline is the deadline of a write starting now: none when the face
// never cuts a stalled client (only Close does).
func (o *out) deadline() time.Time {
	if o.stall < 0 {
		return time.Time{}
	}
	return time.Now().Add(o.stall)
}

// Write writes p by the write-stall rule (httpsafe.WriteWithin), as on the
// fetch path: a client reading steadily, however slowly, is never cut; one
// that stops reading is, after Options.WriteStall.
func (o *out) Write(p []byte) (int, error) {
	if o.stall < 0 {
		if err := o.SetWriteDeadline(time.Time{}); err != nil {
			return 0, err
		}
		return o.w.Write(p)
	}
	return httpsafe.WriteWithin(o.w, p, o.stall, o.SetWriteDeadline)
}

// FlushError sends what is buffered, under a deadline
// (http.ResponseController's Flush, and so sse.Writer's, calls it).
func (o *out) FlushError() error {
	if err := o.SetWriteDeadline(o.deadline()); err != nil {
		return err
	}
	if err := o.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// Header is the response's header map.
func (o *out) Header() http.Header { return o.w.Header() }

// WriteHeader sends the response's status line and headers (buffered
// until the first flush or write).
func (o *out) WriteHeader(code int) { o.w.WriteHeader(code) }

// Unwrap gives http.ResponseController what out does not handle itself.
func (o *out) Unwrap() http.ResponseWriter { return o.w }
