// Package ownmethods holds the MCP methods Spillway answers or changes
// itself, instead of passing them untouched between client and upstream:
//
//   - initialize and server/discover: it adds the resources capability
//     (with stream on an HTTP face) and, for the artifact tools, the tools
//     capability.
//   - resources/list and resources/templates/list: it adds the caller's
//     recent artifacts, and the spillway://artifacts/{id} template, to the
//     first page of the upstream's list (or answers alone when the
//     upstream lacks the method).
//   - resources/read of a spillway:// URI: it answers from the artifact
//     store, as text or base64, up to Options.MaxInlineRead bytes.
//   - resources/stream of a spillway:// URI, on HTTP faces (ServeStream):
//     it answers with the artifact's bytes, a redirect to a presigned
//     storage URL, or a download link.
//   - tools/list and tools/call: it lists the artifact tools
//     (spillway_artifact_read, _grep and _jq, run by package arttools)
//     after the upstream's tools and answers calls to them; an upstream
//     tool of the same name wins.
//   - tools/call results, and upstream resources/read results when
//     Options.OffloadResources is set: it hands them to the offloader
//     (package offload), which stores large values as artifacts and
//     rewrites the result around links to them.
//
// A face calls Before with every request from a client. Before either
// answers the request itself (it then goes no further) or returns a Call
// that the face keeps with the request; the face gives the upstream's
// response and that Call to After, which rewrites the response. HTTP
// faces hand resources/stream to ServeStream first, because its answer
// is raw bytes rather than a JSON-RPC message.
//
// Every read of an artifact's bytes, whatever the method, passes one
// access rule (authorize): the tenant rule of the /a/ link endpoint and
// the policy's fetch decision. An artifact the caller may not read is
// answered as if it did not exist (-32002).
//
// Methods is safe for concurrent use. After never panics, whatever the
// upstream sent: a result Spillway cannot rewrite becomes a JSON-RPC
// error for that request, never a dead process.
package ownmethods

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/tracing"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/arttools"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Version20260728 is the first stateless protocol revision: its results
// carry resultType, and its cacheable ones ttlMs and cacheScope.
const Version20260728 = mcpheader.FirstStateless

// Request says who sends a request, in which protocol era, and on which
// face.
type Request struct {
	Tenant  string // the caller, from inbound auth ("" when auth is off)
	Session string // the session-era session, "" in the stateless era
	// Version is the protocol revision the request speaks; "" takes the
	// request's _meta (the stateless era's per-request revision).
	Version string
	Stdio   bool       // asked on the stdio face (no resources/stream)
	Source  netip.Addr // the client's address; zero on stdio
	Header  http.Header
}

// stateless reports whether the request speaks a stateless-era revision.
func (rq Request) stateless() bool { return mcpheader.Stateless(rq.Version) }

// Call is what After needs to rewrite one response. Before returns it;
// the face carries it with the request and hands it to After with the
// response, whichever connection the response arrives on.
type Call struct {
	Method string // the request's method
	Tool   string // tools/call: the tool's name
	URI    string // resources/read: the resource
	// More is set for a list request with a cursor: not the first page,
	// so the proxy's own items (added to the first) are not added again.
	More    bool
	Request Request
	// List lists the upstream's tools as this call's caller, on the
	// connection the call took: how After learns the outputSchema of a
	// tool whose listing the proxy has not seen (a restart, another
	// replica, a client's cached list). The face that forwards the call
	// sets it; nil: such a tool's large structuredContent is not cut.
	List offload.ListFunc
	// client is what an initialize or server/discover request declared
	// of the client's capabilities (Options.Declare).
	client []byte
	// span is the request's span when it is traced (nil otherwise): After
	// runs under it, whatever context the face rewrites the response in.
	span trace.Span
}

// schemaKey returns the key of the learned schemas that a request's
// results are shrunk against: its tenant (the gateway will add the
// upstream).
func (rq Request) schemaKey() offload.Key { return offload.Key{Tenant: rq.Tenant} }

