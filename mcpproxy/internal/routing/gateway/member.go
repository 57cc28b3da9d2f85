package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// member is a Conn's connection to one upstream, kept up by a supervisor,
// with its own queue to the client (so one upstream that floods the
// client delays only its own messages).
type member struct {
	c    *Conn
	spec Spec
	log  *slog.Logger
	sup  *pool.Supervisor
	q    chan *jsonrpc.Message
	// stop ends the watch (the upstream was removed, or the Conn closed);
	// gone is closed once nothing more will be queued, so the forwarder
	// may end.
	stop, gone chan struct{}
	stopOnce   sync.Once
	firstTry   chan struct{} // closed once the first connection attempt is over
	tried      sync.Once
	calls      sync.WaitGroup
	probing    atomic.Bool  // a probe runs
	learned    atomic.Int64 // when learnTool last listed the upstream (Unix ns)

	mu       sync.Mutex
	mx       *mux.Mux   // the live connection, nil while down
	scope    *mux.Scope // the Conn's namespace on mx
	result   []byte     // mx's initialize result
	lastErr  error      // why it is down
	failures int        // connection attempts failed in a row
}

func newMember(c *Conn, s Spec) *member {
	m := &member{c: c, spec: s, log: c.log.With("upstream", s.Name), q: make(chan *jsonrpc.Message, 64),
		stop: make(chan struct{}), gone: make(chan struct{}), firstTry: make(chan struct{})}
	m.sup = &pool.Supervisor{Dial: s.Dial, Exclusive: true, Log: m.log, Init: m.handshake,
		OnServer: func(msg *jsonrpc.Message) { c.fromUpstream(m, msg) }}
	return m
}

// start connects the upstream and keeps it connected until stop; the
// forwarder hands its messages to the client.
func (m *member) start() {
	m.c.wg.Add(2)
	go m.forward()
	go m.watch()
}

// handshake replays the client's initialize to a new connection and keeps
// the upstream's answer (its capabilities, instructions); ctx bounds it
// (the connect timeout).
func (m *member) handshake(ctx context.Context, mx *mux.Mux) error {
	m.c.mu.Lock()
	init := m.c.init
	m.c.mu.Unlock()
	res, err := pool.HandshakeWithin(ctx, mx, init, pool.Initialized)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.result = res
	m.mu.Unlock()
	return nil
}

