// Package mcpproxy is Spillway's MCP proxy: it sits between an agent and
// one MCP tool server, passes every message it does not own through
// unchanged, and rewrites the few it does (initialize and server/discover
// capabilities, tools/call results it offloads, resources/* for its own
// artifact URIs).
//
// This package is the facade cmd/ uses; the work is done by internal
// packages, one concern each:
//
//   - jsonrpc: the envelope, ids, raw-JSON edits
//   - sse, wire: event streams and newline framing, both bounded
//   - child, upstream/httpclient: upstream connections (a stdio child, a
//     Streamable HTTP or legacy HTTP+SSE server, as a client)
//   - mux: one upstream connection shared by client namespaces
//   - session: sessions bound to tenants, streams that are event logs
//   - relay, terminate, stdioface: the faces
//   - owned: the proxy's own methods; offload: offloading and previews
//
// A request carries its context (tenant, session, stream) from the face
// that decoded it to the upstream and back: responses are routed by ids
// the proxy minted, never by ids a client chose. Faces: Streamable HTTP
// (ServeHTTP, mounted at /mcp) and stdio (ServeStdio).
package mcpproxy

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/relay"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/stdio"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/terminating"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/session"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/child"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/httpclient"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/sessionbridge"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/era"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/ndjson"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// CodeUnauthorized is the JSON-RPC error code of the body of a 401 from
// /mcp: in the range JSON-RPC leaves to servers, the one MCP servers
// commonly use for a missing or unknown credential.
const CodeUnauthorized = -32001

// Stream modes of resources/stream.
const (
	StreamDirect   = ownmethods.StreamDirect   // the POST's response is the bytes
	StreamRedirect = ownmethods.StreamRedirect // a 302 to a storage URL presigned for seconds (S3 stores)
	StreamDownload = ownmethods.StreamDownload // a JSON result with a short-lived downloadUrl
)

