package terminate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/mux"
)

// Dial opens a new connection to the upstream (a child process, or a
// legacy HTTP+SSE stream).
type Dial func(ctx context.Context) (mux.Conn, error)

// Supervisor keeps one upstream connection running, restarting it with
// exponential backoff when it dies, and runs Init on each new one before
// it is used. The stateless face shares its connection among all
// clients; the stdio face uses one for its client. Safe for concurrent
// use.
type Supervisor struct {
	Dial     Dial
	OnServer func(*jsonrpc.Message)
	// Init prepares a new connection (a handshake); an error discards it.
	Init func(ctx context.Context, m *mux.Mux) error
	// Exclusive says the connection serves one client (the stdio face):
	// its progress tokens reach the upstream unchanged (mux.NewExclusive).
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
// backoff since the last start has passed.
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := Request(ctx, m, init)
	if err != nil {
		return err
	}
	if r.Error != nil {
		return fmt.Errorf("initialize failed: %s", r.Error)
	}
	if initialized == nil {
		return nil
	}
	return m.Send(ctx, initialized)
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
