// Package mcptrace traces MCP requests through the proxy: a server span
// per request a client sends, a client span per request sent upstream,
// and the trace context a request carries in params._meta.
//
// Trace context in _meta follows SEP-414 (MCP 2026-07-28) and the
// OpenTelemetry MCP conventions (semantic-conventions-genai,
// docs/gen-ai/mcp.md, "Context propagation"): the unprefixed _meta keys
// traceparent and tracestate, in the W3C Trace Context formats. A server
// span takes the context a request's _meta carries as its parent, else
// the transport's (the HTTP headers), and links the transport's when both
// are present and differ. A request sent upstream carries the client
// span's context in its _meta in the stateless era (2026-07-28), and
// whenever the client's request carried one, which it replaces: the
// upstream's parent is the proxy's span, as with any propagating proxy.
//
// With tracing off (artifact/tracing) every function returns what it was
// given: nothing is read or written.
package mcptrace

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/spillway-dev/spillway/artifact/tracing"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
)

// The _meta keys SEP-414 reserves for W3C trace context.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// Request is what a span says of a request besides its message.
type Request struct {
	Session string // the session-era session, "" for none
	Version string // the protocol revision the request speaks
	// Transport is the network.transport of the peer: TCP (HTTP), Pipe
	// (stdio), "" when the span cannot tell.
	Transport string
	// Meta makes a client span's context go in the request's _meta
	// whatever the era: for an upstream that may have no HTTP header to
	// carry it (a stdio child, a gateway's members).
	Meta   bool
	Header http.Header
	// Upstream names the upstream a client span goes to ("" for the only
	// one).
	Upstream string
}

// FromMeta returns the span context m's params._meta carries
// (traceparent, tracestate); invalid when it has none or a malformed one.
// m comes from any client or upstream: a value that is not a string, or
// not a valid traceparent, is ignored.
func FromMeta(m *jsonrpc.Message) trace.SpanContext {
	meta := jsonrpc.Path(m.Params, "_meta")
	if meta == nil {
		return trace.SpanContext{}
	}
	tp := jsonrpc.StringMember(meta, MetaTraceparent)
	if tp == "" {
		return trace.SpanContext{}
	}
	return tracing.Remote(tp, jsonrpc.StringMember(meta, MetaTracestate))
}

// The values of Request.Transport.
const (
	TCP  = "tcp"
	Pipe = "pipe"
)