// Options configure Methods. Every field may be zero.
type Options struct {
	// Artifacts serves resources/read, resources/stream and the listing
	// of spillway:// URIs. nil: those URIs are not the proxy's, and pass.
	Artifacts *artifact.Service
	// Offloader rewrites tools/call results (and, with OffloadResources,
	// upstream resources/read results). nil: results pass unchanged.
	Offloader        *offload.Rewriter
	OffloadResources bool
	// OffloaderFor, when set, picks the Rewriter of one call (a gateway's
	// upstream has settings of its own) in place of Offloader; nil
	// leaves that call's result unchanged.
	OffloaderFor func(offload.Call) *offload.Rewriter
	// MaxInlineRead caps resources/read of an artifact (base64 in JSON);
	// beyond it the caller is told to use resources/stream or the
	// httpUrl. Default 32 MiB.
	MaxInlineRead int64
	// StreamMode is how resources/stream delivers an artifact:
	// StreamDirect (default), StreamRedirect or StreamDownload.
	StreamMode string
	// Fetch is the artifact fetch endpoint (/a/); direct resources/stream
	// responses are served through it. nil: download mode.
	Fetch http.Handler
	// LearnTools is called with every tools/list result the upstream
	// sends (the x-mcp-header bindings of its tools). nil: none.
	LearnTools func(result []byte)
	// Declare, when set, returns the capabilities the proxy adds to an
	// initialize or server/discover result for a client that declared
	// client (its capabilities object, nil for none): each a member of
	// the result's capabilities, name to JSON value. The opt-in
	// extensions (resumable streams, binary transfer) declare themselves
	// this way, to the clients that declared them alone. A member the
	// upstream declared itself is left as the upstream said.
	Declare func(client []byte) map[string][]byte
	// NoArtifactTools turns off the artifact tools (spillway_artifact_read,
	// _grep, _jq), which are otherwise listed and answered whenever
	// Artifacts is set.
	NoArtifactTools bool
	// ToolLimits bound the artifact tools; zero values take arttools'
	// defaults, except MaxAnswer without an Offloader (64 KiB).
	ToolLimits arttools.Limits
	// Spool holds a long jq answer on its way to the Offloader (its
	// tenant's share): with both set, such an answer is stored whole
	// (within arttools.Limits.MaxJQAnswer) instead of cut at MaxAnswer.
	Spool  *spill.Spooler
	Logger *slog.Logger
}

// Methods answers the requests the proxy handles itself and rewrites the
// responses it extends (see the package doc). Create it with New; it is
// safe for concurrent use.
type Methods struct {
	o   Options
	log *slog.Logger

	recent recent     // tenant → artifacts offloaded lately, for resources/list
	caps   streamCaps // session → what its initialize declared
	// schemas holds each tool's outputSchema as tools/list presented it
	// to each tenant.
	schemas offload.Learned
	// upstreamStream is set when the upstream's last initialize or
	// server/discover result declared resources.stream.
	upstreamStream atomic.Bool
	tools          *arttools.Runner
}

