package miniotest

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Fault is how a FaultProxy treats the connections it accepts.
type Fault int

const (
	// Pass forwards both ways.
	Pass Fault = iota
	// Hang accepts connections and neither reads nor answers (a wedged
	// service, a black-holing load balancer): once the socket buffers are
	// full, the client's writes block too.
	Hang
	// StallBody forwards the first response's headers and StallAfter
	// bytes of its body, then nothing more, keeping the connection open.
	StallBody
	// Slow forwards responses at SlowRate bytes per second.
	Slow
)

// FaultProxy is a TCP proxy on 127.0.0.1 in front of a real server that
// misbehaves on request. A connection keeps the Fault in force when it was
// accepted; Set closes the open ones, so that a client's pooled
// connections cannot escape a new fault. Safe for concurrent use.
type FaultProxy struct {
	Addr       string // host:port to point clients at
	StallAfter int    // StallBody: body bytes forwarded before the stall [64 KiB]
	SlowRate   int    // Slow: bytes per second [256 KiB]

	target string
	ln     net.Listener
	mu     sync.Mutex
	fault  Fault
	conns  map[net.Conn]struct{}
	reset  chan struct{} // closed by Set: ends the hung connections
	wg     sync.WaitGroup
}

// NewFaultProxy starts a proxy to target (host:port) in mode Pass, closed
// when t ends. Set StallAfter and SlowRate before use.
func NewFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{Addr: ln.Addr().String(), StallAfter: 64 << 10, SlowRate: 256 << 10,
		target: target, ln: ln, conns: map[net.Conn]struct{}{}, reset: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// HungListener starts a server on 127.0.0.1 that accepts connections and
// never answers, closed when t ends, and returns its address.
func HungListener(t testing.TB) string {
	t.Helper()
	p := NewFaultProxy(t, "")
	p.Set(Hang)
	return p.Addr
}

// Set changes the fault for new connections and closes the open ones.
func (p *FaultProxy) Set(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
	for c := range p.conns {
		c.Close()
	}
	close(p.reset)
	p.reset = make(chan struct{})
}

func (p *FaultProxy) close() {
	p.ln.Close()
	p.Set(Pass)
	p.wg.Wait()
}

// track registers c for Set to close; it reports the fault c runs under
// and the channel Set closes.
func (p *FaultProxy) track(c net.Conn) (Fault, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
	return p.fault, p.reset
}

func (p *FaultProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	c.Close()
}

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *FaultProxy) serve(c net.Conn) {
	defer p.untrack(c)
	fault, reset := p.track(c)
	if fault == Hang || p.target == "" {
		<-reset // until Set or the end of the test
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(up)
	defer p.untrack(up)
	go func() {
		io.Copy(up, c)
		up.Close()
	}()
	switch fault {
	case StallBody:
		stallAfterHeaders(c, up, p.StallAfter)
		io.Copy(io.Discard, c) // hold the connection open, silent
	case Slow:
		buf := make([]byte, max(p.SlowRate/10, 1))
		for {
			n, err := up.Read(buf)
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
				time.Sleep(time.Duration(n) * time.Second / time.Duration(max(p.SlowRate, 1)))
			}
			if err != nil {
				return
			}
		}
	default:
		io.Copy(c, up)
	}
}

// stallAfterHeaders copies from up to c through the end of the first
// header block and n bytes more.
func stallAfterHeaders(c, up net.Conn, n int) {
	var head []byte        // what was sent before the headers' end was seen
	sent, allowed := 0, -1 // allowed: known once the headers ended
	buf := make([]byte, 32<<10)
	for allowed < 0 || sent < allowed {
		m, err := up.Read(buf)
		chunk := buf[:m]
		if allowed < 0 {
			head = append(head, chunk...)
			if end := bytes.Index(head, []byte("\r\n\r\n")); end >= 0 {
				allowed, head = end+4+n, nil
			}
		}
		if allowed >= 0 {
			chunk = chunk[:min(len(chunk), allowed-sent)]
		}
		w, werr := c.Write(chunk)
		sent += w
		if werr != nil || err != nil {
			return
		}
	}
}
