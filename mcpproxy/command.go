package mcpproxy

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/terminating"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/child"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/sessionbridge"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/era"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// commandFaces are the faces of a stdio child (up). Over HTTP the proxy
// terminates the transport itself (package terminating): each session
// gets a child of its own, and each tenant's stateless requests share
// one. A stdio client gets a child of its own, restarted if it dies.
// Unless StrictEras, a child that speaks only the stateless era is
// bridged for session-era clients (its era learned from its answer to the
// session's initialize), and one that speaks only the session era is
// bridged for stateless ones (its eras probed on a child of their own).
func (p *Proxy) commandFaces(up *CommandUpstream) (httpFace, stdioFace, error) {
	d, err := p.childDial(up)
	if err != nil {
		return nil, nil, err
	}
	if p.o.StrictEras {
		return terminating.New(p.terminatingOptions(d.dial, nil, nil)), supervisedStdio{d.dial, p.log}, nil
	}
	eras := era.NewCache(pool.ProbeEras(d.dial))
	return terminating.New(p.terminatingOptions(d.dial, d.autoBridge, eras)), supervisedStdio{d.autoBridge, p.log}, nil
}

// childDial returns the dialer of up's children; it fails for an
// unknown User.
func (p *Proxy) childDial(up *CommandUpstream) (childDialer, error) {
	var user *child.User
	if up.User != "" {
		var err error
		if user, err = child.LookupUser(up.User); err != nil {
			return childDialer{}, fmt.Errorf("mcpproxy: %w", err)
		}
	}
	return childDialer{
		cmd:   child.Command{Path: up.Command, Args: up.Args, Dir: up.Dir, Env: up.Env, User: user},
		opts:  child.Options{MaxMessage: p.o.MaxMessage, Logger: up.logger(p.o.Logger), StallTimeout: p.o.UpstreamStallTimeout},
		spool: p.spool,
		log:   p.log,
	}, nil
}

// childDialer starts a child process: one per upstream connection, whose
// messages are read through the Spooler of the tenant the connection
// serves.
type childDialer struct {
	cmd   child.Command
	opts  child.Options // Spool set per connection
	spool *spill.Spooler
	log   *slog.Logger // the bridge's; the child's stderr goes to opts.Logger
}

func (d childDialer) dial(ctx context.Context) (mux.Conn, error) {
	o := d.opts
	o.Spool = d.spool.For(pool.TenantOf(ctx))
	return child.Start(d.cmd, o)
}

// autoBridge dials a session's own child, whose era is learned from its
// answer to the session's initialize: passed as it is when the child
// speaks the session era, bridged when it speaks only the stateless one
// (sessionbridge.NewAuto).
func (d childDialer) autoBridge(ctx context.Context) (mux.Conn, error) {
	c, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	return sessionbridge.NewAuto(c, sessionbridge.Options{Logger: d.log, OneSession: true}), nil
}