// Options configure a Proxy. Upstream is required; the rest may be zero.
type Options struct {
	// Upstream is the tool server: an *HTTPUpstream or a *CommandUpstream.
	Upstream Upstream
	// Offloader rewrites tools/call results (and, with OffloadResources,
	// upstream resources/read results). nil: results pass unchanged.
	Offloader        *Offloader
	OffloadResources bool
	// Artifacts serves the proxy's own spillway:// resources. nil: they
	// are forwarded like any other URI.
	Artifacts *artifact.Service
	// Tenants authenticates callers with bearer tokens; nil or empty means
	// no inbound auth (the command refuses that off loopback).
	Tenants *identity.Tenants
	// Guard checks Host and Origin (DNS-rebinding and cross-site
	// protection). nil: loopback and IP-literal Hosts, same-origin
	// browsers.
	Guard *identity.Guard
	// MaxBody caps a POST body from the client; default 4 MiB.
	MaxBody int64
	// MaxMessage caps one message from the upstream, whatever carries it
	// (a JSON body, an SSE event, a stdio line); past it the request it
	// answers gets a JSON-RPC error and the connection lives on. Default
	// 1 GiB.
	MaxMessage int64
	// MaxSessions caps live session-era sessions on a stdio or legacy
	// upstream (each holds a child or a stream); default 64.
	MaxSessions int
	// StatelessUpstreams caps the upstream connections (children, on a
	// stdio upstream) kept for stateless requests on a stdio or legacy
	// upstream: one per tenant, so one tenant crashing its child reaches
	// no other; at the cap a new tenant takes the least recently used idle
	// one's place, or gets a 502 while all are busy. Default 16.
	StatelessUpstreams int
	// StatelessIdle closes such a connection unused this long; default
	// 5 minutes.
	StatelessIdle time.Duration
	// BridgeSessions bounds the upstream sessions one tenant's 2026-07-28
	// calls hold at once, per set of declared capabilities, when their
	// client declared sampling, elicitation or roots and the upstream (a
	// stdio child, a legacy HTTP+SSE server) speaks only the session era
	// and cannot say which call a server request belongs to: each such
	// call has a session of its own while it runs. (A Streamable HTTP
	// upstream sends a call's server requests on the call's own stream:
	// there such calls share one session.) Default 4. A tenant's
	// stateless upstream connections together are bounded by half of
	// StatelessUpstreams, or by BridgeSessions and one more when it is set
	// at least that high.
	BridgeSessions int
	// BridgeWait is how long such a call waits for one of those sessions
	// while all are busy (a call is over, or its client stops waiting,
	// sooner); past it the call gets a JSON-RPC error (-32603, "every
	// upstream connection of this client is in use"). Default 1 minute;
	// negative: refused at once.
	BridgeWait time.Duration
	// StreamMode is how resources/stream delivers an artifact:
	// StreamDirect (default), StreamRedirect or StreamDownload.
	StreamMode string
	// Fetch is the artifact fetch endpoint; direct resources/stream
	// responses are served through it. nil: download mode.
	Fetch http.Handler
	// MaxInlineRead caps resources/read of an artifact; default 32 MiB.
	MaxInlineRead int64
	// NoArtifactTools turns off the artifact tools (spillway_artifact_read,
	// _grep, _jq: a window, a search, a jq query of an artifact), which
	// are otherwise listed after the upstream's tools and answered
	// whenever Artifacts is set.
	NoArtifactTools bool
	// StreamWindow is how long a session's SSE events stay replayable
	// with Last-Event-ID; default 2 minutes.
	StreamWindow time.Duration
	// StreamPollAfter, when set, ends a session-era POST stream open this
	// long, after a retry hint; the client polls for the rest (SEP-1699).
	// Where the proxy terminates sessions (stdio and legacy upstreams).
	StreamPollAfter time.Duration
	// WriteStallTimeout cuts a /mcp response whose client reads nothing
	// for this long. Where the proxy terminates the transport (stdio and
	// legacy upstreams) a stateless request's call is cancelled upstream
	// and a session's stream waits to be resumed; through the HTTP relay
	// the request is cancelled upstream. Default 30 s; negative: never
	// (Close still ends every response).
	WriteStallTimeout time.Duration
	// UpstreamStallTimeout stops an upstream that writes part of a
	// message and then nothing more for this long, or trickles less than
	// 1 KiB in that long (only time spent waiting for it counts): the
	// requests waiting on it get an error instead of waiting forever. A
	// stdio child is killed (a shared child's other clients' calls fail
	// too) and the next call starts a fresh one; an HTTP upstream's event
	// stream stopped mid-event (Streamable HTTP or the legacy transport's,
	// relayed or terminated), or a JSON body stopped midway, is closed (a
	// legacy stream is then reconnected). Silence before an answer or
	// between messages never counts. Default 2 min; negative: never.
	UpstreamStallTimeout time.Duration
	// StreamKeepAlive is how often an open /mcp event stream gets an SSE
	// comment (a relayed one: when idle), so that no load balancer's idle
	// timeout cuts a long, silent call. Default 15 s;
	// negative: never.
	StreamKeepAlive time.Duration
	// StdioMaxMessage caps one message ServeStdio writes to its client:
	// a larger response becomes a JSON-RPC error naming its size, a larger
	// request or notification is dropped. The TypeScript SDK's stdio
	// client, which desktop hosts use, closes its connection on a message
	// over 10 MiB. Default 10 MiB; negative: no cap.
	StdioMaxMessage int64
	// SpillDir is where the long strings of upstream messages wait on
	// disk while their message travels (files unlinked at once, so
	// nothing is left behind); "": os.TempDir(). SpillMax bounds the
	// bytes waiting there at once (default 4 GiB): past it a message is
	// answered with a JSON-RPC error instead. MaxMessage then caps only
	// what stays in memory of a message.
	SpillDir string
	SpillMax int64
	// SpillMaxTenant bounds the bytes one tenant's upstream messages hold
	// in SpillDir at once, within SpillMax: a tenant whose messages are
	// slow to go (a client reading a big one slowly) fills its share,
	// never the space every tenant's messages need; past it its message
	// is answered with a JSON-RPC error. Default half of SpillMax when
	// Tenants names two tenants or more, else none; negative: no bound
	// but SpillMax.
	SpillMaxTenant int64
	// InlineMax bounds what the upstream messages being read hold in
	// memory together, their strings in SpillDir aside (default 1 GiB):
	// MaxMessage bounds one, this many at once, so that concurrent large
	// answers fail one by one (a JSON-RPC error for the request) instead
	// of adding up past the machine's memory.
	InlineMax int64
	// StrictEras turns era bridging off, in both directions: every
	// request is forwarded in its client's era, and a client in front of
	// an upstream that speaks only the other era gets the upstream's
	// errors. By default the proxy learns the upstream's eras and bridges
	// a request the upstream cannot take in its own era.
	StrictEras bool
	Logger     *slog.Logger
}

