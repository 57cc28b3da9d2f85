// Package mcpproxy is Spillway's MCP proxy: it sits between an agent and
// one MCP tool server (or many: a Gateway), passes every message it does
// not own through unchanged, and rewrites the few it does (initialize and
// server/discover capabilities, tools/call results it offloads,
// resources/* for its own artifact URIs).
//
// This package is the facade cmd/spillway uses. An agent reaches a Proxy
// through one of two faces, Streamable HTTP (ServeHTTP, mounted at /mcp)
// and stdio (ServeStdio); New builds both for the kind of upstream it is
// given, one constructor per kind, each returning an httpFace and a
// stdioFace (faces.go):
//
//   - a stdio child (CommandUpstream; commandFaces): the proxy speaks MCP
//     over HTTP itself (a terminating face), and a child that speaks only
//     the other era than its client is bridged;
//   - a legacy HTTP+SSE server (HTTPUpstream with Transport "sse";
//     legacyFaces): a terminating face too, over Spillway's legacy client;
//   - a Streamable HTTP server (streamableFaces): requests are relayed as
//     they are, or served by a terminating face once the upstream turns
//     out to be legacy-only (Transport "");
//   - a Streamable HTTP server that speaks only the other era than a
//     request (stateless-only, or session-only): that request goes to a
//     terminating face that bridges it (eraBridgeFace), made at first use;
//   - many servers (Gateway; gatewayFaces): a terminating face over one
//     virtual session-era connection to all of them (routing/gateway),
//     each server spoken to in its own era and transport.
//
// The work is done by the internal packages, grouped by role (ARCHITECTURE.md
// draws the same map, with the direction of imports and the path of one
// tools/call result):
//
// internal/wire: the bytes on a connection, shared by every upstream and
// face.
//   - jsonrpc: the JSON-RPC envelope, ids and in-place edits of raw JSON.
//   - sse: server-sent event streams, read and written, each event bounded.
//   - ndjson: the stdio transport, newline-delimited JSON-RPC, each line
//     bounded.
//   - spill: the long strings of upstream messages, parked on disk behind
//     markers (see below).
//   - mcpheader: the stateless era's HTTP headers (Mcp-Method, Mcp-Name,
//     Mcp-Param-*).
//   - era: which protocol eras (session, stateless) an upstream speaks.
//   - stall: the rule that stops an upstream stalled mid-message.
//   - binframe: binary transfer's framings, stdio frames and
//     multipart/mixed bodies.
//   - httpx: what both HTTP faces do alike (reading a POST, error
//     statuses) and the one client policy towards HTTP upstreams.
//   - mcptrace: a request's spans (server, and client towards the
//     upstream) and the trace context its _meta carries.
//
// internal/upstreams: Spillway as a client of the tool server.
//   - child: a stdio server run as a child process, its reach bounded.
//   - httpclient: a Streamable HTTP or legacy HTTP+SSE server, as a client.
//   - sessionbridge: a stateless-only server presented as a session-era one.
//   - eratest: a stateless-only server for tests, on the official Go SDK
//     (cmd/eraserver runs it as a process).
//
// internal/routing: who gets which message.
//   - mux: one upstream connection shared by clients, ids renumbered so
//     that each response finds its own client.
//   - session: session-era sessions bound to tenants, each stream a
//     replayable event log.
//   - pool: the upstream connections of requests that are not a session's
//     own, one supervised connection per tenant, bounded.
//   - gateway: many upstreams as one connection; where a named request
//     finds its upstream.
//
// internal/faces: what an agent talks to.
//   - relay: the HTTP face in front of a Streamable HTTP upstream.
//   - terminating: the HTTP face that speaks MCP over HTTP itself, in front
//     of a stdio child, a legacy server, or an upstream of the other era.
//   - stdio: the stdio face, in front of any upstream.
//   - binary: the binary transfer extension in front of both faces, for
//     the clients that declared it (extensions.go).
//
// internal/results: what Spillway does to results.
//   - ownmethods: the proxy's own methods (its capabilities, its artifact
//     resources and tools) and the rewriting of results every face calls.
//   - offload: large result items stored as artifacts and replaced by a
//     preview and a link.
//   - shrink: a large structuredContent cut down while it stays valid
//     against the tool's outputSchema.
//   - arttools: the artifact tools' read, grep and jq.
//   - schematest: a test helper checking results against the MCP schema.
//
// internal/metrics: the proxy's Prometheus series (Options.Registerer),
// measured around the faces (metrics.go) and counted by the offloader.
//
// # Spilled strings: who must do what
//
// No upstream message is ever held whole in memory: every upstream
// connection (child, httpclient, and the relay for what it relays) reads
// messages through a spill.Spooler, which puts each string over 64 KiB in a
// file on disk and leaves a marker in its place. A message with markers
// travels the pipeline like any other, so:
//
//   - Every face writes to its client only through a writer that puts the
//     strings back (spill.Expand): sse.Writer for event streams,
//     httpx.WriteReply and httpx.WriteMessages for JSON bodies, an
//     ndjson.Conn with Options.Expand for stdio. A message written any
//     other way reaches the agent with markers instead of the upstream's
//     bytes.
//   - Whoever puts a message on its wire for good releases its strings
//     (spill.Release): the JSON and stdio writers once written, the SSE
//     writer for an event without an id (for every event, in the relay,
//     whose upstream does the replaying: Writer.Final), package session
//     when an event leaves its replay window, the terminating face for a
//     message whose session is gone, the offloader once it stored them. A
//     string nobody releases holds spill space until its TTL (15 minutes).
//   - Code that needs a string's value reads it through spill (Expand,
//     ExpandedLen, DecodeText), never from the marker: the offloader,
//     ownmethods (tools/list results it extends), sessionbridge.
//   - A client's message that holds a marker is refused (httpx.DecodePOST,
//     ndjson.Conn with Options.Expand): only Spillway makes markers.
//
// A request carries its context (tenant, session, stream) from the face
// that decoded it to the upstream and back: responses are routed by ids
// the proxy minted, never by ids a client chose.
package mcpproxy