// StartServer starts the server span of request m, a client's, and
// returns the context carrying it (ctx and nil with tracing off). Its
// parent is the context m's _meta carries, else rq.Header's traceparent.
// The caller ends the span once the request is answered.
func StartServer(ctx context.Context, rq Request, m *jsonrpc.Message) (context.Context, *tracing.Span) {
	if !tracing.On() {
		return ctx, nil
	}
	var links []trace.Link
	parent := ctx
	if rq.Header != nil {
		parent = tracing.Extract(ctx, rq.Header)
	}
	if sc := FromMeta(m); sc.IsValid() {
		if hc := trace.SpanContextFromContext(parent); hc.IsValid() && hc.TraceID() != sc.TraceID() {
			links = append(links, trace.Link{SpanContext: hc})
		}
		parent = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return tracing.StartLinked(parent, Name(m), trace.SpanKindServer, links, attrs(rq, m)...)
}

// StartClient starts the client span of request m as it goes upstream,
// under ctx's span, and returns the context carrying it with the message
// to send: m with the span's context in its _meta when rq.Meta, the
// stateless era or m's own _meta asks for it (see the package doc), else
// m. With
// tracing off it returns ctx, nil and m. The caller sends the returned
// message, injects the context into the HTTP request's headers
// (tracing.Inject) if there is one, and ends the span with the answer.
func StartClient(ctx context.Context, rq Request, m *jsonrpc.Message) (context.Context, *tracing.Span, *jsonrpc.Message) {
	if !tracing.On() {
		return ctx, nil, m
	}
	ctx, sp := tracing.Start(ctx, Name(m), trace.SpanKindClient, attrs(rq, m)...)
	if rq.Upstream != "" {
		sp.Set(attribute.String(tracing.Upstream, rq.Upstream))
	}
	return ctx, sp, WithMeta(ctx, m, rq.Meta || mcpheader.Stateless(rq.Version))
}

// WithMeta returns m with ctx's span context in params._meta (traceparent,
// and tracestate when there is one), replacing what was there; m itself
// when ctx has no valid span context, m's params are not an object, or
// always is false and m's _meta carries no traceparent.
func WithMeta(ctx context.Context, m *jsonrpc.Message, always bool) *jsonrpc.Message {
	if !m.IsRequest() && !m.IsNotification() {
		return m
	}
	if !always && jsonrpc.Meta(m, MetaTraceparent) == nil {
		return m
	}
	tp, ts := tracing.Fields(ctx)
	if tp == "" {
		return m
	}
	out := withString(m, MetaTraceparent, tp)
	switch {
	case ts != "":
		out = withString(out, MetaTracestate, ts)
	case jsonrpc.Meta(out, MetaTracestate) != nil:
		// The client's state went with its parent: the span's own (none)
		// replaces it.
		out = withRaw(out, MetaTracestate, []byte(`""`))
	}
	return out
}

// withString returns m with params._meta[key] set to the string v.
func withString(m *jsonrpc.Message, key, v string) *jsonrpc.Message {
	b, _ := json.Marshal(v) // a W3C tracestate value may hold " or \
	return withRaw(m, key, b)
}

func withRaw(m *jsonrpc.Message, key string, v []byte) *jsonrpc.Message {
	if m.Params == nil {
		return m.WithParams([]byte(`{"_meta":{"` + key + `":` + string(v) + `}}`))
	}
	p, ok := jsonrpc.SetPath(m.Params, v, "_meta", key)
	if !ok {
		return m
	}
	return m.WithParams(p)
}

// Name is a span's name for m: "{mcp.method.name} {target}", the target
// a tools/call's or prompts/get's name (low-cardinality), else the method.
func Name(m *jsonrpc.Message) string {
	switch m.Method {
	case "tools/call", "prompts/get":
		if n := jsonrpc.StringMember(m.Params, "name"); n != "" {
			return m.Method + " " + n
		}
	}
	return m.Method
}

// attrs are the conventions' attributes of request m.
func attrs(rq Request, m *jsonrpc.Message) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 9)
	a = append(a, attribute.String(tracing.MCPMethod, m.Method))
	if rq.Transport != "" {
		a = append(a, attribute.String(tracing.NetworkTransport, rq.Transport))
	}
	if rq.Transport == TCP {
		a = append(a, attribute.String(tracing.NetworkProtocol, "http"))
	}
	if id := requestID(m.ID); id != "" {
		a = append(a, attribute.String(tracing.JSONRPCRequestID, id))
	}
	if rq.Session != "" {
		a = append(a, attribute.String(tracing.MCPSession, rq.Session))
	}
	v := rq.Version
	if v == "" {
		v = jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion)
	}
	if v != "" {
		a = append(a, attribute.String(tracing.MCPProtocolVersion, v))
	}
	switch m.Method {
	case "tools/call":
		a = append(a, attribute.String(tracing.GenAIOperation, tracing.OperationTool),
			attribute.String(tracing.GenAITool, jsonrpc.StringMember(m.Params, "name")))
	case "prompts/get":
		a = append(a, attribute.String("gen_ai.prompt.name", jsonrpc.StringMember(m.Params, "name")))
	}
	return a
}

// requestID is a JSON-RPC id as the conventions spell it: a string's
// value, a number's digits; "" for null or none.
func requestID(id []byte) string {
	if len(id) == 0 || string(id) == "null" {
		return ""
	}
	if id[0] == '"' {
		if s, err := jsonrpc.Unquote(id); err == nil {
			return s
		}
	}
	return string(id)
}

// EndResponse ends sp with resp, the answer to its request: a JSON-RPC
// error sets error.type and rpc.response.status_code to its code, a
// tools/call result with isError error.type "tool_error". nil resp (the
// request got no answer) ends it as it is.
func EndResponse(sp *tracing.Span, resp *jsonrpc.Message) {
	if sp == nil {
		return
	}
	if resp != nil && resp.Error != nil {
		code := strconv.Itoa(resp.ErrorCode())
		sp.Set(attribute.String(tracing.RPCStatusCode, code))
		sp.Fail(code, jsonrpc.StringMember(resp.Error, "message"))
	} else if resp != nil && string(jsonrpc.RawMember(resp.Result, "isError")) == "true" {
		sp.Fail("tool_error", "the tool reported an error")
	}
	sp.End(nil)
}
