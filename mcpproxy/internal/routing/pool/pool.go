// Package pool keeps the upstream connections the faces send requests
// on: it is where a request that is not a session's own finds its
// upstream connection. A Supervisor holds one connection (a child
// process, or a legacy HTTP+SSE stream) and dials it again, with
// backoff, when it dies; Tenants keeps one Supervisor per key (a tenant,
// or a tenant and the capabilities its client declared), bounded in
// number, so that what one tenant does to its upstream (crash a child,
// send it into its restart backoff) reaches no other tenant. Handshake,
// Pipeline and Request send the proxy's own messages on a connection.
//
// The terminating face (stateless requests, bridged sessions) and the
// stdio face use it; a session-era session of the terminating face has a
// connection of its own instead (package session).
package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/era"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Dial opens a new connection to the upstream (a child process, or a
// legacy HTTP+SSE stream). Its ctx carries the tenant whose requests
// alone the connection serves (TenantOf), when there is one.
type Dial func(ctx context.Context) (mux.Conn, error)

type tenantKey struct{}

// WithTenant returns ctx carrying tenant, for a Dial.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantOf returns the tenant a Dial's ctx carries: "" for a connection
// of no one tenant (an era probe) and for the tenant "".
func TenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// Supervisor keeps one upstream connection running, restarting it with
// exponential backoff when it dies, and runs Init on each new one before
// it is used. The stateless face shares one among a tenant's requests
// (see Tenants); the stdio face uses one for its client. Safe for concurrent
// use.
type Supervisor struct {
	Dial     Dial
	OnServer func(*jsonrpc.Message)
	// Init prepares a new connection (a handshake); an error discards it.
	Init func(ctx context.Context, m *mux.Mux) error
	// Exclusive says the connection serves one client (the stdio face)
	// or one tenant's requests: progress tokens reach the upstream
	// unchanged unless one in flight is the same (mux.NewExclusive).
	// false: clients share it, and every token is renamed (mux.New).
	Exclusive bool
	Log       *slog.Logger

	mu      sync.Mutex
	cur     *mux.Mux
	started time.Time
	backoff time.Duration
	closed  bool
}

// ErrRestarting is returned by Get while the backoff after a failure runs.
var ErrRestarting = errors.New("upstream restarting")

// Get returns the live connection, starting one when none runs and the
// backoff since the last start has passed. It fails with ErrRestarting
// while the backoff runs, with Dial's error, with Init's (wrapped), and
// once Close was called.
func (s *Supervisor) Get(ctx context.Context) (*mux.Mux, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("shutting down")
	}
	if s.cur != nil && s.cur.Alive() {
		return s.cur, nil
	}
	if s.backoff == 0 {
		s.backoff = 100 * time.Millisecond
	}
	if !s.started.IsZero() {
		if s.cur != nil && time.Since(s.started) > time.Minute {
			s.backoff = 100 * time.Millisecond // it ran well; start over
		}
		if time.Until(s.started.Add(s.backoff)) > 0 {
			return nil, ErrRestarting
		}
		s.backoff = min(2*s.backoff, 30*time.Second)
		s.Log.Warn("restarting the upstream", "backoff", s.backoff)
	}
	s.started = time.Now()
	c, err := s.Dial(ctx)
	if err != nil {
		return nil, err
	}
	newMux := mux.New
	if s.Exclusive {
		newMux = mux.NewExclusive
	}
	m := newMux(c, s.OnServer, s.Log)
	if s.Init != nil {
		if err := s.Init(ctx, m); err != nil {
			m.Close()
			return nil, fmt.Errorf("preparing the upstream: %w", err)
		}
	}
	s.cur = m
	return m, nil
}

// Current returns the live connection, or nil; it never starts one.
func (s *Supervisor) Current() *mux.Mux {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.Alive() {
		return s.cur
	}
	return nil
}

// Close stops the connection; Get fails from now on.
func (s *Supervisor) Close() {
	s.mu.Lock()
	s.closed = true
	m := s.cur
	s.mu.Unlock()
	if m != nil {
		m.Close()
	}
}

// Handshake sends the initialize request init on a fresh connection,
// waits (≤ 10 s) for its answer, then sends initialized (when not nil);
// an error answer fails it. Its context is its own: the client whose
// request started the connection may leave, the connection stays.
func Handshake(m *mux.Mux, init, initialized *jsonrpc.Message) error {
	_, err := HandshakeResult(m, init, initialized)
	return err
}

