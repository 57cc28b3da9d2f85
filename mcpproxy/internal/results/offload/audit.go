package offload

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/policy/decision"
)

// provenance is the call that produced what w stores, kept with each
// artifact (artifact.Call) for the audit trail: the upstream
// (Options.Server), the tool, the request and session of w's Call, and
// the span of ctx when the request is traced. Bounded as stores keep it.
func (w *resultWriter) provenance(ctx context.Context) artifact.Call {
	c := artifact.Call{Upstream: w.f.o.Server, Tool: w.c.Tool, RequestID: w.c.RequestID, Session: w.c.Session}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		c.TraceID, c.SpanID = sc.TraceID().String(), sc.SpanID().String()
	}
	return c.Bounded()
}

// recording returns ctx carrying a decision recorder when the store
// keeps an audit trail (the recorder names the decision made under ctx
// in the audit line), and ctx itself with a nil recorder otherwise.
func (f *Rewriter) recording(ctx context.Context) (context.Context, *decision.Recorder) {
	if f.svc.Audit == nil {
		return ctx, nil
	}
	return decision.WithRecorder(ctx)
}