// New returns the proxy's own methods configured by o.
func New(o Options) *Methods {
	if o.MaxInlineRead <= 0 {
		o.MaxInlineRead = 32 << 20
	}
	if o.StreamMode == "" {
		o.StreamMode = StreamDirect
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Offloader == nil && o.ToolLimits.MaxAnswer <= 0 {
		o.ToolLimits.MaxAnswer = maxToolAnswer
	}
	return &Methods{o: o, log: o.Logger, recent: newRecent(), caps: newStreamCaps(), tools: arttools.New(o.ToolLimits)}
}

// Before inspects a request from a client. It returns reply when the
// proxy answers the request itself (send it to the client; the request
// goes no further), and c when the response must pass After. Both are
// nil for everything else, which is forwarded untouched. It never
// panics.
func (o *Methods) Before(ctx context.Context, rq Request, m *jsonrpc.Message) (reply *jsonrpc.Message, c *Call) {
	if !m.IsRequest() {
		return nil, nil
	}
	defer func() {
		if r := recover(); r != nil {
			o.log.Error("inspecting a request panicked", "method", m.Method, "panic", r, "stack", string(debug.Stack()))
			reply, c = jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInternalError, "internal error"), nil
		}
		if c != nil {
			c.span = tracing.Recording(ctx)
		}
	}()
	if rq.Version == "" {
		rq.Version = jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion)
	}
	switch m.Method {
	case "initialize":
		return nil, &Call{Method: m.Method, Request: rq, client: jsonrpc.RawMember(m.Params, "capabilities")}
	case "server/discover":
		return nil, &Call{Method: m.Method, Request: rq, client: jsonrpc.Meta(m, jsonrpc.MetaClientCapabilities)}
	case "tools/list", "resources/list", "resources/templates/list":
		return nil, &Call{Method: m.Method, More: jsonrpc.StringMember(m.Params, "cursor") != "", Request: rq}
	case "tools/call":
		name := jsonrpc.StringMember(m.Params, "name")
		if o.OwnsTool(rq, name) {
			return o.callTool(ctx, rq, m), nil
		}
		return nil, &Call{Method: m.Method, Tool: name, Request: rq}
	case "resources/read":
		uri := jsonrpc.StringMember(m.Params, "uri")
		if id, ours := o.ours(uri); ours {
			return o.readArtifact(ctx, rq, m.ID, id), nil
		}
		if o.o.OffloadResources && o.o.Offloader != nil {
			return nil, &Call{Method: m.Method, URI: uri, Request: rq}
		}
	case "resources/stream":
		if rq.Stdio {
			// SEP-2532 leaves stdio out: the bytes need HTTP.
			return jsonrpc.ErrorResponse(m.ID, CodeNotStreamable,
				"resources/stream needs HTTP; over stdio use resources/read or the resource_link's httpUrl"), nil
		}
	}
	return nil, nil
}

// ours returns the artifact id of a spillway:// artifact URI, and whether
// uri is one. A malformed id under the prefix is still ours (and will not
// be found): it must not reach the upstream, which owns no such URI.
func (o *Methods) ours(uri string) (string, bool) {
	if o.o.Artifacts == nil {
		return "", false
	}
	return strings.CutPrefix(uri, artifact.URIPrefix)
}

// errInvalidResult is the error message for a request whose upstream
// result the proxy must rewrite but cannot read.
const errInvalidResult = "upstream returned an invalid result"

// After rewrites the response to a call Before returned c for (a nil c
// passes resp unchanged, as does anything but a response). A result
// the proxy must extend but that is not what the method returns (null, a
// string, capabilities that are not an object…) becomes a CodeUpstream
// error for the request. After never panics.
func (o *Methods) After(ctx context.Context, c *Call, resp *jsonrpc.Message) (out *jsonrpc.Message) {
	if c == nil || resp == nil || !resp.IsResponse() {
		return resp
	}
	defer func() {
		if r := recover(); r != nil {
			o.log.Error("rewriting a response panicked", "method", c.Method, "panic", r, "stack", string(debug.Stack()))
			out = jsonrpc.ErrorResponse(resp.ID, jsonrpc.CodeUpstream, errInvalidResult)
		}
	}()
	if c.span != nil {
		ctx = trace.ContextWithSpan(ctx, c.span)
	}
	// The results the proxy reads and extends are read whole (inMemory).
	switch c.Method {
	case "initialize", "server/discover":
		return o.afterInitialize(c, inMemory(resp))
	case "resources/list", "resources/templates/list":
		return o.afterResourcesList(ctx, c, inMemory(resp))
	case "tools/list":
		return o.afterToolsList(c, inMemory(resp))
	case "tools/call", "resources/read":
		return o.offload(ctx, c, resp)
	}
	return resp
}

