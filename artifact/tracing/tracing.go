// Package tracing is Spillway's OpenTelemetry tracing: the one tracer
// every part starts its spans from, off until the command turns it on.
//
// Off (the zero state, and after Enable(nil)) every Start function returns
// its context unchanged and a nil *Span, whose methods do nothing: a call
// site pays one atomic load and a nil check. On, spans go to the
// TracerProvider given to Enable, and trace context crosses HTTP in the
// W3C traceparent and tracestate headers.
//
// Attribute names follow the OpenTelemetry semantic conventions for MCP
// (open-telemetry/semantic-conventions-genai, docs/gen-ai/mcp.md, status
// Development): a span per MCP request named "{mcp.method.name} {target}"
// with mcp.method.name, mcp.session.id, mcp.protocol.version,
// jsonrpc.request.id, gen_ai.tool.name, gen_ai.operation.name
// ("execute_tool" for tools/call), network.transport ("tcp" over HTTP,
// "pipe" over stdio) and error.type. Spillway's own steps (offload, policy
// decisions, fetches) use the spillway.* names below.
//
// Everything here is safe for concurrent use.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute names from the OpenTelemetry semantic conventions (MCP, GenAI,
// JSON-RPC, network, HTTP, error).
const (
	MCPMethod          = "mcp.method.name"
	MCPSession         = "mcp.session.id"
	MCPProtocolVersion = "mcp.protocol.version"
	MCPResourceURI     = "mcp.resource.uri"
	JSONRPCRequestID   = "jsonrpc.request.id"
	RPCStatusCode      = "rpc.response.status_code"
	GenAITool          = "gen_ai.tool.name"
	GenAIOperation     = "gen_ai.operation.name"
	NetworkTransport   = "network.transport"
	NetworkProtocol    = "network.protocol.name"
	ErrorType          = "error.type"
	HTTPMethod         = "http.request.method"
	HTTPStatus         = "http.response.status_code"
	URLPath            = "url.path"
	ServerAddress      = "server.address"
)

// Spillway's own attribute names, for the steps no convention covers.
const (
	ArtifactID    = "spillway.artifact.id"
	ArtifactSize  = "spillway.artifact.size"
	ArtifactKind  = "spillway.artifact.kind"
	Offloaded     = "spillway.offloaded"
	FetchBytes    = "spillway.fetch.bytes"
	Tenant        = "spillway.tenant"
	Upstream      = "spillway.upstream"
	PolicyPoint   = "spillway.policy.point"
	PolicyResult  = "spillway.policy.result"
	OperationTool = "execute_tool" // gen_ai.operation.name of a tools/call
)

// The instrumentation scope spans are reported under.
const scope = "github.com/spillway-dev/spillway"

// tracer is the tracer spans start from; nil while tracing is off.
var tracer atomic.Pointer[trace.Tracer]

// propagator reads and writes W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// Enable turns tracing on with tp, or off with nil. The command calls it
// once, before it serves; spans started before it are not recorded.
func Enable(tp trace.TracerProvider) {
	if tp == nil {
		tracer.Store(nil)
		return
	}
	t := tp.Tracer(scope)
	tracer.Store(&t)
}

// On reports whether tracing is on.
func On() bool { return tracer.Load() != nil }

// Span is a started span. A nil *Span (tracing off, or a child span with
// no parent) is valid: its methods do nothing.
type Span struct{ s trace.Span }

// Start starts a span named name of kind as a child of ctx's span (a root
// span when ctx has none) and returns the context carrying it; with
// tracing off it returns ctx and nil.
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, *Span) {
	t := tracer.Load()
	if t == nil {
		return ctx, nil
	}
	ctx, s := (*t).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return ctx, &Span{s}
}

// StartLinked is Start with links to other spans (a transport's context
// beside the one a message carried, as the MCP conventions advise).
func StartLinked(ctx context.Context, name string, kind trace.SpanKind, links []trace.Link, attrs ...attribute.KeyValue) (context.Context, *Span) {
	t := tracer.Load()
	if t == nil {
		return ctx, nil
	}
	ctx, s := (*t).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...), trace.WithLinks(links...))
	return ctx, &Span{s}
}

// StartChild starts an internal span under ctx's span, and only when ctx
// carries a recording one: Spillway's own steps are parts of a request's
// trace, never traces of their own.
func StartChild(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, *Span) {
	if tracer.Load() == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return Start(ctx, name, trace.SpanKindInternal, attrs...)
}

// Record records an internal span under ctx's recording span (none
// without one) that began at start and ends now: for a step timed by its
// own code, such as a policy decision, whose spans would otherwise wrap
// every return path.
func Record(ctx context.Context, name string, start time.Time, err error, attrs ...attribute.KeyValue) {
	t := tracer.Load()
	if t == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	_, s := (*t).Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	(&Span{s}).End(err)
}

// Recording returns ctx's span when tracing is on and it records (a span
// begun and not yet ended), else nil: for a step that runs later under
// another context (a response rewritten on a session's worker) to carry
// the request's span to, with trace.ContextWithSpan.
func Recording(ctx context.Context) trace.Span {
	if tracer.Load() == nil {
		return nil
	}
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		return s
	}
	return nil
}

// Set adds attributes to s.
func (s *Span) Set(attrs ...attribute.KeyValue) {
	if s != nil {
		s.s.SetAttributes(attrs...)
	}
}

// SetName renames s (a name known only once the request is read).
func (s *Span) SetName(name string) {
	if s != nil {
		s.s.SetName(name)
	}
}

// Fail marks s failed: errType becomes error.type and msg the status
// description. The message must carry no secret.
func (s *Span) Fail(errType, msg string) {
	if s != nil {
		s.s.SetAttributes(attribute.String(ErrorType, errType))
		s.s.SetStatus(codes.Error, msg)
	}
}

// End ends s, failed with err's type and message when err is not nil.
// Errors reaching a span must carry no secret (the callers' errors are
// those they log).
func (s *Span) End(err error) {
	if s == nil {
		return
	}
	if err != nil {
		s.s.SetAttributes(attribute.String(ErrorType, errType(err)))
		s.s.SetStatus(codes.Error, err.Error())
	}
	s.s.End()
}

// errType is err's low-cardinality class: its Go type.
func errType(err error) string {
	t := strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
	if t == "" {
		return "_OTHER"
	}
	return t
}

// Extract returns ctx carrying the remote span context of h's traceparent
// (and tracestate); ctx unchanged when h has none or a malformed one.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject writes ctx's span context into h as traceparent and tracestate,
// replacing any there; nothing with tracing off or without a valid span
// context (what the client sent then passes as it came).
func Inject(ctx context.Context, h http.Header) {
	if !On() || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	h.Del("Tracestate") // the span's own state replaces the client's
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Remote returns the span context a traceparent and tracestate describe;
// an invalid one when traceparent is malformed.
func Remote(traceparent, tracestate string) trace.SpanContext {
	c := mapCarrier{"traceparent": traceparent, "tracestate": tracestate}
	return trace.SpanContextFromContext(propagator.Extract(context.Background(), c))
}

// Fields returns the traceparent and tracestate of ctx's span context;
// "" for both without a valid one.
func Fields(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := mapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// mapCarrier is a TextMapCarrier over a map.
type mapCarrier map[string]string

func (c mapCarrier) Get(k string) string { return c[k] }
func (c mapCarrier) Set(k, v string)     { c[k] = v }
func (c mapCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Propagator is the W3C trace context propagator the command installs
// globally.
func Propagator() propagation.TextMapPropagator { return propagator }
