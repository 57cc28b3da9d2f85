package s3store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/spillway-dev/spillway/artifact"
)

// Direct GETs. Open on an http endpoint (no TLS, no proxy; Linux) sends
// its GET itself, presigned, on a connection of its own, and returns a
// reader positioned at the body that hands that connection to the fetch
// endpoint (artifact.ConnSection): the endpoint has the kernel move the
// bytes from it to the client (splice), where minio-go's body would cost
// two copies through user space per byte. Of a 100 MiB fetch through the
// endpoint, that takes about a quarter of Spillway's CPU off (60 ms
// against 45; see BENCHMARKS.md).
//
// Everything else stays as it was: a response that is not the expected
// 200 or 206 with a Content-Length (an error, a missing object, a range
// past the end, a chunked body) is dropped and the call made again through
// minio-go, which maps it to the same errors as before; the connection is
// closed after the body, never reused; the same deadlines hold (Timeout
// until the headers, IdleTimeout without data after them, see watch).

// errIndirect tells Open that a direct GET met something it does not
// handle, so the call is to be made again through minio-go.
var errIndirect = errors.New("s3store: not a direct GET")

const (
	// directMin is the shortest read Open makes directly: below it, a
	// pooled connection of minio-go's costs less than a fresh one.
	directMin = 1 << 20
	// directHeadMax bounds the response headers of a direct GET.
	directHeadMax = 1 << 20
	// directTTL is how long the presigned URL of a direct GET, used at
	// once and never shown, stays valid.
	directTTL = 10 * time.Minute
)

// directOK reports whether Open can GET directly from an endpoint reached
// with secure: plain HTTP, not through a proxy (minio-go's transport honours
// HTTP_PROXY and its kin), on a system where the connection can be watched
// (see silence).
func directOK(endpoint string, secure bool) bool {
	if secure || !canWatch {
		return false
	}
	u := &url.URL{Scheme: "http", Host: endpoint}
	p, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	return err == nil && p == nil
}

// openDirect GETs length bytes of id from offset (length < 0: to the end;
// never 0) on a connection of its own. It returns errIndirect for anything
// it does not expect, after which minio-go makes the call again.
func (s *Store) openDirect(ctx context.Context, id string, offset, length int64) (io.ReadCloser, error) {
	req, err := s.directRequest(ctx, id, offset, length)
	if err != nil {
		return nil, errIndirect
	}
	// Bounded like minio-go's GET until the headers are in: Timeout.
	deadline := time.Now().Add(s.timeout)
	c, err := dialDirect(ctx, id, req.URL.Host, deadline)
	if err != nil {
		return nil, err
	}
	b := &directBody{c: c, id: id, idle: s.idle, quit: make(chan struct{})}
	b.stopCtx = context.AfterFunc(ctx, func() { b.end(ctx.Err()) })
	res, br, err := b.head(req, deadline)
	if err != nil {
		b.Close()
		return nil, directFailure(ctx, id, err)
	}
	if err := s.startBody(b, res, br, offset, req.Header.Get("Range") != ""); err != nil {
		b.Close()
		return nil, err
	}
	b.wg.Go(b.watch)
	return b, nil
}

// directRequest is the presigned GET of length bytes of id from offset,
// on a connection that is closed after it.
func (s *Store) directRequest(ctx context.Context, id string, offset, length int64) (*http.Request, error) {
	u, err := s.presign(ctx, id)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	switch {
	case length > 0 && length <= 1<<62-offset:
		req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-"+strconv.FormatInt(offset+length-1, 10))
	case offset > 0:
		req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
	}
	req.Close = true
	return req, nil
}

// dialDirect connects to host for a direct GET of id, by deadline.
func dialDirect(ctx context.Context, id, host string, deadline time.Time) (*net.TCPConn, error) {
	d := net.Dialer{Deadline: deadline, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, directFailure(ctx, id, err)
	}
	c, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, errIndirect
	}
	return c, nil
}

// directFailure is what Open returns when a direct GET of id failed with
// err before its body: the caller's own end, ErrUnavailable for a service
// that did not answer in time (not asked again), or errIndirect for the
// rest (refused and the like), which minio-go then retries.
func directFailure(ctx context.Context, id string, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("open %s: %w", id, ctx.Err())
	case timedOut(err):
		return fmt.Errorf("open %s: %w: %w", id, artifact.ErrUnavailable, err)
	}
	return errIndirect
}

// startBody checks res, the answer to a direct GET from offset (ranged: a
// Range was asked for), and positions b at its body, whose first bytes br
// holds. An answer it does not expect is errIndirect; metadata that
// decode refuses is decode's error.
func (s *Store) startBody(b *directBody, res *http.Response, br *bufio.Reader, offset int64, ranged bool) error {
	n, ok := directLength(res, offset, ranged)
	if !ok {
		return errIndirect
	}
	info, err := minio.ToObjectInfo(s.bucket, s.key(b.id), res.Header)
	if err != nil {
		return errIndirect
	}
	if _, err := s.decode("open", b.id, info); err != nil {
		return err
	}
	head, _ := br.Peek(int(min(int64(br.Buffered()), n)))
	b.headBuf, b.rest = head, n-int64(len(head))
	return nil
}

// presign signs a GET of id's object, locally (minio-go asks the bucket's
// region once, when Options.Region is empty).
func (s *Store) presign(ctx context.Context, id string) (*url.URL, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return s.c.PresignedGetObject(ctx, s.bucket, s.key(id), directTTL, nil)
}

