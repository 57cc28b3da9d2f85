package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/httpsafe"
)

// Deadlines. A store that accepts connections and never answers, or stops
// sending in the middle of a body, must cost a caller seconds, not the
// minutes of minio-go's defaults (a 60 s header timeout, tried three times).
// Every request to the service is bounded in each of its phases:
//
//   - connecting (and TLS): Timeout;
//   - sending the request body: IdleTimeout without progress (stallConn);
//   - waiting for the response headers once the request is sent: Timeout;
//   - reading the response body: IdleTimeout without progress while a read
//     is pending (watchedBody), so a slow consumer never trips it; on a
//     direct GET's connection, IdleTimeout without data from the service
//     while none it sent waits to be read (directBody.watch).
//
// A request that times out ends its store call (startOp): a service that
// hung once is not given two more chances to hang, as minio-go's retries
// would. Quick failures are still retried. Calls that only ask or write
// nothing large (Stat, Open until its body starts, Delete, Ping, Revoke,
// PresignGet, each page of a listing) carry a deadline of Timeout as a
// whole, retries and back-off included. Uploads carry none: a large part on
// a slow link must be able to take as long as it keeps moving. What a
// request body sends is reported to its context's progress function
// (artifact.WithProgress), so that a caller bounding a Put by its progress
// sees a part move while it is sent, long after it was read.
const (
	// DefaultTimeout is Options.Timeout when it is 0.
	DefaultTimeout = 5 * time.Second
	// DefaultIdleTimeout is Options.IdleTimeout when it is 0.
	DefaultIdleTimeout = 15 * time.Second
)

// newTransport is minio-go's default transport with the deadlines above.
func newTransport(secure bool, timeout, idle time.Duration) (http.RoundTripper, error) {
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: c, idle: idle}, nil
	}
	tr.TLSHandshakeTimeout = timeout
	tr.ResponseHeaderTimeout = timeout
	return &watchTransport{base: tr, idle: idle}, nil
}

// stallConn fails a write that makes no progress for idle, by the
// write-stall rule (httpsafe.WriteWithin): each chunk of a write gets a
// fresh deadline, so a slow link that keeps accepting bytes is never cut.
type stallConn struct {
	net.Conn
	idle time.Duration
}

func (c *stallConn) Write(p []byte) (int, error) {
	return httpsafe.WriteWithin(c.Conn, p, c.idle, c.Conn.SetWriteDeadline)
}

// opKey carries a store call's opState in its context.
type opKey struct{}

// opState is one store call in progress.
type opState struct {
	ctx    context.Context // the call's own context
	cancel context.CancelCauseFunc
}

// startOp starts a store call on ctx. A request of the call that times out
// cancels the returned context with a cause wrapping ErrUnavailable (see
// convert); so does cancel with such a cause. Call cancel(nil) when the
// call is over.
func startOp(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	return context.WithValue(ctx, opKey{}, &opState{ctx: ctx, cancel: cancel}), cancel
}

// end ends the call because of err, a timeout or stall.
func (o *opState) end(err error) {
	o.cancel(fmt.Errorf("%w: %w", artifact.ErrUnavailable, err))
}

// hung reports the error that ended the call because the service hung,
// if it did; cleanup run on a context detached from the call (as Put's
// is) then fails at once instead of waiting on the same service again.
func hung(ctx context.Context) error {
	st, ok := ctx.Value(opKey{}).(*opState)
	if !ok || st.ctx.Err() == nil {
		return nil
	}
	if cause := context.Cause(st.ctx); errors.Is(cause, artifact.ErrUnavailable) {
		return cause
	}
	return nil
}

// timedOut reports whether err is one of the deadlines above.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errStalled)
}

// errStalled fails the reads of a response body that made no progress
// for IdleTimeout.
var errStalled = errors.New("s3store: no data from the service within the idle timeout")