import (
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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/binary"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/resumable"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/stdio"
	"github.com/spillway-dev/spillway/mcpproxy/internal/metrics"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/gateway"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/httpclient"
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
// The fields come in groups: what is proxied and what the proxy adds, who
// may call, how large messages may be, sessions and era bridging, and the
// timing of streams.
type Options struct {
	// Upstream is the tool server: an *HTTPUpstream or a *CommandUpstream,
	// or many of them behind one face: a *Gateway.
	Upstream Upstream
	// CallPolicy is the call decision asked before a Gateway forwards a
	// tools/call, prompts/get or resources/read, and for each tool it
	// lists. nil allows every call.
	CallPolicy CallDecider
	// Offloader rewrites tools/call results (and, with OffloadResources,
	// upstream resources/read results). nil: results pass unchanged.
	Offloader        *Offloader
	OffloadResources bool
	// Artifacts serves the proxy's own spillway:// resources. nil: they
	// are forwarded like any other URI. Its Audit logger, when set,
	// receives the audit trail of the proxy's offloads (the Offloader's
	// Service) and of its reads of artifacts (resources/read,
	// resources/stream, the artifact tools): one knob for the whole
	// trail, so there is no Audit option here.
	Artifacts *artifact.Service
	// NoArtifactTools turns off the artifact tools (spillway_artifact_read,
	// _grep, _jq: a window, a search, a jq query of an artifact), which
	// are otherwise listed after the upstream's tools and answered
	// whenever Artifacts is set.
	NoArtifactTools bool
	// StreamMode is how resources/stream delivers an artifact:
	// StreamDirect (default), StreamRedirect or StreamDownload.
	StreamMode string
	// Fetch is the artifact fetch endpoint; direct resources/stream
	// responses are served through it. nil: download mode.
	Fetch http.Handler
	// MaxInlineRead caps resources/read of an artifact; default 32 MiB.
	MaxInlineRead int64

	// Tenants authenticates callers with bearer tokens (static ones, or
	// OAuth access tokens: see identity.Tenants.WithOAuth); nil or empty
	// means no inbound auth (the command refuses that off loopback).
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
	// StrictEras turns era bridging off, in both directions: every
	// request is forwarded in its client's era, and a client in front of
	// an upstream that speaks only the other era gets the upstream's
	// errors. By default the proxy learns the upstream's eras and bridges
	// a request the upstream cannot take in its own era.
	StrictEras bool

	// StreamWindow is how long a session's SSE events stay replayable
	// with Last-Event-ID; default 2 minutes.
	StreamWindow time.Duration
	// StreamPollAfter, when set, ends a session-era POST stream open this
	// long, after a retry hint; the client polls for the rest (SEP-1699).
	// Where the proxy terminates sessions (stdio and legacy upstreams).
	StreamPollAfter time.Duration
	// StreamKeepAlive is how often an open /mcp event stream gets an SSE
	// comment (a relayed one: when idle), so that no load balancer's idle
	// timeout cuts a long, silent call. Default 15 s; negative: never.
	StreamKeepAlive time.Duration
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

	// Streams configures resumable streams (stream/resume, stream/poll):
	// offered to the clients that declare capabilities.streams, on both
	// faces and in both eras. The zero value takes the defaults of
	// package resumable (resumeInterval 1 s to 5 min; 1 MiB a stream,
	// 64 MiB all streams, 10,000 streams).
	Streams StreamOptions

	// Registerer, when set, gets the proxy's Prometheus series (README.md
	// lists them): request latency by method, upstream and outcome,
	// upstream errors, offloads and the bytes they stored and kept out of
	// agents' contexts. nil: no metrics. Proxies given one registry share
	// its series (the first registers them, the others count into them);
	// New fails when the registry holds other collectors under their
	// names.
	Registerer prometheus.Registerer

	Logger *slog.Logger
}

// StreamOptions bound resumable streams; see Options.Streams. A zero
// field takes its default.
type StreamOptions struct {
	// ResumeMin and ResumeMax are the resumeInterval Spillway declares: a
	// stream that nobody reads, polls or resumes for ResumeMax is
	// abandoned (its request cancelled upstream, its memory freed).
	ResumeMin, ResumeMax time.Duration
	// PerStream bounds what one stream holds in memory, Total what all
	// hold together (past either the stream ends with an error, its
	// request cancelled); Max bounds the streams open at once.
	PerStream, Total int64
	Max              int
}

// withDefaults returns o with the defaults New applies itself (the other
// zero fields are defaulted by the package that reads them).
func (o Options) withDefaults() Options {
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
	return o
}

// Upstream is where the proxy sends what it does not answer itself.
type Upstream interface{ upstream() }

// Proxy is an MCP proxy. Create it with New; it is safe for concurrent
// use. Close ends its sessions, streams and child processes.
type Proxy struct {
	o       Options
	log     *slog.Logger
	methods *ownmethods.Methods

	// web serves /mcp and stdio connects each ServeStdio client to the
	// upstream: the faces New chose for the upstream's kind.
	web   httpFace
	stdio stdioFace
	// http is web behind the opt-in extensions (extensions.go).
	http frontHandler
	// streams holds the resumable streams of every face.
	streams *resumable.Registry
	// binary is the binary transfer extension.
	binary *binary.Extension

	// gateway is the registry of a Gateway's servers; nil for one upstream.
	gateway *gateway.Registry
	// serverOffload is each Gateway server's offloading, by name.
	serverOffload atomic.Pointer[map[string]serverOffload]

	// tools are the upstream's x-mcp-header bindings, learned from
	// tools/list: what Mcp-Param-* headers mirror.
	tools mcpheader.Tools

	// metrics are the proxy's series; nil without Options.Registerer.
	metrics *metrics.Set

	// spool takes upstream messages as they stream in: their long
	// strings wait on disk, and every writer to a client puts them back.
	spool *spill.Spooler

	closeMu sync.Mutex
	closed  bool
	runs    map[*stdioRun]struct{} // ServeStdio calls running
}

// stdioRun is one ServeStdio call, for Close to end.
type stdioRun struct {
	cancel context.CancelFunc
	up     stdio.Upstream
}

// New returns a proxy for o.Upstream, with the faces of its kind.
func New(o Options) (*Proxy, error) {
	if o.Upstream == nil {
		return nil, errors.New("mcpproxy: no upstream")
	}
	o = o.withDefaults()
	set, err := newMetrics(&o)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: %w", err)
	}
	spool, err := newSpool(o)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: %w", err)
	}
	p := &Proxy{o: o, log: o.Logger, spool: spool, metrics: set}
	mo := ownmethods.Options{
		Artifacts: o.Artifacts, Offloader: o.Offloader, OffloadResources: o.OffloadResources,
		MaxInlineRead: o.MaxInlineRead, StreamMode: o.StreamMode, Fetch: o.Fetch, Logger: o.Logger,
		NoArtifactTools: o.NoArtifactTools, Spool: spool,
		LearnTools: func(result []byte) { p.tools.Learn(result) },
		Declare:    p.declare,
	}
	if _, ok := o.Upstream.(*Gateway); ok && o.Offloader != nil {
		mo.OffloaderFor = p.offloaderFor // each server's own settings
	}
	p.methods = ownmethods.New(mo)
	p.streams = resumable.New(resumable.Options{ResumeMin: o.Streams.ResumeMin, ResumeMax: o.Streams.ResumeMax,
		StreamMax: o.Streams.PerStream, TotalMax: o.Streams.Total, MaxStreams: o.Streams.Max, Methods: p.methods,
		MaxBody: o.MaxBody, MaxMessage: o.MaxMessage, Spool: spool, KeepAlive: o.StreamKeepAlive, WriteStall: o.WriteStallTimeout, Logger: o.Logger})
	p.binary = p.newBinary()
	switch up := o.Upstream.(type) {
	case *CommandUpstream:
		p.web, p.stdio, err = p.commandFaces(up)
	case *Gateway:
		p.web, p.stdio, err = p.gatewayFaces(up)
	case *HTTPUpstream:
		if up, err = p.authorized(up); err != nil {
			break
		}
		if up.Transport == httpclient.Legacy {
			p.web, p.stdio = p.legacyFaces(up)
		} else {
			p.web, p.stdio = p.streamableFaces(up)
		}
	default:
		err = errors.New("mcpproxy: unknown upstream type")
	}
	if err != nil {
		return nil, err
	}
	p.http = p.front(p.web)
	p.knownUpstreams()
	return p, nil
}

