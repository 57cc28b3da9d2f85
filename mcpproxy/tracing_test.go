package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/spillway-dev/spillway/artifact/tracing"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// Issue 42: in front of a stdio child, the terminating face gives a POST's
// request a server span under the client's traceparent, and its trip to
// the child a client span under it, whose context the child receives in
// the request's _meta (a pipe has no headers).
func TestTracesThroughAStdioChild(t *testing.T) {
	rec := traceInMemory(t)
	p := traceEchoProxy(t)
	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},` + statelessMeta + `}}`
	resp := post(t, p, body, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo", "Traceparent": client})
	if resp.Code != http.StatusOK {
		t.Fatalf("tools/call = %d %s", resp.Code, resp.Body)
	}
	b := resp.Body.String()
	if i := strings.Index(b, "{"); i >= 0 {
		b = b[i:]
		b = b[:strings.LastIndex(b, "}")+1]
	}
	checkTraceEcho(t, rec, b, "00f067aa0ba902b7")
}

// Over the stdio face the server span's parent is the context the
// request's _meta carries, and the child receives the client span's in
// place of the client's.
func TestTracesThroughTheStdioFace(t *testing.T) {
	rec := traceInMemory(t)
	p := traceEchoProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, inR, outW); outW.Close() }()
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`)
	sc := bufio.NewScanner(outR)
	if !sc.Scan() {
		t.Fatalf("no answer: %v", sc.Err())
	}
	line := sc.Text()
	inW.Close()
	<-done
	checkTraceEcho(t, rec, line, "00f067aa0ba902b7")
}

// traceInMemory turns tracing on for the test, its spans recorded.
func traceInMemory(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	tracing.Enable(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { tracing.Enable(nil) })
	return rec
}

// traceEchoProxy is a proxy in front of traceEcho, closed when t ends.
func traceEchoProxy(t *testing.T) *mcpproxy.Proxy {
	p, err := mcpproxy.New(mcpproxy.Options{StrictEras: true, Upstream: traceEcho})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// traceEcho is a stdio child that lists the tool echo and answers its
// calls with the traceparent the request's _meta held.
var traceEcho = &mcpproxy.CommandUpstream{Command: "sh", Args: []string{"-c", `while read l; do id=$(echo "$l" | sed 's/.*"id":\([0-9]*\).*/\1/')
		tp=$(echo "$l" | sed -n 's/.*"traceparent":"\([^"]*\)".*/\1/p')
		case "$l" in
		*'"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}\n' "$id";;
		*'"tools/call"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}\n' "$id" "$tp";;
		esac; done`}}

// checkTraceEcho checks the spans of one tools/call of echo answered by
// answer, its server span a child of parent (the client's span id): the
// client span is the server span's child, and the child received its
// context.
func checkTraceEcho(t *testing.T, rec *tracetest.SpanRecorder, answer, parent string) {
	t.Helper()
	var got struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(answer), &got); err != nil || len(got.Result.Content) != 1 {
		t.Fatalf("answer %q: %v", answer, err)
	}
	var server, call sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.SpanKind() {
		case trace.SpanKindServer:
			server = s
		case trace.SpanKindClient:
			call = s
		}
	}
	if server == nil || call == nil {
		for _, s := range rec.Ended() {
			t.Logf("span %q kind %v", s.Name(), s.SpanKind())
		}
		t.Fatalf("spans ended: %d, want a server and a client span", len(rec.Ended()))
	}
	if server.Name() != "tools/call echo" || server.Parent().SpanID().String() != parent ||
		server.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("server span %q parent %v, want tools/call echo under the client's", server.Name(), server.Parent())
	}
	if call.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("the client span's parent is %v, want the server span", call.Parent().SpanID())
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + call.SpanContext().SpanID().String() + "-01"
	if txt := got.Result.Content[0].Text; txt != want {
		t.Errorf("the child's _meta.traceparent = %q, want %q", txt, want)
	}
}