// head sends req on b's connection and reads the response's headers, all
// before deadline, and no more than directHeadMax of them. The returned
// reader holds what it read past the headers: the first bytes of the body.
func (b *directBody) head(req *http.Request, deadline time.Time) (*http.Response, *bufio.Reader, error) {
	if err := b.c.SetDeadline(deadline); err != nil {
		return nil, nil, err
	}
	if err := req.Write(b.c); err != nil {
		return nil, nil, err
	}
	// A small buffer: what it reads past the headers is copied, not spliced.
	br := bufio.NewReaderSize(&io.LimitedReader{R: b.c, N: directHeadMax}, 4<<10)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, err
	}
	if err := b.c.SetDeadline(time.Time{}); err != nil {
		return nil, nil, err
	}
	// The context may have ended (end) before the deadline was cleared.
	if err := b.endedBy(); err != nil {
		return nil, nil, err
	}
	return res, br, nil
}

// directLength returns the length of res's body when it is what a GET
// from offset asked for (ranged: with a Range header) and has a
// Content-Length: 200 for a GET of the whole object, 206 with a
// Content-Range starting at offset and as long as the body otherwise.
func directLength(res *http.Response, offset int64, ranged bool) (int64, bool) {
	n := res.ContentLength
	if n < 0 || len(res.TransferEncoding) > 0 {
		return 0, false
	}
	want := http.StatusOK
	if ranged {
		want = http.StatusPartialContent
		first, last, ok := parseContentRange(res.Header.Get("Content-Range"))
		if !ok || first != offset || last-first+1 != n {
			return 0, false
		}
	}
	if res.StatusCode != want {
		return 0, false
	}
	return n, true
}

// parseContentRange parses "bytes first-last/size" (size may be "*") and
// returns first and last; ok is false for anything else, a range that
// ends before it starts, or one that reaches past a known size.
func parseContentRange(v string) (first, last int64, ok bool) {
	r, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, false
	}
	r, size, found := strings.Cut(r, "/")
	if !found {
		return 0, 0, false
	}
	f, l, found := strings.Cut(r, "-")
	if !found {
		return 0, 0, false
	}
	first, err1 := strconv.ParseInt(f, 10, 64)
	last, err2 := strconv.ParseInt(l, 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first {
		return 0, 0, false
	}
	if size != "*" {
		sz, err := strconv.ParseInt(size, 10, 64)
		if err != nil || last >= sz {
			return 0, 0, false
		}
	}
	return first, last, true
}

// directBody is the body of a direct GET: headBuf, read with the headers,
// then rest bytes on c. It watches c for a store that stops sending (see
// watch) and for the end of the call's context, either of which fails
// pending and later reads of c with a timeout. Not safe for concurrent
// use, except Close with a read in progress.
type directBody struct {
	c       *net.TCPConn
	id      string
	idle    time.Duration
	headBuf []byte
	rest    int64

	stopCtx func() bool
	quit    chan struct{} // closed by Close: ends watch
	wg      sync.WaitGroup
	once    sync.Once
	mu      sync.Mutex
	ended   error // why the connection was interrupted (see end)
}

var _ artifact.ConnSection = (*directBody)(nil)

// ConnSection implements artifact.ConnSection.
func (b *directBody) ConnSection() ([]byte, *net.TCPConn, int64) {
	return b.headBuf, b.c, b.rest
}

// SectionErr implements artifact.ConnSection.
func (b *directBody) SectionErr(err error) error {
	if err != nil && timedOut(err) && errors.Is(b.endedBy(), errStalled) {
		return fmt.Errorf("read %s: %w: %w", b.id, artifact.ErrUnavailable, errStalled)
	}
	return err
}

func (b *directBody) Read(p []byte) (int, error) {
	if len(b.headBuf) > 0 {
		n := copy(p, b.headBuf)
		b.headBuf = b.headBuf[n:]
		return n, nil
	}
	if b.rest <= 0 {
		return 0, io.EOF
	}
	n, err := b.c.Read(p[:min(int64(len(p)), b.rest)])
	b.rest -= int64(n)
	switch {
	case err == nil || errors.Is(err, io.EOF) && b.rest == 0:
	case errors.Is(err, io.EOF):
		err = fmt.Errorf("read %s: %w: %w", b.id, artifact.ErrUnavailable, io.ErrUnexpectedEOF)
	case timedOut(err) && b.endedBy() != nil && !errors.Is(b.endedBy(), errStalled):
		err = fmt.Errorf("read %s: %w", b.id, b.endedBy()) // the caller's context
	case timedOut(err) && b.endedBy() != nil:
		err = b.SectionErr(err)
	default:
		err = fmt.Errorf("read %s: %w: %w", b.id, artifact.ErrUnavailable, err)
	}
	return n, err
}

// Close stops watching the connection and closes it.
func (b *directBody) Close() error {
	var err error
	b.once.Do(func() {
		b.stopCtx()
		close(b.quit)
		b.wg.Wait()
		err = b.c.Close()
	})
	return err
}

// end fails the pending and later reads of the connection at once, for
// cause (errStalled, or the call context's error), unless it ended already.
func (b *directBody) end(cause error) {
	b.mu.Lock()
	if b.ended == nil {
		b.ended = cause
	}
	b.mu.Unlock()
	b.c.SetDeadline(time.Unix(1, 0))
}

// endedBy returns the cause given to end, or nil.
func (b *directBody) endedBy() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended
}

// watch looks at c eight times per IdleTimeout, until Close, and
// interrupts it once the store has sent nothing for seven eighths of
// IdleTimeout while nothing it sent was waiting to be read: so a stalled
// store fails the fetch within IdleTimeout, while a slow consumer (the
// client of a splice) never trips it, since what the store sent waits.
func (b *directBody) watch() {
	tick := max(b.idle/8, time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			return
		case <-t.C:
		}
		quiet, err := silence(b.c)
		if err == nil && quiet >= b.idle-tick {
			b.end(errStalled)
			return
		}
	}
}