// Upstream is where the proxy sends what it does not answer itself.
type Upstream interface{ upstream() }

// Proxy is an MCP proxy. Create it with New; it is safe for concurrent
// use. Close ends its sessions, streams and child processes.
type Proxy struct {
	o       Options
	log     *slog.Logger
	methods *ownmethods.Methods

	relay *relay.Relay      // an HTTP upstream that speaks Streamable HTTP
	term  *terminating.Face // a stdio or legacy upstream
	dial  terminating.Dial  // a new upstream connection, for the stdio face
	// legacy is the face for an HTTP upstream found to be legacy-only.
	legacy func() *terminating.Face
	// eras are an HTTP upstream's protocol eras; bridged is the face of
	// session-era sessions when it speaks only the stateless era (each
	// session's connection bridged, package sessionbridge).
	eras        *era.Cache
	bridged     func() *terminating.Face
	bridgedOpen atomic.Bool
	// statelessEras are the upstream's eras as a stateless request needs
	// them: server/discover, then initialize, which an upstream of the
	// session era answers (the bridged face holds sessions for it). nil
	// with StrictEras.
	statelessEras *era.Cache

	// tools are the upstream's x-mcp-header bindings, learned from
	// tools/list: what Mcp-Param-* headers mirror.
	tools mcpheader.Tools

	// spool takes upstream messages as they stream in: their long
	// strings wait on disk, and every writer to a client puts them back.
	spool *spill.Spooler

	closeMu sync.Mutex
	closed  bool
	stdio   map[*stdioRun]struct{} // ServeStdio calls running
}

// stdioRun is one ServeStdio call, for Close to end.
type stdioRun struct {
	cancel context.CancelFunc
	up     stdio.Upstream
}

// checkStateless validates a stateless request's routing headers where
// the proxy terminates HTTP (an HTTP upstream checks its own), learning
// the called tool from the upstream first if it must (one listing, as
// rq's caller, teaches its bindings and its outputSchema).
func (p *Proxy) checkStateless(ctx context.Context, r *http.Request, rq ownmethods.Request, m *jsonrpc.Message, up *mux.Mux) *jsonrpc.Message {
	if err := mcpheader.Check(r.Header, []*jsonrpc.Message{m}); err != nil {
		return headerError(m, err)
	}
	if name, ok := mcpheader.RoutingName(m); ok && m.Method == "tools/call" && mcpheader.Stateless(r.Header.Get(mcpheader.ProtocolVersion)) &&
		!p.methods.OwnsTool(rq, name) { // the proxy answers it: no bindings to check, no upstream to ask
		p.methods.EnsureTool(ctx, rq, name, terminating.ListTools(up, m, true))
		bs, _ := p.tools.Lookup(name)
		if err := mcpheader.CheckParams(r.Header, bs, m.Params); err != nil {
			return headerError(m, err)
		}
	}
	return nil
}

// headerError is the JSON-RPC answer to a request whose headers fail
// mcpheader's checks.
func headerError(m *jsonrpc.Message, err error) *jsonrpc.Message {
	var e *mcpheader.Error
	if errors.As(err, &e) {
		return jsonrpc.ErrorResponse(m.ID, e.Code, e.Message)
	}
	return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest, err.Error())
}

