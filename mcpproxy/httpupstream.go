package mcpproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/relay"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/terminating"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/httpclient"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/sessionbridge"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/era"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// legacyFaces are the faces of a legacy HTTP+SSE server (up.Transport
// "sse"). Over HTTP the proxy terminates the transport itself, over
// Spillway's legacy client; unless StrictEras, a stateless request to it
// (it speaks only the session era) is bridged on sessions the face holds.
// A stdio client gets a client connection of its own.
func (p *Proxy) legacyFaces(up *HTTPUpstream) (httpFace, stdioFace) {
	d := p.httpDial(up, httpclient.Legacy)
	var eras *era.Cache
	if !p.o.StrictEras {
		eras = era.NewCache(pool.ProbeEras(d.dial))
	}
	return terminating.New(p.terminatingOptions(d.dial, nil, eras)), clientStdio{d.dial, !p.o.StrictEras, p.log}
}

// streamableFaces are the faces of a Streamable HTTP server (up.Transport
// "streamable", or "" to find out): see streamableFace. A stdio client
// gets a client connection of its own.
func (p *Proxy) streamableFaces(up *HTTPUpstream) (httpFace, stdioFace) {
	d := p.httpDial(up, up.Transport)
	f := &streamableFace{maxBody: p.o.MaxBody}
	if !p.o.StrictEras {
		f.eras = era.NewCache(discoverEras(d.dial))
		f.statelessEras = era.NewCache(pool.ProbeEras(d.dial))
	}
	f.bridged = p.eraBridgeFace(d.dial, f.eras, f.statelessEras)
	ro := relay.Options{URL: up.URL, Client: up.Client, Header: up.Header,
		MaxMessage: p.o.MaxMessage, WriteTimeout: p.o.WriteStallTimeout, StallTimeout: p.o.UpstreamStallTimeout, KeepAlive: p.o.StreamKeepAlive,
		Methods: p.methods, Spool: p.spool, Logger: p.o.Logger}
	if up.Transport == "" {
		legacy := p.httpDial(up, httpclient.Legacy)
		f.legacy = newLazyFace(p.terminatingOptions(legacy.dial, nil, f.statelessEras))
		ro.DetectLegacy = func(ctx context.Context) bool {
			return httpclient.DetectLegacy(ctx, up.clientOptions(p.o.MaxMessage, p.o.Logger, httpclient.Legacy, &p.tools))
		}
	}
	f.relay = relay.New(ro)
	return f, clientStdio{d.dial, !p.o.StrictEras, p.log}
}

// eraBridgeFace is the terminating face, made at its first use, that
// serves the requests a Streamable HTTP upstream cannot take in their own
// era: a session-era session's connection is bridged (package
// sessionbridge) when the upstream speaks only the stateless era, and a
// stateless request is bridged on sessions the face holds (eras) when it
// speaks only the session era. A call's server requests come on its own
// response stream, so calls that can be asked share a session.
func (p *Proxy) eraBridgeFace(dial pool.Dial, sessionEras, statelessEras *era.Cache) *lazyFace {
	b := sessionBridger{upstream: dial, eras: sessionEras, log: p.o.Logger}
	o := p.terminatingOptions(dial, b.dial, statelessEras)
	o.RelatedStreams = true
	return newLazyFace(o)
}

// sessionBridger dials a session's own connection to a stateless-only
// upstream, bridged.
type sessionBridger struct {
	upstream pool.Dial
	eras     *era.Cache
	log      *slog.Logger
}

func (b sessionBridger) dial(ctx context.Context) (mux.Conn, error) {
	c, err := b.upstream(ctx)
	if err != nil {
		return nil, err
	}
	// A mismatch: the upstream changed; learn its eras again.
	return sessionbridge.New(c, sessionbridge.Options{Logger: b.log, Mismatch: b.eras.Forget}), nil
}

// httpDialer connects to an HTTP upstream as Spillway's client (package
// httpclient): each connection reads through the Spooler of the tenant it
// serves, under the upstream stall rule.
type httpDialer struct {
	opts  httpclient.Options // Spool set per connection
	spool *spill.Spooler
}

// httpDial returns the dialer of up over transport.
func (p *Proxy) httpDial(up *HTTPUpstream, transport string) httpDialer {
	return p.httpDialBindings(up, transport, &p.tools)
}

// httpDialBindings is httpDial with the tools whose x-mcp-header
// bindings a stateless tools/call's headers come from.
func (p *Proxy) httpDialBindings(up *HTTPUpstream, transport string, tools *mcpheader.Tools) httpDialer {
	co := up.clientOptions(p.o.MaxMessage, p.o.Logger, transport, tools)
	co.StallTimeout = p.o.UpstreamStallTimeout
	return httpDialer{opts: co, spool: p.spool}
}

