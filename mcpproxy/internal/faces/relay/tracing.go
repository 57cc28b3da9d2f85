package relay

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"

	"github.com/spillway-dev/spillway/artifact/tracing"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcptrace"
)

// The relay's tracing (see mcptrace): a POST that carries one request
// gets a server span, and its trip upstream a client span whose context
// the upstream receives in the traceparent header (and in _meta, see
// mcptrace.StartClient). A batch, a notification or a GET is not traced.
// With tracing off the client's traceparent passes as it came
// (requestHeader).

// traceRequest starts the server span of a POST holding msgs, when it
// holds one request, and notes that request in ex; it returns the context
// carrying the span (ctx itself otherwise).
func traceRequest(ctx context.Context, r *http.Request, rq ownmethods.Request, msgs []*jsonrpc.Message, batch bool, ex *exchange) context.Context {
	if !tracing.On() || batch || len(msgs) != 1 || !msgs[0].IsRequest() {
		return ctx
	}
	ex.traced = msgs[0]
	ctx, ex.span = mcptrace.StartServer(ctx, traceInfo(rq, r.Header), msgs[0])
	if rq.Tenant != "" {
		ex.span.Set(attribute.String(tracing.Tenant, rq.Tenant))
	}
	return ctx
}

// traceUpstream starts the client span of ex's traced request going
// upstream under ctx's span, and returns the context carrying it with the
// body to send (ex.body, or the request with the span's context in its
// _meta). ctx and ex.body without a traced request.
func traceUpstream(ctx context.Context, rq ownmethods.Request, ex *exchange) (context.Context, *tracing.Span, []byte) {
	if ex.traced == nil {
		return ctx, nil, ex.body
	}
	ctx, sp, m := mcptrace.StartClient(ctx, traceInfo(rq, nil), ex.traced)
	if m == ex.traced {
		return ctx, sp, ex.body // the client's bytes, as they came
	}
	return ctx, sp, m.Raw
}

// endUpstream ends the client span sp with the upstream's answer: an
// HTTP status over 399 or a failed round trip fails it.
func endUpstream(sp *tracing.Span, resp *http.Response, err error) {
	if sp == nil {
		return
	}
	switch {
	case err != nil:
		sp.Fail("transport", "upstream unreachable")
	case resp != nil:
		sp.Set(attribute.Int(tracing.HTTPStatus, resp.StatusCode))
		if resp.StatusCode >= 400 {
			sp.Fail(strconv.Itoa(resp.StatusCode), http.StatusText(resp.StatusCode))
		}
	}
	sp.End(nil)
}

func traceInfo(rq ownmethods.Request, h http.Header) mcptrace.Request {
	return mcptrace.Request{Session: rq.Session, Version: rq.Version, Header: h, Transport: mcptrace.TCP}
}
