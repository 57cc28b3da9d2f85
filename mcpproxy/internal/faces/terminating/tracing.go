package terminating

import (
	"context"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"

	"github.com/spillway-dev/spillway/artifact/tracing"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcptrace"
)

// The face's tracing (see mcptrace): a POST that carries one request gets
// a server span for as long as the POST lasts, and the request going
// upstream a client span under it, ended with the POST, whose context the
// request carries in its _meta (a stdio child has no headers). A batch,
// a notification or a GET is not traced.

// tracedKey is the context key of a traced POST's *traced.
type tracedKey struct{}

// traced is what a traced POST ends once answered: the client span of its
// request, once sent upstream.
type traced struct {
	mu       sync.Mutex
	upstream *tracing.Span
}

// traceRequest starts the server span of a POST holding msgs when it
// holds one request, and returns r carrying it with the function that
// ends it, and the client span under it, once the POST is answered (r
// and a no-op otherwise).
func traceRequest(r *http.Request, rq ownmethods.Request, msgs []*jsonrpc.Message) (*http.Request, func()) {
	if !tracing.On() || len(msgs) != 1 || !msgs[0].IsRequest() {
		return r, func() {}
	}
	info := mcptrace.Request{Session: rq.Session, Version: rq.Version, Header: r.Header, Transport: mcptrace.TCP}
	tr := &traced{}
	ctx, sp := mcptrace.StartServer(context.WithValue(r.Context(), tracedKey{}, tr), info, msgs[0])
	if rq.Tenant != "" {
		sp.Set(attribute.String(tracing.Tenant, rq.Tenant))
	}
	return r.WithContext(ctx), func() {
		tr.mu.Lock()
		tr.upstream.End(nil)
		tr.upstream = nil
		tr.mu.Unlock()
		sp.End(nil)
	}
}

// traceUpstream starts the client span of request m going upstream, under
// the server span of ctx's traced POST (none without one), and returns
// the context carrying it with the message to send. The span ends with
// the POST (traceRequest).
func traceUpstream(ctx context.Context, rq ownmethods.Request, m *jsonrpc.Message) (context.Context, *jsonrpc.Message) {
	if !tracing.On() {
		return ctx, m
	}
	tr, ok := ctx.Value(tracedKey{}).(*traced)
	if !ok {
		return ctx, m
	}
	ctx, sp, m := mcptrace.StartClient(ctx, mcptrace.Request{Session: rq.Session, Version: rq.Version, Meta: true}, m)
	tr.mu.Lock()
	tr.upstream.End(nil) // none: a POST holds one traced request
	tr.upstream = sp
	tr.mu.Unlock()
	return ctx, m
}
