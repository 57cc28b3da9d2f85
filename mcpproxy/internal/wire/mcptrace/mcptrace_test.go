package mcptrace

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/spillway-dev/spillway/artifact/tracing"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// traced turns tracing on for the test, recording the spans that end.
func traced(t testing.TB) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	tracing.Enable(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { tracing.Enable(nil) })
	return rec
}

const (
	metaParent   = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	headerParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// A server span's parent is the context _meta carries, the transport's
// linked; without _meta, the header's.
func TestStartServerParent(t *testing.T) {
	rec := traced(t)
	last := func() sdktrace.ReadOnlySpan { e := rec.Ended(); return e[len(e)-1] }
	m := jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"q","_meta":{"traceparent":"` + metaParent + `"}}}`)
	h := http.Header{"Traceparent": {headerParent}}
	_, sp := StartServer(context.Background(), Request{Header: h, Session: "s1"}, m)
	sp.End(nil)
	ro := last()
	if got := ro.Parent().SpanID().String(); got != "b7ad6b7169203331" {
		t.Errorf("parent %s, want _meta's b7ad6b7169203331", got)
	}
	if l := ro.Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("links %v, want the header's context", l)
	}
	if ro.Name() != "tools/call q" || ro.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q kind %v", ro.Name(), ro.SpanKind())
	}
	plain := jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	_, sp = StartServer(context.Background(), Request{Header: h}, plain)
	sp.End(nil)
	ro = last()
	if got := ro.Parent().SpanID().String(); got != "00f067aa0ba902b7" || len(ro.Links()) != 0 {
		t.Errorf("without _meta: parent %s links %v, want the header's", got, ro.Links())
	}
}

// The client span's context replaces a client's _meta context, and is
// added in the stateless era; a session-era request without one is sent
// as it came.
func TestStartClientMeta(t *testing.T) {
	traced(t)
	for _, tt := range []struct {
		name, msg, version string
		wantMeta           bool
	}{
		{"client's replaced", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"q","_meta":{"traceparent":"` + metaParent + `","tracestate":"a=b","k":1}}}`, "2025-11-25", true},
		{"stateless added", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"q"}}`, "2026-07-28", true},
		{"stateless, no params", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "2026-07-28", true},
		{"session era untouched", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"q"}}`, "2025-11-25", false},
		{"params not an object", `{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}`, "2026-07-28", false},
	} {
		m := jsonrpc.MustDecode(tt.msg)
		ctx, sp, out := StartClient(context.Background(), Request{Version: tt.version}, m)
		sc := trace.SpanContextFromContext(ctx)
		sp.End(nil)
		if !tt.wantMeta {
			if out != m {
				t.Errorf("%s: sent %s, want the request as it came", tt.name, out.Raw)
			}
			continue
		}
		if got := FromMeta(out); got.SpanID() != sc.SpanID() || got.TraceID() != sc.TraceID() {
			t.Errorf("%s: _meta carries %v, want the client span %v", tt.name, got, sc)
		}
		if ts := jsonrpc.MetaString(out, MetaTracestate); ts != "" && ts != "a=b" {
			t.Errorf("%s: tracestate %q", tt.name, ts)
		}
		if !json.Valid(out.Raw) || (jsonrpc.Meta(m, "k") != nil && string(jsonrpc.Meta(out, "k")) != "1") {
			t.Errorf("%s: sent %s", tt.name, out.Raw)
		}
	}
}

// With tracing off nothing is started, read or written.
func TestOff(t *testing.T) {
	m := jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"q","_meta":{"traceparent":"` + metaParent + `"}}}`)
	ctx, sp := StartServer(context.Background(), Request{}, m)
	if sp != nil || ctx != context.Background() {
		t.Error("a server span with tracing off")
	}
	if _, sp, out := StartClient(ctx, Request{Version: "2026-07-28"}, m); sp != nil || out != m {
		t.Error("a client span, or a request changed, with tracing off")
	}
}

// FromMeta reads what any client or upstream sent: it never panics, and
// what it accepts is a valid context that WithMeta writes back as it was
// read, into a message that stays valid JSON.
func FuzzFromMeta(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"` + metaParent + `","tracestate":"congo=t61rcWkgMzE"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"00-00000000000000000000000000000000-b7ad6b7169203331-01"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":1,"tracestate":["x"]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra","tracestate":"a=\"\\\\"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[]}`,
		`{"jsonrpc":"2.0","id":1,"method":"m"}`,
	} {
		f.Add([]byte(s))
	}
	traced(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return
		}
		sc := FromMeta(m)
		if !sc.IsValid() {
			return
		}
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
		out := WithMeta(ctx, m, true)
		if !json.Valid(out.Raw) {
			t.Fatalf("WithMeta made invalid JSON: %s", out.Raw)
		}
		if got := FromMeta(out); !got.Equal(sc.WithRemote(true)) && !got.Equal(sc) {
			t.Fatalf("read back %v, want %v", got, sc)
		}
	})
}
