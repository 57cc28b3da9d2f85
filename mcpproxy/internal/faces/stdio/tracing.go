package stdio

import (
	"context"
	"sync"

	"github.com/spillway-dev/spillway/artifact/tracing"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcptrace"
)

// The face's tracing (see mcptrace): each request of the client gets a
// server span, its parent the context the request's _meta carries (stdio
// has no headers), and its trip upstream a client span under it, whose
// context the request carries in its _meta. Both end once the response is
// written to the client (or the face ends).

// inflight holds the spans of the traced requests not yet answered, by
// their id's jsonrpc.Key. The zero value is ready; it is safe for
// concurrent use.
type inflight struct {
	mu    sync.Mutex
	spans map[string]*requestSpans
}

type requestSpans struct{ server, upstream *tracing.Span }

// traceRequest starts the server span of the client's request m and
// returns the context carrying it (ctx with tracing off, or when a
// request of the same id is still in flight: the mux refuses it).
func (f *Face) traceRequest(ctx context.Context, m *jsonrpc.Message) context.Context {
	if !tracing.On() {
		return ctx
	}
	key := jsonrpc.Key(m.ID)
	f.traces.mu.Lock()
	defer f.traces.mu.Unlock()
	if f.traces.spans[key] != nil {
		return ctx
	}
	ctx, sp := mcptrace.StartServer(ctx, mcptrace.Request{Transport: mcptrace.Pipe}, m)
	if f.traces.spans == nil {
		f.traces.spans = map[string]*requestSpans{}
	}
	f.traces.spans[key] = &requestSpans{server: sp}
	return ctx
}

// traceUpstream starts the client span of request m going upstream under
// its server span, and returns the context carrying it with the message
// to send (the span's context in its _meta). ctx and m when m is not
// traced.
func (f *Face) traceUpstream(ctx context.Context, m *jsonrpc.Message) (context.Context, *jsonrpc.Message) {
	if tracing.Recording(ctx) == nil {
		return ctx, m
	}
	ctx, sp, sent := mcptrace.StartClient(ctx, mcptrace.Request{Meta: true}, m)
	f.traces.mu.Lock()
	if rs := f.traces.spans[jsonrpc.Key(m.ID)]; rs != nil {
		rs.upstream = sp
		sp = nil
	}
	f.traces.mu.Unlock()
	sp.End(nil) // answered already: nothing to wait for
	return ctx, sent
}

// traceAnswered ends the spans of the request m answers, once written.
func (f *Face) traceAnswered(m *jsonrpc.Message) {
	if !tracing.On() || !m.IsResponse() {
		return
	}
	key := jsonrpc.Key(m.ID)
	f.traces.mu.Lock()
	rs := f.traces.spans[key]
	delete(f.traces.spans, key)
	f.traces.mu.Unlock()
	if rs != nil {
		mcptrace.EndResponse(rs.upstream, m)
		mcptrace.EndResponse(rs.server, m)
	}
}

// traceEnded ends the spans of the requests still unanswered when the
// face ends.
func (f *Face) traceEnded() {
	f.traces.mu.Lock()
	spans := f.traces.spans
	f.traces.spans = nil
	f.traces.mu.Unlock()
	for _, rs := range spans {
		rs.upstream.End(nil)
		rs.server.Fail("unanswered", "the client's session ended first")
		rs.server.End(nil)
	}
}