// New returns a proxy for o.Upstream.
func New(o Options) (*Proxy, error) {
	if o.Upstream == nil {
		return nil, errors.New("mcpproxy: no upstream")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 20
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = 1 << 30
	}
	if o.UpstreamStallTimeout == 0 {
		o.UpstreamStallTimeout = 2 * time.Minute
	}
	if o.StdioMaxMessage == 0 {
		o.StdioMaxMessage = 10 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Guard == nil {
		o.Guard = &identity.Guard{}
	}
	so := spill.Options{Dir: o.SpillDir, MaxBytes: o.SpillMax, MaxInline: o.InlineMax, ShareMax: o.SpillMaxTenant}
	if so.ShareMax == 0 && o.Tenants.Count() > 1 {
		so.ShareMax = cmp.Or(o.SpillMax, spill.DefaultMaxBytes) / 2
	}
	if o.Offloader != nil {
		so.Tap = o.Offloader.Tap // a big text's preview is built as it arrives
	}
	spool, err := spill.New(so)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: %w", err)
	}
	p := &Proxy{o: o, log: o.Logger, spool: spool}
	// spoolOf is the Spooler of a connection dialled with ctx: its
	// tenant's view (a connection serves one tenant).
	spoolOf := func(ctx context.Context) *spill.Spooler { return spool.For(terminating.TenantOf(ctx)) }
	// clientOf gives an upstream client its Spooler and the stall rule
	// every upstream read goes through.
	clientOf := func(ctx context.Context, co httpclient.Options) httpclient.Options {
		co.Spool, co.StallTimeout = spoolOf(ctx), o.UpstreamStallTimeout
		return co
	}
	p.methods = ownmethods.New(ownmethods.Options{
		Artifacts: o.Artifacts, Offloader: o.Offloader, OffloadResources: o.OffloadResources,
		MaxInlineRead: o.MaxInlineRead, StreamMode: o.StreamMode, Fetch: o.Fetch, Logger: o.Logger,
		NoArtifactTools: o.NoArtifactTools, Spool: spool,
		LearnTools: func(result []byte) { p.tools.Learn(result) },
	})
	faceOptions := func(dial, sessionDial terminating.Dial) terminating.Options {
		return terminating.Options{Dial: dial, SessionDial: sessionDial, Methods: p.methods, MaxBody: o.MaxBody, Eras: p.statelessEras,
			MaxSessions: o.MaxSessions, PollAfter: o.StreamPollAfter, WriteStall: o.WriteStallTimeout, KeepAlive: o.StreamKeepAlive, Logger: o.Logger,
			StatelessConns: o.StatelessUpstreams, StatelessIdle: o.StatelessIdle, BridgeSessions: o.BridgeSessions, BridgeWait: o.BridgeWait,
			Limits: session.Limits{Window: o.StreamWindow}, CheckStateless: p.checkStateless}
	}
	faceFor := func(dial terminating.Dial, sessionDial ...terminating.Dial) *terminating.Face {
		var sd terminating.Dial
		if len(sessionDial) > 0 {
			sd = sessionDial[0]
		}
		return terminating.New(faceOptions(dial, sd))
	}
	switch up := o.Upstream.(type) {
	case *CommandUpstream:
		var user *child.User
		if up.User != "" {
			var err error
			if user, err = child.LookupUser(up.User); err != nil {
				return nil, fmt.Errorf("mcpproxy: %w", err)
			}
		}
		p.dial = func(ctx context.Context) (mux.Conn, error) {
			return child.Start(child.Command{Path: up.Command, Args: up.Args, Dir: up.Dir, Env: up.Env, User: user},
				child.Options{MaxMessage: o.MaxMessage, Spool: spoolOf(ctx), Logger: up.logger(o.Logger), StallTimeout: o.UpstreamStallTimeout})
		}
		if o.StrictEras {
			p.term = faceFor(p.dial)
			break
		}
		// Stateless requests learn the child's eras on a process of their
		// own; a session's, from the child's answer to its initialize.
		p.statelessEras = era.NewCache(terminating.ProbeEras(p.dial))
		p.term = faceFor(p.dial, p.autoBridge)
	case *HTTPUpstream:
		p.dial = func(ctx context.Context) (mux.Conn, error) {
			return httpclient.New(clientOf(ctx, up.clientOptions(o.MaxMessage, o.Logger, up.Transport, &p.tools)))
		}
		legacyDial := func(ctx context.Context) (mux.Conn, error) {
			return httpclient.New(clientOf(ctx, up.clientOptions(o.MaxMessage, o.Logger, httpclient.Legacy, &p.tools)))
		}
		if up.Transport == "sse" {
			if !o.StrictEras {
				p.statelessEras = era.NewCache(terminating.ProbeEras(legacyDial))
			}
			p.term = faceFor(legacyDial)
			break
		}
		if !o.StrictEras {
			p.eras = era.NewCache(discoverEras(p.dial))
			p.statelessEras = era.NewCache(terminating.ProbeEras(p.dial))
		}
		var bonce sync.Once
		var bface *terminating.Face
		p.bridged = func() *terminating.Face {
			bonce.Do(func() {
				fo := faceOptions(p.dial, func(ctx context.Context) (mux.Conn, error) {
					c, err := p.dial(ctx)
					if err != nil {
						return nil, err
					}
					// A mismatch: the upstream changed; learn its eras again.
					return sessionbridge.New(c, sessionbridge.Options{Logger: o.Logger, Mismatch: p.eras.Forget}), nil
				})
				// Streamable HTTP: a call's server requests come on its
				// own response stream, so calls that can be asked share
				// a session.
				fo.RelatedStreams = true
				bface = terminating.New(fo)
				p.bridgedOpen.Store(true)
			})
			return bface
		}
		ro := relay.Options{URL: up.URL, Client: up.Client, Header: up.Header,
			MaxMessage: o.MaxMessage, WriteTimeout: o.WriteStallTimeout, StallTimeout: o.UpstreamStallTimeout, KeepAlive: o.StreamKeepAlive,
			Methods: p.methods, Spool: spool, Logger: o.Logger}
		if up.Transport == "" {
			var once sync.Once
			var face *terminating.Face
			p.legacy = func() *terminating.Face {
				once.Do(func() { face = faceFor(legacyDial) })
				return face
			}
			ro.DetectLegacy = func(ctx context.Context) bool {
				return httpclient.DetectLegacy(ctx, up.clientOptions(o.MaxMessage, o.Logger, httpclient.Legacy, &p.tools))
			}
		}
		p.relay = relay.New(ro)
	default:
		return nil, errors.New("mcpproxy: unknown upstream type")
	}
	return p, nil
}