func (d httpDialer) dial(ctx context.Context) (mux.Conn, error) {
	o := d.opts
	o.Spool = d.spool.For(pool.TenantOf(ctx))
	return httpclient.New(o)
}

// streamableFace is the HTTP face of a Streamable HTTP upstream: requests
// are relayed as they are (package relay), except those the upstream
// cannot take in their era, which go to bridged, and every request once
// the upstream turned out to speak only the legacy transport, which go to
// legacy (only when the transport was left to find out). Safe for
// concurrent use.
type streamableFace struct {
	relay   *relay.Relay
	legacy  *lazyFace // nil unless the transport is found out
	bridged *lazyFace
	// eras are the upstream's eras as a session-era request needs them
	// (server/discover alone), statelessEras as a stateless one does
	// (server/discover, then initialize); both nil with StrictEras.
	eras, statelessEras *era.Cache
	maxBody             int64
}

func (f *streamableFace) ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request) {
	switch {
	case f.relay.Legacy():
		f.legacy.get().ServeHTTP(w, r, rq)
	case f.bridge(r) || f.statelessBridge(r):
		f.bridged.get().ServeHTTP(w, r, rq)
	default:
		if f.relay.ServeHTTP(w, r, rq, f.maxBody) {
			f.legacy.get().ServeHTTP(w, r, rq) // the body was put back
		}
	}
}

func (f *streamableFace) Close() {
	f.relay.Close()
	f.legacy.close()
	f.bridged.close()
}

// bridge reports whether an HTTP request of the session era goes to the
// bridged face: the upstream speaks only the stateless era. That is
// learned once, at the first session's initialize (a session's other
// requests follow it), with server/discover; a request of the stateless
// era, or an upstream whose eras cannot be learned, is relayed as it is.
func (f *streamableFace) bridge(r *http.Request) bool {
	if f.eras == nil || mcpheader.Stateless(r.Header.Get("Mcp-Protocol-Version")) {
		return false
	}
	e, known := f.eras.Known()
	if !known {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || !initializes(r, f.maxBody) {
			return false
		}
		var err error
		if e, err = f.eras.Get(r.Context()); err != nil {
			return false
		}
	}
	return e.Stateless() && !e.Session()
}

// statelessBridge reports whether an HTTP request of the stateless era
// goes to the bridged face: the upstream speaks only the session era, so
// the face holds session-era sessions for it (see package terminating).
func (f *streamableFace) statelessBridge(r *http.Request) bool {
	if f.statelessEras == nil || !mcpheader.Stateless(r.Header.Get(mcpheader.ProtocolVersion)) {
		return false
	}
	e, err := f.statelessEras.Get(r.Context())
	return err == nil && !e.Stateless() && e.Session()
}

// initializes reports whether r's body (read up to max bytes, and put back
// for whoever serves r) holds an initialize request.
func initializes(r *http.Request, max int64) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
	if err != nil {
		return false
	}
	msgs, _, err := jsonrpc.Decode(b)
	return err == nil && hasInitialize(msgs)
}

func hasInitialize(msgs []*jsonrpc.Message) bool {
	for _, m := range msgs {
		if m.Method == "initialize" {
			return true
		}
	}
	return false
}

// discoverEras learns an HTTP upstream's eras from its server/discover
// alone, on a connection of its own: an upstream that refuses it, or does
// not answer within era.DiscoverWait, is relayed to as it is (and is asked
// nothing more: no session opened to learn its era); one that cannot be
// reached is asked again at the next session's initialize.
func discoverEras(dial pool.Dial) func(ctx context.Context) (era.Eras, error) {
	return func(ctx context.Context) (era.Eras, error) {
		var unreachable error
		e, err := pool.ProbeEras(func(ctx context.Context) (mux.Conn, error) {
			c, err := dial(ctx)
			if err != nil {
				return nil, err
			}
			return discoverOnly{c, &unreachable}, nil
		})(ctx)
		if err != nil && unreachable == nil && (errors.Is(err, errNotAsked) || errors.Is(err, era.ErrUnknown)) {
			return era.Eras{}, nil // knows nothing: not one to bridge to
		}
		return e, err
	}
}

// discoverOnly is an upstream connection that refuses to send initialize
// (era.Probe's fallback), and notes why server/discover could not be
// sent. Its Send is called on the probe's goroutine.
type discoverOnly struct {
	mux.Conn
	unreachable *error
}

func (c discoverOnly) Send(ctx context.Context, m *jsonrpc.Message) error {
	if m.Method == "initialize" {
		return errNotAsked
	}
	err := c.Conn.Send(ctx, m)
	if err != nil && ctx.Err() == nil {
		*c.unreachable = err
	}
	return err
}

var errNotAsked = errors.New("mcpproxy: initialize is not asked to learn eras")