// watch connects the upstream, waits for its connection to end, and
// connects it again (the supervisor's backoff in between), until stop.
// Each change after the client's initialize was answered is a
// list_changed: the upstream's tools went or came back.
func (m *member) watch() {
	defer m.c.wg.Done()
	for {
		mx, err := m.connect()
		if !errors.Is(err, pool.ErrRestarting) {
			m.c.r.noteHealth(m.spec.Name, err)
			if err != nil {
				m.log.Warn("upstream unavailable", "err", err)
			}
		}
		m.tried.Do(func() { close(m.firstTry) })
		if err != nil {
			select {
			case <-m.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		m.c.listsChanged()
		select {
		case <-m.stop:
			return
		case <-mx.Done():
		}
		m.mu.Lock()
		m.mx, m.scope = nil, nil
		if m.lastErr == nil {
			m.lastErr = errors.New("its connection ended")
		}
		m.mu.Unlock()
		m.log.Warn("upstream connection ended; restarting it")
		m.c.listsChanged()
	}
}

// connect starts a connection, bounded by the connect timeout.
func (m *member) connect() (*mux.Mux, error) {
	ctx, cancel := context.WithTimeout(pool.WithTenant(context.Background(), m.c.tenant), m.spec.connectTimeout())
	defer cancel()
	mx, err := m.sup.Get(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if !errors.Is(err, pool.ErrRestarting) {
			m.failures++
			m.lastErr = err
		}
		return nil, err
	}
	m.failures = 0
	m.mx, m.scope, m.lastErr = mx, mx.NewScope(), nil
	return mx, nil
}

// current returns the live connection, or nil while the upstream is down.
func (m *member) current() *mux.Mux {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mx != nil && m.mx.Alive() {
		return m.mx
	}
	return nil
}

// live returns the live connection and the Conn's scope on it, or an error
// that says why there is none and when to try again.
func (m *member) live() (*mux.Mux, *mux.Scope, *Unavailable) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mx != nil && m.mx.Alive() {
		return m.mx, m.scope, nil
	}
	why := "it is not connected yet"
	if m.lastErr != nil {
		why = m.lastErr.Error()
	}
	retry := min(100*time.Millisecond<<min(m.failures, 9), 30*time.Second)
	return nil, nil, &Unavailable{Upstream: m.spec.Name, Reason: why, RetryAfter: max(retry, time.Second)}
}

// failed is the answer to request id that the connection to the upstream
// could not deliver (why says what failed): an Unavailable that names the
// upstream. A connection that ended says so; one that still looks alive
// (an HTTP upstream whose server went away is noticed only by its
// requests) is probed, and closed when the upstream does not answer, so
// that the watch reconnects it and the client hears its tools went and
// came back.
func (m *member) failed(id []byte, why string) *jsonrpc.Message {
	_, _, u := m.live()
	if u != nil {
		u.Reason = "it exited while the request was in flight: " + why
	} else {
		u = &Unavailable{Upstream: m.spec.Name, Reason: why, RetryAfter: time.Second}
		go m.probe()
	}
	return u.response(id)
}

// probe pings the live connection, at most one ping at a time, and closes
// it when the upstream cannot answer: a ping that fails in the transport
// or gets no answer within the connect timeout. Any answer from the
// upstream, even an error, shows it is there.
func (m *member) probe() {
	mx := m.current()
	if mx == nil || !m.probing.CompareAndSwap(false, true) {
		return
	}
	defer m.probing.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), m.spec.connectTimeout())
	defer cancel()
	ping := jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":"gw-ping","method":"ping","params":{}}`)
	r, err := pool.Request(ctx, mx, ping)
	if err == nil && !transportFailure(r) {
		return
	}
	why := "no answer to a ping"
	if err == nil {
		why = jsonrpc.StringMember(r.Error, "message")
	}
	m.log.Warn("upstream does not answer; reconnecting", "err", why)
	m.mu.Lock()
	if m.mx == mx {
		m.lastErr = errors.New(why)
	}
	m.mu.Unlock()
	mx.Close()
}

// initResult returns the upstream's initialize result, nil while down.
func (m *member) initResult() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mx == nil {
		return nil
	}
	return m.result
}

// push queues msg for the client, waiting while the queue is full (the
// upstream's own backpressure); it drops msg once the Conn is closed.
func (m *member) push(msg *jsonrpc.Message) {
	select {
	case m.q <- msg:
	case <-m.c.done:
		spill.Release(msg.Raw)
	}
}

// forward hands the queued messages to the client until the Conn closes
// or the upstream is gone and its queue empty.
func (m *member) forward() {
	defer m.c.wg.Done()
	for {
		select {
		case msg := <-m.q:
			m.c.push(msg)
		case <-m.c.done:
			return
		case <-m.gone:
			for {
				select {
				case msg := <-m.q:
					m.c.push(msg)
				default:
					return
				}
			}
		}
	}
}

// drain lets the calls in flight of a removed upstream end (for at most
// wait) and then closes it.
func (m *member) drain(wait time.Duration) {
	done := make(chan struct{})
	go func() {
		m.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
		m.log.Warn("closing a removed upstream with calls still in flight")
	case <-m.c.done:
	}
	m.close()
}

// close stops the upstream's connection for good.
func (m *member) close() {
	m.stopOnce.Do(func() {
		close(m.stop)
		m.sup.Close()
		go func() {
			if mx := m.sup.Current(); mx != nil {
				<-mx.Done()
			}
			close(m.gone)
		}()
	})
}

// Unavailable says that an upstream cannot take a request now: which, why,
// and when to try again.
type Unavailable struct {
	Upstream   string
	Reason     string
	RetryAfter time.Duration
}

func (u *Unavailable) Error() string {
	return fmt.Sprintf("upstream %q is unavailable (%s); retry in %s", u.Upstream, u.Reason, u.RetryAfter.Round(time.Second))
}

// response is the JSON-RPC error answering request id.
func (u *Unavailable) response(id []byte) *jsonrpc.Message {
	return errorWithData(id, jsonrpc.CodeUpstream, u.Error(), map[string]any{
		"upstream": u.Upstream, "reason": u.Reason, "retryAfterMs": u.RetryAfter.Milliseconds()})
}