// HandshakeResult is Handshake, returning the initialize result.
func HandshakeResult(m *mux.Mux, init, initialized *jsonrpc.Message) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return HandshakeWithin(ctx, m, init, initialized)
}

// HandshakeWithin is HandshakeResult bounded by ctx instead of its 10 s: a
// caller with a connect timeout of its own.
func HandshakeWithin(ctx context.Context, m *mux.Mux, init, initialized *jsonrpc.Message) ([]byte, error) {
	r, err := Request(ctx, m, init)
	if err != nil {
		return nil, err
	}
	if r.Error != nil {
		return nil, fmt.Errorf("initialize failed: %s", r.Error)
	}
	if initialized != nil {
		err = m.Send(ctx, initialized)
	}
	return r.Result, err
}

// Pipeline sends init and initialized on a fresh connection without
// waiting: the stateless face prepares a shared child best-effort, since
// a server of the stateless era may not answer initialize at all, and a
// stdio server reads its input in order, so the handshake comes first
// whatever follows. The answer is discarded.
func Pipeline(m *mux.Mux, init, initialized *jsonrpc.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := m.NewScope().Call(ctx, init, chanSink(make(chan *jsonrpc.Message, 1)), nil); err != nil {
		return err
	}
	return m.Send(ctx, initialized)
}