// watchTransport refuses further attempts of a call whose request timed
// out, and watches response bodies for stalls.
type watchTransport struct {
	base http.RoundTripper
	idle time.Duration
}

func (t *watchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := hung(req.Context()); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("not retried: %w", err)
	}
	st, _ := req.Context().Value(opKey{}).(*opState)
	ctx, cancel := context.WithCancel(req.Context())
	res, err := t.base.RoundTrip(reportBody(req.WithContext(ctx)))
	if err != nil {
		cancel()
		if st != nil && timedOut(err) {
			st.end(err)
		}
		return nil, err
	}
	res.Body = &watchedBody{rc: res.Body, idle: t.idle, cancel: cancel, st: st}
	return res, nil
}

// reportBody makes req's body report what is sent of it to its context's
// progress function (artifact.WithProgress), if any: a part is read from
// the caller's source whole before it is sent, and its upload is progress
// that the caller's reads do not show. req is a copy of the caller's
// (WithContext), so it may be changed.
func reportBody(req *http.Request) *http.Request {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength <= 0 {
		return req // nothing to report: leave net/http's length probing alone
	}
	wrap := func(b io.ReadCloser) io.ReadCloser {
		return struct {
			io.Reader
			io.Closer
		}{artifact.ProgressReader(req.Context(), b), b}
	}
	req.Body = wrap(req.Body)
	if get := req.GetBody; get != nil { // a body sent again reports again
		req.GetBody = func() (io.ReadCloser, error) {
			b, err := get()
			if err != nil || b == nil || b == http.NoBody {
				return b, err
			}
			return wrap(b), nil
		}
	}
	return req
}

// watchedBody aborts its request when a Read has waited idle for data.
// Time spent outside Read (the consumer being slow) does not count.
type watchedBody struct {
	rc     io.ReadCloser
	idle   time.Duration
	cancel context.CancelFunc
	st     *opState

	mu      sync.Mutex
	timer   *time.Timer
	armed   bool
	since   time.Time // start of the pending Read; zero when none
	stalled bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.stalled {
		b.mu.Unlock()
		return 0, errStalled
	}
	b.since = time.Now()
	if !b.armed {
		if b.timer == nil {
			b.timer = time.AfterFunc(b.idle, b.check)
		} else {
			b.timer.Reset(b.idle)
		}
		b.armed = true
	}
	b.mu.Unlock()

	n, err := b.rc.Read(p)

	b.mu.Lock()
	b.since = time.Time{}
	stalled := b.stalled
	b.mu.Unlock()
	if err != nil && stalled {
		err = errStalled
	}
	if err != nil {
		b.cancel() // EOF or failure: the request is over either way
	}
	return n, err
}

// check runs when the timer fires: it aborts a Read pending for idle, or
// re-arms for what is left of the pending one's wait.
func (b *watchedBody) check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	if b.since.IsZero() || b.stalled {
		return // no read pending: the next Read re-arms
	}
	if left := b.idle - time.Since(b.since); left > 0 {
		b.timer.Reset(left)
		b.armed = true
		return
	}
	b.stalled = true
	if b.st != nil {
		b.st.end(errStalled)
	}
	b.cancel()
}

func (b *watchedBody) Close() error {
	err := b.rc.Close()
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	b.cancel()
	return err
}

// bounded starts a call that only asks the service, with a deadline of
// Timeout as a whole; when it passes, the call's error wraps ErrUnavailable
// (see convert), while the caller's own cancellation stays what it is.
func (s *Store) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	octx, ocancel := startOp(ctx)
	tctx, tcancel := context.WithTimeoutCause(octx, s.timeout, s.errTimeout)
	return tctx, func() { tcancel(); ocancel(nil) }
}

// newTimeoutError is the cause of a bounded call's expired deadline.
func newTimeoutError(d time.Duration) error {
	return fmt.Errorf("no answer from the service within %v: %w", d, artifact.ErrUnavailable)
}