// Close ends every session and stream (open responses return at once, so
// a server's graceful shutdown need not wait for them), ends ServeStdio
// and stops the child processes, their process groups included, before it
// returns. Safe to call more than once.
func (p *Proxy) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var wg sync.WaitGroup
	for run := range p.stdio {
		run.cancel()
		wg.Add(1)
		go func() { defer wg.Done(); run.up.Close() }()
	}
	defer wg.Wait()
	if p.term != nil {
		p.term.Close()
	}
	if p.relay != nil {
		p.relay.Close()
	}
	if p.legacy != nil && p.relay.Legacy() {
		p.legacy().Close()
	}
	if p.bridgedOpen.Load() {
		p.bridged().Close()
	}
	return p.spool.Close()
}

// autoBridge dials a session's own connection to a stdio child whose era
// is learned from its answer to the session's initialize: passed as it is
// when the child speaks the session era, bridged when it speaks only the
// stateless one (sessionbridge.NewAuto).
func (p *Proxy) autoBridge(ctx context.Context) (mux.Conn, error) {
	c, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	return sessionbridge.NewAuto(c, sessionbridge.Options{Logger: p.log, OneSession: true}), nil
}

// bridge reports whether an HTTP request of the session era goes to the
// bridged face: the upstream speaks only the stateless era. That is
// learned once, at the first session's initialize (a session's other
// requests follow it), with server/discover; a request of the stateless
// era, or an upstream whose eras cannot be learned, is relayed as it is.
func (p *Proxy) bridge(r *http.Request) bool {
	if p.eras == nil || mcpheader.Stateless(r.Header.Get("Mcp-Protocol-Version")) {
		return false
	}
	e, known := p.eras.Known()
	if !known {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || !initializes(r, p.o.MaxBody) {
			return false
		}
		var err error
		if e, err = p.eras.Get(r.Context()); err != nil {
			return false
		}
	}
	return e.Stateless() && !e.Session()
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
func discoverEras(dial terminating.Dial) func(ctx context.Context) (era.Eras, error) {
	return func(ctx context.Context) (era.Eras, error) {
		var unreachable error
		e, err := terminating.ProbeEras(func(ctx context.Context) (mux.Conn, error) {
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

// ServeHTTP serves the Streamable HTTP face; mount it at /mcp.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := p.o.Guard.Check(r); err != nil {
		http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
		return
	}
	tenant, err := p.o.Tenants.Authenticate(r)
	if err != nil {
		// A JSON-RPC error (id null: no request was read) that an MCP
		// client can show, beside the challenge that tells it to
		// authenticate.
		w.Header().Set("WWW-Authenticate", `Bearer realm="spillway"`)
		httpx.WriteError(w, http.StatusUnauthorized, nil, CodeUnauthorized, "Unauthorized: missing or unknown bearer token")
		return
	}
	rq := ownmethods.Request{Tenant: tenant, Header: r.Header, Source: remoteAddr(r)}
	switch {
	case p.term != nil:
		p.term.ServeHTTP(w, r, rq)
	case p.relay.Legacy():
		p.legacy().ServeHTTP(w, r, rq)
	case p.bridge(r) || p.statelessBridge(r):
		p.bridged().ServeHTTP(w, r, rq)
	default:
		if p.relay.ServeHTTP(w, r, rq, p.o.MaxBody) {
			p.legacy().ServeHTTP(w, r, rq) // the body was put back
		}
	}
}

// statelessBridge reports whether an HTTP request of the stateless era
// goes to the bridged face: the upstream speaks only the session era, so
// the face holds session-era sessions for it (see package terminating).
func (p *Proxy) statelessBridge(r *http.Request) bool {
	if p.statelessEras == nil || !mcpheader.Stateless(r.Header.Get(mcpheader.ProtocolVersion)) {
		return false
	}
	e, err := p.statelessEras.Get(r.Context())
	return err == nil && !e.Stateless() && e.Session()
}

func remoteAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// ServeStdio serves one client speaking newline-delimited JSON-RPC on in
// and out until in ends or ctx is done. The upstream is a child process
// (restarted with backoff if it dies, the client's handshake replayed) or
// an HTTP server spoken to as a Streamable HTTP client.
func (p *Proxy) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	client := ndjson.NewConn(in, out, ndjson.Options{MaxMessage: p.o.MaxBody, Peer: "client", Expand: true, Answer: true, Logger: p.log})
	defer client.Close()
	face := stdio.New(stdio.Options{Methods: p.methods, MaxMessage: p.o.StdioMaxMessage, Logger: p.log})
	var up stdio.Upstream
	switch p.o.Upstream.(type) {
	case *HTTPUpstream:
		c, err := p.dial(ctx)
		if err != nil {
			return err
		}
		if !p.o.StrictEras {
			// Bridged if the upstream refuses the client's initialize
			// and offers 2026-07-28 (asking server/discover first would
			// put a request before initialize at every session-era
			// upstream).
			c = sessionbridge.NewAuto(c, sessionbridge.Options{Logger: p.log})
		}
		up = stdio.Fixed{M: mux.NewExclusive(c, face.OnServer, p.log)}
	default:
		dial := p.autoBridge
		if p.o.StrictEras {
			dial = p.dial
		}
		up = &terminating.Supervisor{Dial: dial, OnServer: face.OnServer, Init: face.Replay, Exclusive: true, Log: p.log}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := &stdioRun{cancel: cancel, up: up}
	p.closeMu.Lock()
	if p.closed {
		p.closeMu.Unlock()
		up.Close()
		return errors.New("mcpproxy: closed")
	}
	if p.stdio == nil {
		p.stdio = map[*stdioRun]struct{}{}
	}
	p.stdio[run] = struct{}{}
	p.closeMu.Unlock()
	defer func() {
		p.closeMu.Lock()
		delete(p.stdio, run)
		p.closeMu.Unlock()
	}()
	return face.Serve(ctx, client, up)
}
