package artifact

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact/httpsafe"
)

// Limits bound what one client can hold of a server through the artifact
// routes (fetches and uploads): concurrent requests per address, and how
// slowly a request body may arrive. Write deadlines on fetch responses are
// HandlerOptions.WriteStallTimeout.
type Limits struct {
	// MaxPerAddr caps the requests one client address has in flight (IPv6:
	// one /64); the next is refused with 503 and Retry-After. Behind a
	// reverse proxy every client has the proxy's address. 0: no cap.
	MaxPerAddr int
	// MinUploadRate is the slowest request body accepted, in bytes per
	// second: at least MinUploadRate×UploadWindow bytes must arrive within
	// each UploadWindow spent waiting for the client (time the server
	// spends elsewhere, e.g. storing, does not count). A slower body is cut
	// with 408 and whatever it was written to is removed. 0: no minimum.
	MinUploadRate int64
	// UploadWindow is the window of MinUploadRate [20s].
	UploadWindow time.Duration
}

// Limiter enforces Limits as HTTP middleware. Create it with NewLimiter;
// safe for concurrent use.
type Limiter struct {
	o     Limits
	mu    sync.Mutex
	inUse map[netip.Prefix]int
}

// NewLimiter returns a Limiter for o.
func NewLimiter(o Limits) *Limiter {
	if o.UploadWindow <= 0 {
		o.UploadWindow = 20 * time.Second
	}
	return &Limiter{o: o, inUse: map[netip.Prefix]int{}}
}

// errBusy is the answer to a request over the per-address cap: 503,
// which carries Retry-After.
var errBusy = httpsafe.NewError(http.StatusServiceUnavailable, "busy", "too many requests in flight from this address; retry shortly")

// errTooSlow is the answer to a request whose body arrives slower than
// the minimum upload rate.
var errTooSlow = httpsafe.NewError(http.StatusRequestTimeout, "too_slow", "the request body arrived slower than the minimum upload rate")

// Middleware wraps h with the limits; it fits mux.Router.Use.
func (l *Limiter) Middleware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.o.MaxPerAddr > 0 {
			key := addrKey(remoteAddr(r))
			if !l.acquire(key) {
				writeError(w, errBusy)
				return
			}
			defer l.release(key)
		}
		if l.o.MinUploadRate > 0 && r.Body != nil && r.Body != http.NoBody {
			quota := max(1, int64(float64(l.o.MinUploadRate)*l.o.UploadWindow.Seconds()))
			r.Body = &rateBody{rc: r.Body, ctl: http.NewResponseController(w), window: l.o.UploadWindow, quota: quota}
		}
		h.ServeHTTP(w, r)
	})
}

// addrKey is what the per-address cap counts: the address, or its /64 for
// IPv6, where one client commonly holds a whole /64.
func addrKey(a netip.Addr) netip.Prefix {
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

func (l *Limiter) acquire(k netip.Prefix) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inUse[k] >= l.o.MaxPerAddr {
		return false
	}
	l.inUse[k]++
	return true
}

func (l *Limiter) release(k netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inUse[k]--; l.inUse[k] <= 0 {
		delete(l.inUse, k)
	}
}

// rateBody cuts a request body that delivers less than quota bytes within
// window of waiting: before each Read, the connection's read deadline is
// set to what is left of the window; the window starts afresh once the
// quota arrived.
type rateBody struct {
	rc     io.ReadCloser
	ctl    *http.ResponseController
	window time.Duration
	quota  int64

	waited time.Duration // in Read, this window
	got    int64         // this window
	err    error
}