// unreadable answers a response whose result the proxy must extend but
// cannot read with a CodeUpstream error for the request, and logs why.
func (o *Methods) unreadable(c *Call, resp *jsonrpc.Message, why string) *jsonrpc.Message {
	o.log.Warn("upstream result cannot be rewritten; answering with an error", "method", c.Method, "why", why)
	return jsonrpc.ErrorResponse(resp.ID, jsonrpc.CodeUpstream, errInvalidResult)
}

// afterInitialize notes whether the upstream streams resources, and
// declares what the proxy adds to an initialize or server/discover
// result: the resources capability for its artifact URIs (with stream
// over HTTP; resources/stream is for HTTP only) and, for the artifact
// tools, the tools capability when the upstream has none.
func (o *Methods) afterInitialize(c *Call, resp *jsonrpc.Message) *jsonrpc.Message {
	if resp.Error != nil {
		return resp
	}
	if !isObject(resp.Result) {
		return o.unreadable(c, resp, "the result is not an object")
	}
	o.upstreamStream.Store(string(jsonrpc.Path(resp.Result, "capabilities", "resources", "stream")) == "true")
	resp, ok := o.declare(c, resp)
	if !ok {
		return o.unreadable(c, resp, "capabilities is not an object")
	}
	if o.o.Artifacts == nil {
		return resp
	}
	r, ok := addResourcesCapability(resp.Result, !c.Request.Stdio)
	if !ok {
		return o.unreadable(c, resp, "capabilities or capabilities.resources is not an object")
	}
	if o.toolsOn() && jsonrpc.RawMember(jsonrpc.RawMember(r, "capabilities"), "tools") == nil {
		if withTools, ok := jsonrpc.SetPath(r, []byte(`{}`), "capabilities", "tools"); ok {
			r = withTools
		}
	}
	return resp.WithResult(r)
}

// declare adds what Options.Declare returns for the client of c to the
// capabilities of resp's result; false when they are not an object.
func (o *Methods) declare(c *Call, resp *jsonrpc.Message) (*jsonrpc.Message, bool) {
	if o.o.Declare == nil {
		return resp, true
	}
	add := o.o.Declare(c.client)
	if len(add) == 0 {
		return resp, true
	}
	r := resp.Result
	if caps := jsonrpc.RawMember(r, "capabilities"); caps != nil && !isObject(caps) {
		return resp, false
	}
	for _, name := range slices.Sorted(maps.Keys(add)) {
		if jsonrpc.Path(r, "capabilities", name) != nil {
			continue
		}
		if withIt, ok := jsonrpc.SetPath(r, add[name], "capabilities", name); ok {
			r = withIt
		}
	}
	return resp.WithResult(r), true
}

// afterResourcesList adds to the first page of resources/list the
// caller's artifacts, and to that of resources/templates/list the
// template of the proxy's artifact URIs.
func (o *Methods) afterResourcesList(ctx context.Context, c *Call, resp *jsonrpc.Message) *jsonrpc.Message {
	if c.More || o.o.Artifacts == nil {
		return resp
	}
	key, items := "resourceTemplates", [][]byte{artifactTemplate}
	if c.Method == "resources/list" {
		key, items = "resources", o.listArtifacts(ctx, c.Request)
	}
	r, ok := addToList(resp, key, items, c.Request, c.Method == "resources/list")
	if !ok {
		return o.unreadable(c, resp, "the result or its "+key+" is not what the method returns")
	}
	return r
}