// newSpool returns the Spooler every upstream message is read through. A
// tenant's share of the spill space is half of it by default when
// several tenants may call; with an Offloader, a big text's preview is
// built as it arrives.
func newSpool(o Options) (*spill.Spooler, error) {
	so := spill.Options{Dir: o.SpillDir, MaxBytes: o.SpillMax, MaxInline: o.InlineMax, ShareMax: o.SpillMaxTenant}
	if so.ShareMax == 0 && o.Tenants.Count() > 1 {
		so.ShareMax = cmp.Or(o.SpillMax, spill.DefaultMaxBytes) / 2
	}
	if o.Offloader != nil {
		so.Tap = o.Offloader.Tap
	}
	return spill.New(so)
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
	for run := range p.runs {
		run.cancel()
		wg.Add(1)
		go func() { defer wg.Done(); run.up.Close() }()
	}
	defer wg.Wait()
	p.streams.Close()
	p.web.Close()
	return p.spool.Close()
}

// ServeHTTP serves the Streamable HTTP face; mount it at /mcp.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := p.o.Guard.Check(r); err != nil {
		http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
		return
	}
	who, err := p.o.Tenants.Identify(r)
	if err != nil {
		// A JSON-RPC error (id null: no request was read) that an MCP
		// client can show, beside the challenge that tells it to
		// authenticate (401) or that its token lacks a scope (403).
		ref := p.o.Tenants.Refuse(err)
		w.Header().Set("WWW-Authenticate", ref.Challenge)
		httpx.WriteError(w, ref.Status, nil, CodeUnauthorized, ref.Message)
		return
	}
	if who.OAuth {
		// The access token's claims, for policy input and audit.
		r = r.WithContext(identity.NewContext(r.Context(), who))
	}
	p.http.ServeHTTP(w, r, ownmethods.Request{Tenant: who.Tenant, Header: r.Header, Source: remoteAddr(r)})
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
	up, err := p.stdio.connect(ctx, face)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := &stdioRun{cancel: cancel, up: up}
	if !p.addRun(run) {
		up.Close()
		return errors.New("mcpproxy: closed")
	}
	defer p.removeRun(run)
	measured, end := p.stdioMeasured(ctx, p.stdioClient(ctx, client))
	defer end()
	return face.Serve(ctx, measured, up)
}