// StatelessInit is what the proxy sends a shared child before stateless
// requests: servers of the session era (the Python SDK's) refuse every
// request before a handshake, and the revision asked for is the newest;
// the server answers with the one it speaks.
var StatelessInit = jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":"spillway-init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"spillway","version":"1"}}}`)

// Initialized is the notification that completes a handshake.
var Initialized = jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

// Sender returns Request on m, for code that takes a way to send the
// proxy's own requests (ownmethods.ListTools).
func Sender(m *mux.Mux) func(context.Context, *jsonrpc.Message) (*jsonrpc.Message, error) {
	return func(ctx context.Context, req *jsonrpc.Message) (*jsonrpc.Message, error) {
		return Request(ctx, m, req)
	}
}

// Request sends one request of the proxy's own on m and waits for its
// answer until ctx ends.
func Request(ctx context.Context, m *mux.Mux, req *jsonrpc.Message) (*jsonrpc.Message, error) {
	sc := m.NewScope()
	defer sc.Close("the proxy's own request is over")
	got := make(chan *jsonrpc.Message, 1)
	if _, err := sc.Call(ctx, req, chanSink(got), nil); err != nil {
		return nil, err
	}
	select {
	case r := <-got:
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", req.Method, ctx.Err())
	}
}

type chanSink chan *jsonrpc.Message

func (c chanSink) Deliver(m *jsonrpc.Message, _ any) {
	select {
	case c <- m:
	default:
	}
}

// ErrTooManyTenants is returned by Tenants.Get when a new tenant needs a
// connection and every one of the cap is busy.
var ErrTooManyTenants = errors.New("every upstream connection is busy with other tenants")

// Tenants keeps a supervised connection per tenant for stateless
// requests, so that what one tenant does to its upstream (crash a child,
// send it into its restart backoff) reaches no other tenant. Connections
// are bounded (see NewTenants): a new tenant at the cap takes the least
// recently used idle connection's place, or gets ErrTooManyTenants while
// all are busy (no tenant's calls are broken for another's); a connection
// idle for long is closed. Safe for concurrent use.
type Tenants struct {
	newSup    func(key string) *Supervisor
	max       int
	idle      time.Duration
	tenantOf  func(key string) string // nil: every key is a tenant
	perTenant int
	wait      time.Duration // how long Get waits for a busy tenant's room

	mu     sync.Mutex
	conns  map[string]*tenantConn
	freed  chan struct{} // closed (and replaced) when a connection is released
	seq    uint64        // counts requests ended: the order of use
	closed bool
	stop   chan struct{}
	ending sync.WaitGroup // connections being closed; Close waits for them
}

type tenantConn struct {
	sup  *Supervisor
	busy int       // requests using it now
	last time.Time // when the last one ended
	used uint64    // Tenants.seq then
}

// NewTenants returns a set of per-tenant connections made by newSup (given
// the key the connection is kept under), at most max (≤ 0: 16), each
// closed after idle (≤ 0: 5 minutes) without a request. Close stops them.
func NewTenants(newSup func(key string) *Supervisor, max int, idle time.Duration) *Tenants {
	if max <= 0 {
		max = 16
	}
	if idle <= 0 {
		idle = 5 * time.Minute
	}
	t := &Tenants{newSup: newSup, max: max, idle: idle,
		conns: map[string]*tenantConn{}, freed: make(chan struct{}), stop: make(chan struct{})}
	go t.expire()
	return t
}

// Get returns tenant's live connection, starting one if it must, and
// release, to be called once the request is over (also on error). tenant
// is the key: a caller may keep several connections per tenant under keys
// that start with the tenant's own. While the tenant's connections are
// all busy it waits for one (see WaitForRoom), then fails with
// ErrAllBusy.
func (t *Tenants) Get(ctx context.Context, tenant string) (m *mux.Mux, release func(), err error) {
	return t.get(ctx, tenant, 0)
}

// ErrAllBusy is returned by Get and GetFree when every connection the
// request may use stayed in use for as long as it may wait.
var ErrAllBusy = errors.New("every upstream connection of this client is in use")

// GetFree is Get for a connection no other request uses (a call whose
// server requests must reach its own client, which nothing in them
// names): the first idle one of at most slots connections kept under key.
// While all are busy it waits as Get does, then fails with ErrAllBusy.
func (t *Tenants) GetFree(ctx context.Context, key string, slots int) (m *mux.Mux, release func(), err error) {
	return t.get(ctx, key, max(slots, 1))
}

func (t *Tenants) get(ctx context.Context, key string, slots int) (m *mux.Mux, release func(), err error) {
	tc, err := t.takeWaiting(ctx, key, slots)
	if err != nil {
		return nil, func() {}, err
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			t.mu.Lock()
			tc.busy--
			tc.last = time.Now()
			t.seq++
			tc.used = t.seq
			// Whoever waits for room tries again.
			close(t.freed)
			t.freed = make(chan struct{})
			t.mu.Unlock()
		})
	}
	m, err = tc.sup.Get(ctx)
	if err != nil {
		release()
		return nil, func() {}, err
	}
	return m, release, nil
}

// takeWaiting is take, waiting while the tenant's connections are all
// busy: until one is released, up to t.wait, or until ctx ends.
func (t *Tenants) takeWaiting(ctx context.Context, key string, slots int) (*tenantConn, error) {
	var timeout <-chan time.Time
	for {
		tc, evict, freed, err := t.take(key, slots)
		if evict != nil { // closing a child takes up to child.CloseBound: not on this request's time
			go func() {
				defer t.ending.Done()
				evict.Close()
			}()
		}
		if !errors.Is(err, ErrAllBusy) || t.wait <= 0 {
			return tc, err
		}
		if timeout == nil {
			tm := time.NewTimer(t.wait)
			defer tm.Stop()
			timeout = tm.C
		}
		select {
		case <-freed:
		case <-timeout:
			return nil, fmt.Errorf("%w (waited %s for one)", ErrAllBusy, t.wait)
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrAllBusy, ctx.Err())
		}
	}
}

// take marks key's connection busy, making room for it if it must; it
// returns a supervisor to close, evicted to make that room. With slots >
// 0 the connection is one of key#0…key#slots-1 that no request uses. On
// ErrAllBusy, freed is closed once a connection is released.
func (t *Tenants) take(key string, slots int) (tc *tenantConn, evict *Supervisor, freed <-chan struct{}, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, nil, nil, errors.New("shutting down")
	}
	k := key
	if slots > 0 {
		k = ""
		for i := range slots {
			slot := key + "#" + strconv.Itoa(i)
			if c := t.conns[slot]; c == nil || c.busy == 0 {
				k = slot
				break
			}
		}
		if k == "" {
			return nil, nil, t.freed, ErrAllBusy
		}
	}
	tc = t.conns[k]
	if tc == nil {
		var full bool
		if full, evict = t.roomLocked(k); full {
			return nil, nil, t.freed, ErrAllBusy
		}
		if evict == nil && len(t.conns) >= t.max {
			lru := t.lruLocked(func(string) bool { return true })
			if lru == "" {
				return nil, nil, nil, ErrTooManyTenants
			}
			evict = t.evictLocked(lru)
		}
		tc = &tenantConn{sup: t.newSup(k)}
		t.conns[k] = tc
	}
	tc.busy++
	return tc, evict, nil, nil
}

// roomLocked makes room for key's tenant under its own bound (see
// LimitPerTenant): full when all of the tenant's connections are busy,
// else evict when its least recently used idle one had to go.
func (t *Tenants) roomLocked(key string) (full bool, evict *Supervisor) {
	if t.tenantOf == nil {
		return false, nil
	}
	who := t.tenantOf(key)
	mine := func(k string) bool { return t.tenantOf(k) == who }
	n := 0
	for k := range t.conns {
		if mine(k) {
			n++
		}
	}
	if n < t.perTenant {
		return false, nil
	}
	lru := t.lruLocked(mine)
	if lru == "" {
		return true, nil
	}
	return false, t.evictLocked(lru)
}

// lruLocked is the least recently used idle connection among those whose
// key passes keep; "" when there is none.
func (t *Tenants) lruLocked(keep func(string) bool) string {
	lru := ""
	for k, c := range t.conns {
		if c.busy == 0 && keep(k) && (lru == "" || c.used < t.conns[lru].used) {
			lru = k
		}
	}
	return lru
}

// evictLocked forgets key's connection and returns it, to be closed.
func (t *Tenants) evictLocked(key string) *Supervisor {
	sup := t.conns[key].sup
	delete(t.conns, key)
	t.ending.Add(1)
	return sup
}

// LimitPerTenant bounds the connections one tenant keeps to n (a tenant
// may keep several, under keys tenantOf maps to it): past it the tenant's
// least recently used idle one makes room, and while all are busy Get
// and GetFree wait (WaitForRoom), then fail with ErrAllBusy. Call it
// before any Get.
func (t *Tenants) LimitPerTenant(tenantOf func(key string) string, n int) {
	t.tenantOf, t.perTenant = tenantOf, max(n, 1)
}

// WaitForRoom makes Get and GetFree wait up to d, or until their ctx
// ends, for one of the connections they may use to be released, instead
// of failing with ErrAllBusy at once (d ≤ 0, the default). Call it before
// any Get.
func (t *Tenants) WaitForRoom(d time.Duration) { t.wait = d }

// expire closes connections idle for longer than t.idle, until Close.
func (t *Tenants) expire() {
	tick := time.NewTicker(t.idle / 4)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		var idle []*Supervisor
		t.mu.Lock()
		for k, c := range t.conns {
			if c.busy == 0 && time.Since(c.last) > t.idle {
				idle = append(idle, c.sup)
				delete(t.conns, k)
			}
		}
		t.ending.Add(len(idle))
		t.mu.Unlock()
		t.closeAll(idle)
	}
}

// closeAll closes sups at once (each may take up to child.CloseBound) and
// returns when all are closed; each was counted in t.ending.
func (t *Tenants) closeAll(sups []*Supervisor) {
	var wg sync.WaitGroup
	for _, s := range sups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer t.ending.Done()
			s.Close()
		}()
	}
	wg.Wait()
}

// Len is the number of tenants' connections kept.
func (t *Tenants) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// Close stops every connection, all at once, and returns when they are
// stopped (within child.CloseBound for children); Get fails from now on.
// Safe to call more than once.
func (t *Tenants) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.ending.Wait()
		return
	}
	t.closed = true
	var sups []*Supervisor
	for _, c := range t.conns {
		sups = append(sups, c.sup)
	}
	t.conns = map[string]*tenantConn{}
	t.ending.Add(len(sups))
	close(t.stop)
	close(t.freed) // whoever waits for room finds the set closed
	t.freed = make(chan struct{})
	t.mu.Unlock()
	t.closeAll(sups)
	t.ending.Wait()
}

// ProbeEras returns a probe of the upstream's eras (era.Probe) on a
// connection of its own from dial, closed once the probe is over.
func ProbeEras(dial Dial) func(ctx context.Context) (era.Eras, error) {
	return func(ctx context.Context) (era.Eras, error) {
		c, err := dial(ctx)
		if err != nil {
			return era.Eras{}, err
		}
		m := mux.New(c, nil, nil)
		defer m.Close()
		return era.Probe(ctx, func(ctx context.Context, req *jsonrpc.Message) (*jsonrpc.Message, error) {
			return Request(ctx, m, req)
		})
	}
}