// afterToolsList learns the upstream's tools from a tools/list result
// (their x-mcp-header bindings through Options.LearnTools, their names
// and output schemas), shows each output schema with room for the
// offloader's note, and adds the artifact tools to the first page.
func (o *Methods) afterToolsList(c *Call, resp *jsonrpc.Message) *jsonrpc.Message {
	if resp.Error == nil {
		if !isObject(resp.Result) {
			return o.unreadable(c, resp, "the result is not an object")
		}
		if o.o.LearnTools != nil {
			o.o.LearnTools(resp.Result)
		}
		// One record of the upstream's tools: their names (an artifact
		// tool the upstream lists itself is the upstream's) and output
		// schemas, shown with room for the offloader's note.
		if presented := o.schemas.Present(c.Request.schemaKey(), resp.Result); o.o.Offloader != nil {
			resp = resp.WithResult(presented)
		}
	}
	if c.More || !o.toolsOn() {
		return resp
	}
	r, ok := addToList(resp, "tools", o.toolItems(c.Request), c.Request, false)
	if !ok {
		return o.unreadable(c, resp, "the result's tools is not a list")
	}
	return r
}

// maxInMemory bounds the size of a result inMemory puts back together.
const maxInMemory = 64 << 20

// inMemory returns resp with the values the transport spilled to disk
// put back (a tools/list of 10,000 tools has its array on disk), so that
// the result can be read and extended, and frees the spilled copies. A
// result that would pass maxInMemory stays as it is (and is then refused
// as unreadable).
func inMemory(resp *jsonrpc.Message) *jsonrpc.Message {
	if r, ok := expand(resp.Result); ok {
		return resp.WithResult(r)
	}
	return resp
}

// expand returns the result r with its spilled values put back. It
// returns r itself and false when nothing is spilled, or when the whole
// would pass maxInMemory.
func expand(r []byte) (out []byte, ok bool) {
	n := spill.ExpandedLen(r)
	if n == int64(len(r)) || n > maxInMemory {
		return r, false // nothing spilled (one scan), or too much to hold
	}
	var b bytes.Buffer
	b.Grow(int(n))
	if spill.Expand(&b, r) != nil {
		return r, false
	}
	spill.Release(r) // the copy in memory is the one that goes on
	return b.Bytes(), true
}

// offload rewrites a tools/call or upstream resources/read result. A
// result it cannot rewrite passes unchanged: the result is never lost.
func (o *Methods) offload(ctx context.Context, c *Call, resp *jsonrpc.Message) *jsonrpc.Message {
	if resp.Result == nil || o.o.Offloader == nil {
		return resp
	}
	call := offload.Call{Method: c.Method, Tool: c.Tool, URI: c.URI, Tenant: c.Request.Tenant,
		RequestID: string(resp.ID), Session: c.Request.Session}
	if c.Method == "tools/call" {
		if c.List != nil && jsonrpc.RawMember(resp.Result, "structuredContent") != nil {
			o.EnsureTool(ctx, c.Request, c.Tool, c.List)
		}
		call.Schema, call.SchemaErr = o.schemas.Lookup(c.Request.schemaKey(), c.Tool)
	}
	rw := o.o.Offloader
	if o.o.OffloaderFor != nil {
		if rw = o.o.OffloaderFor(call); rw == nil {
			return resp
		}
	}
	r, stored, err := rw.Rewrite(ctx, call, resp.Result)
	for _, a := range stored {
		o.Remember(c.Request.Tenant, a)
	}
	switch {
	case errors.Is(err, offload.ErrWithheld):
		return jsonrpc.ErrorResponse(resp.ID, jsonrpc.CodeInternalError,
			"the resource is too large to return inline and could not be stored for download; try again later")
	case err != nil:
		o.log.Warn("offload failed; the result passes inline", "method", c.Method, "tool", c.Tool, "err", err)
		return resp
	case len(r) == len(resp.Result) && (len(r) == 0 || &r[0] == &resp.Result[0]):
		// Nothing offloaded (Rewrite returned result itself): the response
		// passes as it is, so that a relay can pass its event on as it came.
		return resp
	case !json.Valid(r):
		o.log.Error("offload produced invalid JSON; the result passes inline", "method", c.Method, "tool", c.Tool)
		return resp
	}
	rw.Spent(resp.Result, r)
	return resp.WithResult(r)
}