// addRun registers a ServeStdio call for Close to end; false once the
// proxy is closed.
func (p *Proxy) addRun(run *stdioRun) bool {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return false
	}
	if p.runs == nil {
		p.runs = map[*stdioRun]struct{}{}
	}
	p.runs[run] = struct{}{}
	return true
}

func (p *Proxy) removeRun(run *stdioRun) {
	p.closeMu.Lock()
	delete(p.runs, run)
	p.closeMu.Unlock()
}

// checkStateless validates a stateless request's routing headers where
// the proxy terminates HTTP (an HTTP upstream checks its own). When the
// request calls a tool of the upstream's, the proxy first learns that
// tool from the upstream if it must: one listing, as rq's caller, teaches
// both its header bindings and its outputSchema.
func (p *Proxy) checkStateless(ctx context.Context, r *http.Request, rq ownmethods.Request, m *jsonrpc.Message, up *mux.Mux) *jsonrpc.Message {
	if err := mcpheader.Check(r.Header, []*jsonrpc.Message{m}); err != nil {
		return headerError(m, err)
	}
	if name, ok := mcpheader.RoutingName(m); ok && m.Method == "tools/call" && mcpheader.Stateless(r.Header.Get(mcpheader.ProtocolVersion)) &&
		!p.methods.OwnsTool(rq, name) { // the proxy answers it: no bindings to check, no upstream to ask
		p.methods.EnsureTool(ctx, rq, name, ownmethods.ListTools(m, true, pool.Sender(up)))
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