func (b *rateBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	start := time.Now()
	if err := b.ctl.SetReadDeadline(start.Add(b.window - b.waited)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	n, err := b.rc.Read(p)
	b.waited += time.Since(start)
	if b.got += int64(n); b.got >= b.quota {
		b.got, b.waited = 0, 0
	}
	var ne net.Error
	switch {
	case err == io.EOF:
		// The server reads on in the background from here; it must not
		// inherit this deadline (its failure would cancel the request).
		b.ctl.SetReadDeadline(time.Time{})
	case errors.As(err, &ne) && ne.Timeout():
		b.err = errTooSlow
		return n, b.err
	}
	return n, err
}

func (b *rateBody) Close() error { return b.rc.Close() }

// stallWriter writes a response body by the write-stall rule
// (httpsafe.WriteWithin): each httpsafe.StallChunk under a fresh write
// deadline, so a client that stops reading is cut after timeout while one
// that reads slowly but steadily never is. No global WriteTimeout could
// tell the two apart on a long download.
type stallWriter struct {
	w       io.Writer
	ctl     http.ResponseController // a value: one allocation less per fetch
	timeout time.Duration
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if s.timeout < 0 {
		return s.w.Write(p)
	}
	return httpsafe.WriteWithin(s.w, p, s.timeout, s.setDeadlineAt)
}

// sendFile writes n bytes of f from offset off, as Write would, but
// through the writer's ReadFrom, where the HTTP server has the kernel copy
// them from the file to the socket (sendfile) instead of through a buffer
// here. It moves f's offset, which sendfile reads from.
//
// The write-stall rule is Write's: the client must take StallChunk bytes
// (httpsafe.StallChunk) within each timeout. On Linux, where sendfile
// advances the file's offset as the socket takes the bytes, one call sends
// the whole section while watchOffset moves the deadline on each time the
// offset has moved StallChunk further: a call and a deadline per
// StallChunk cost a fifth of the throughput of a 100 MiB fetch. Elsewhere
// the offset moves only when the call returns, so each StallChunk is a
// call of its own.
func (s *stallWriter) sendFile(f *os.File, off, n int64) error {
	rf, ok := s.w.(io.ReaderFrom)
	if !ok {
		_, err := io.Copy(s, io.NewSectionReader(f, off, n))
		return err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	chunked := s.timeout >= 0 && runtime.GOOS != "linux"
	if s.timeout >= 0 && !chunked {
		if err := s.setDeadline(); err != nil {
			return err
		}
		defer s.watchOffset(f, off)()
	}
	chunk := int64(0)
	if chunked {
		chunk = httpsafe.StallChunk
	}
	return s.readFrom(rf, f, n, chunk)
}

// readFrom moves n bytes of r through rf in calls of at most chunk bytes,
// each under a fresh write deadline (chunk 0: all in one call, under the
// deadline already set). A source that ends early is io.ErrUnexpectedEOF.
func (s *stallWriter) readFrom(rf io.ReaderFrom, r io.Reader, n, chunk int64) error {
	lr := &io.LimitedReader{R: r}
	for n > 0 {
		lr.N = n
		if chunk > 0 {
			if err := s.setDeadline(); err != nil {
				return err
			}
			lr.N = min(chunk, n)
		}
		m, err := rf.ReadFrom(lr)
		n -= m
		switch {
		case err != nil:
			return err
		case m == 0:
			return io.ErrUnexpectedEOF
		}
	}
	return nil
}

// setDeadline gives the next write the stall timeout.
func (s *stallWriter) setDeadline() error {
	return s.setDeadlineAt(time.Now().Add(s.timeout))
}

// setDeadlineAt sets the write deadline t, if the connection has one (an
// http.ResponseWriter of a test may not).
func (s *stallWriter) setDeadlineAt(t time.Time) error {
	if err := s.ctl.SetWriteDeadline(t); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// watchOffset moves the write deadline on by the timeout each time f's
// offset has advanced StallChunk bytes past where it last did, looking
// eight times per timeout (so a client must take StallChunk within seven
// eighths of it), until the returned stop, which waits for it to end.
func (s *stallWriter) watchOffset(f *os.File, from int64) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(s.timeout/8, time.Millisecond))
		defer t.Stop()
		mark := from
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			pos, err := f.Seek(0, io.SeekCurrent)
			if err != nil {
				return
			}
			if pos-mark >= httpsafe.StallChunk {
				mark = pos
				s.setDeadline()
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}

// done flushes what is buffered under the last deadline, then clears it:
// the connection may serve further requests, which must not inherit it.
func (s *stallWriter) done() {
	if s.timeout < 0 {
		return
	}
	s.ctl.SetWriteDeadline(time.Now().Add(s.timeout))
	if s.ctl.Flush() == nil {
		s.ctl.SetWriteDeadline(time.Time{})
	}
}

// Copy buffers of fetches. A big one streams faster, but a client that
// stops reading holds its fetch's buffer until WriteStallTimeout cuts it:
// so at most maxBigBufs fetches hold a big buffer at once, and the others
// stream through a small one. Buffers held by stalled clients then stay
// under maxBigBufs×512 KiB plus 32 KiB per fetch beyond.
const maxBigBufs = 64

var (
	bigBufs   = sync.Pool{New: func() any { b := make([]byte, 512<<10); return &b }}
	smallBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	bigSlots  = make(chan struct{}, maxBigBufs)
)

// copyBuffer returns a buffer for one fetch and the function that gives it
// back.
func copyBuffer() ([]byte, func()) {
	select {
	case bigSlots <- struct{}{}:
		bp := bigBufs.Get().(*[]byte)
		return *bp, func() { bigBufs.Put(bp); <-bigSlots }
	default:
		bp := smallBufs.Get().(*[]byte)
		return *bp, func() { smallBufs.Put(bp) }
	}
}
