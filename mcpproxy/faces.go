package mcpproxy

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/stdio"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/terminating"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/session"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/sessionbridge"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/era"
)

// httpFace serves /mcp for one kind of upstream: ServeHTTP is given a
// request whose Host, Origin and bearer token the Proxy already checked,
// and Close ends every session and stream the face holds.
// *terminating.Face is one; *streamableFace another.
type httpFace interface {
	ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request)
	Close()
}

// stdioFace gives one ServeStdio client its upstream connection, whose
// unsolicited messages go to face.
type stdioFace interface {
	connect(ctx context.Context, face *stdio.Face) (stdio.Upstream, error)
}

var (
	_ httpFace  = (*terminating.Face)(nil)
	_ httpFace  = (*streamableFace)(nil)
	_ stdioFace = supervisedStdio{}
	_ stdioFace = clientStdio{}
)

// terminatingOptions configure a terminating face over connections from
// dial. sessionDial, when not nil, dials a session's own connection
// instead (a bridged one); eras, when not nil, are the upstream's eras as
// a stateless request needs them, so that such a request to a
// session-era upstream is bridged (nil: forwarded as it is).
func (p *Proxy) terminatingOptions(dial, sessionDial pool.Dial, eras *era.Cache) terminating.Options {
	o := p.o
	return terminating.Options{Dial: dial, SessionDial: sessionDial, Methods: p.methods, MaxBody: o.MaxBody, Eras: eras,
		MaxSessions: o.MaxSessions, PollAfter: o.StreamPollAfter, WriteStall: o.WriteStallTimeout, KeepAlive: o.StreamKeepAlive, Logger: o.Logger,
		StatelessConns: o.StatelessUpstreams, StatelessIdle: o.StatelessIdle, BridgeSessions: o.BridgeSessions, BridgeWait: o.BridgeWait,
		Limits: session.Limits{Window: o.StreamWindow}, CheckStateless: p.checkStateless}
}

// lazyFace is a terminating face made at its first use: the legacy and
// era-bridging faces of a Streamable HTTP upstream, which most upstreams
// never need. Safe for concurrent use.
type lazyFace struct {
	opts terminating.Options
	once sync.Once
	face *terminating.Face
	made atomic.Bool
}

func newLazyFace(o terminating.Options) *lazyFace { return &lazyFace{opts: o} }

// get returns the face, making it the first time.
func (l *lazyFace) get() *terminating.Face {
	l.once.Do(func() {
		l.face = terminating.New(l.opts)
		l.made.Store(true)
	})
	return l.face
}

// close closes the face if it was made; l may be nil.
func (l *lazyFace) close() {
	if l != nil && l.made.Load() {
		l.face.Close()
	}
}

// supervisedStdio connects a stdio client to an upstream of its own from
// dial (a child process), kept by a supervisor that restarts a dead one
// with backoff and replays the client's handshake to it.
type supervisedStdio struct {
	dial pool.Dial
	log  *slog.Logger
}

func (s supervisedStdio) connect(_ context.Context, face *stdio.Face) (stdio.Upstream, error) {
	return &pool.Supervisor{Dial: s.dial, OnServer: face.OnServer, Init: face.Replay, Exclusive: true, Log: s.log}, nil
}

// clientStdio connects a stdio client to an HTTP upstream through one
// connection of Spillway's client, which recovers by itself (it resumes
// streams and initializes a lost session again). With bridge, the
// connection is bridged if the upstream refuses the client's initialize
// and offers 2026-07-28 (asking server/discover first would put a
// request before initialize at every session-era upstream).
type clientStdio struct {
	dial   pool.Dial
	bridge bool
	log    *slog.Logger
}

func (s clientStdio) connect(ctx context.Context, face *stdio.Face) (stdio.Upstream, error) {
	c, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	if s.bridge {
		c = sessionbridge.NewAuto(c, sessionbridge.Options{Logger: s.log})
	}
	return stdio.Fixed{M: mux.NewExclusive(c, face.OnServer, s.log)}, nil
}
