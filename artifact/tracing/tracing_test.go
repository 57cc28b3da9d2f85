package tracing

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const clientParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// Off, nothing is started and no header is written: the client's
// traceparent passes as it came.
func TestOff(t *testing.T) {
	ctx := Extract(context.Background(), http.Header{"Traceparent": {clientParent}})
	if _, sp := Start(ctx, "x", trace.SpanKindServer); sp != nil {
		t.Fatal("a span with tracing off")
	}
	h := http.Header{"Traceparent": {clientParent}, "Tracestate": {"a=b"}}
	Inject(ctx, h)
	if h.Get("Traceparent") != clientParent || h.Get("Tracestate") != "a=b" {
		t.Errorf("headers changed with tracing off: %v", h)
	}
	var sp *Span // a nil span's methods do nothing
	sp.Set()
	sp.Fail("x", "y")
	sp.End(errors.New("e"))
}

// On, a span continues the client's trace, its context replaces the
// client's in the headers, and a step recorded after the fact is its
// child; a step without a span to hang from is not recorded.
func TestOn(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	Enable(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { Enable(nil) })
	Record(context.Background(), "orphan", time.Now(), nil)
	if _, sp := StartChild(context.Background(), "orphan"); sp != nil {
		t.Error("a child span without a parent")
	}
	ctx := Extract(context.Background(), http.Header{"Traceparent": {clientParent}, "Tracestate": {"a=b"}})
	ctx, sp := Start(ctx, "server", trace.SpanKindServer)
	Record(ctx, "decision", time.Now().Add(-time.Millisecond), errors.New("denied"))
	h := http.Header{"Traceparent": {clientParent}, "Tracestate": {"stale=1"}}
	Inject(ctx, h)
	sc := trace.SpanContextFromContext(ctx)
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; h.Get("Traceparent") != want || h.Get("Tracestate") != "a=b" {
		t.Errorf("injected %v, want traceparent %s and the trace's tracestate", h, want)
	}
	sp.End(nil)
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "decision" || ended[0].Parent().SpanID() != sc.SpanID() {
		t.Fatalf("ended %d spans; want the decision under the server span, nothing orphaned", len(ended))
	}
	if ended[0].Status().Description != "denied" || ended[1].Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("decision status %v; server parent %v", ended[0].Status(), ended[1].Parent().SpanID())
	}
}
