package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it keeps every
// span a POST to /v1/traces carries (protobuf).
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	service string // the last service.name seen
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var req collectortracepb.ExportTraceServiceRequest
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || err != nil || proto.Unmarshal(b, &req) != nil {
			t.Errorf("the receiver got %s %s (%v)", r.Method, r.URL.Path, err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					rc.service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				rc.spans = append(rc.spans, ss.GetSpans()...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&collectortracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// waitFor returns the spans received once ok says they are complete,
// failing t after 10 s.
func (rc *otlpReceiver) waitFor(t *testing.T, what string, ok func([]*tracepb.Span) bool) []*tracepb.Span {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rc.mu.Lock()
		spans := append([]*tracepb.Span(nil), rc.spans...)
		rc.mu.Unlock()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			for _, s := range spans {
				t.Logf("span %q kind %v trace %x id %x parent %x", s.GetName(), s.GetKind(), s.GetTraceId(), s.GetSpanId(), s.GetParentSpanId())
			}
			t.Fatalf("never received %s", what)
		}
	}
}

// upstreamSeen is what the recording proxy in front of bigtool saw of one
// POST: its traceparent header and body.
type upstreamSeen struct {
	traceparent string
	body        []byte
}

// tracedUpstream runs bigtool over Streamable HTTP behind a reverse
// proxy that records each POST; it returns the proxy's /mcp URL and the
// POSTs seen so far.
func tracedUpstream(t *testing.T) (string, func() []upstreamSeen) {
	t.Helper()
	addr := rsFreeAddr(t)
	cmd := exec.Command(bigtoolBin(t), "-http", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListening(t, addr)
	var mu sync.Mutex
	var seen []upstreamSeen
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	rp.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			mu.Lock()
			seen = append(seen, upstreamSeen{r.Header.Get("Traceparent"), b})
			mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", func() []upstreamSeen {
		mu.Lock()
		defer mu.Unlock()
		return append([]upstreamSeen(nil), seen...)
	}
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s", addr)
		}
	}
}

// startTracedSpillway runs the real binary in front of upstream with the
// OTEL_* variables otel (none: tracing off) and returns its base URL and
// /mcp token.
func startTracedSpillway(t *testing.T, upstream string, otel ...string) (base, tok string) {
	t.Helper()
	data, addr := t.TempDir(), rsFreeAddr(t)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	startBinary(t, append(env, otel...), "serve", "--listen", addr, "--data", data, "--log-level", "warn", "--upstream-url", upstream)
	waitListening(t, addr)
	return "http://" + addr, mcpToken(t, data)
}

// tracedCall posts one JSON-RPC request to base/mcp with headers hdr and
// returns the response body.
func tracedCall(t *testing.T, base, tok string, hdr map[string]string, body string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %.80s = %d %.300s", body, resp.StatusCode, b)
	}
	return b
}

// sessionOpen initializes a session-era session and returns its id.
func sessionOpen(t *testing.T, base, tok string) string {
	t.Helper()
	resp := mcpPost(t, base+"/mcp", tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	mcpPost(t, base+"/mcp", tok, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	return sid
}

const bigCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"query","arguments":{"rows":2000}}}`

// A client's traceparent (trace 4bf9…, span 00f0…) in the tests below.
const (
	clientTrace       = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan        = "00f067aa0ba902b7"
	clientTraceparent = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// Issue 42: with OTEL_EXPORTER_OTLP_ENDPOINT set, one offloaded tools/call
// is one trace: the server span of the request, the client span of the
// upstream call under it, the offload (the store put) and its policy
// decisions, all of one trace id with the right parents; the upstream
// received a traceparent of that trace whose parent is the client span.
// A fetch of the link is a server span with the artifact id, its status
// and bytes, and no token.
func TestTracesOfAnOffloadedCall(t *testing.T) {
	rc := newOTLPReceiver(t)
	upstream, seen := tracedUpstream(t)
	base, tok := startTracedSpillway(t, upstream, "OTEL_EXPORTER_OTLP_ENDPOINT="+rc.URL, "OTEL_BSP_SCHEDULE_DELAY=50")
	sid := sessionOpen(t, base, tok)
	body := tracedCall(t, base, tok, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}, bigCall)
	m := httpURLField.FindSubmatch(body)
	if m == nil {
		t.Fatalf("the call was not offloaded: %.300s", body)
	}
	spans := rc.waitFor(t, "the call's spans", func(s []*tracepb.Span) bool {
		return named(s, "tools/call query", tracepb.Span_SPAN_KIND_CLIENT) != nil && named(s, "spillway.policy mint", 0) != nil
	})
	server := named(spans, "tools/call query", tracepb.Span_SPAN_KIND_SERVER)
	client := named(spans, "tools/call query", tracepb.Span_SPAN_KIND_CLIENT)
	offload := named(spans, "spillway.offload text", 0)
	decision := named(spans, "spillway.policy offload", 0)
	if server == nil || client == nil || offload == nil || decision == nil {
		t.Fatalf("spans: server %v, client %v, offload %v, offload decision %v", server != nil, client != nil, offload != nil, decision != nil)
	}
	if len(server.GetParentSpanId()) != 0 {
		t.Errorf("the server span has a parent (%x) though the client sent none", server.GetParentSpanId())
	}
	for _, c := range []struct {
		s      *tracepb.Span
		parent *tracepb.Span
	}{{client, server}, {offload, server}, {decision, offload}} {
		if !bytes.Equal(c.s.GetTraceId(), server.GetTraceId()) || !bytes.Equal(c.s.GetParentSpanId(), c.parent.GetSpanId()) {
			t.Errorf("%q (trace %x, parent %x): want trace %x, parent %q %x", c.s.GetName(), c.s.GetTraceId(), c.s.GetParentSpanId(), server.GetTraceId(), c.parent.GetName(), c.parent.GetSpanId())
		}
	}
	wantAttrs(t, server, map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "query", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "7", "mcp.session.id": sid, "mcp.protocol.version": "2025-11-25", "network.transport": "tcp"})
	wantAttrs(t, offload, map[string]string{"spillway.artifact.kind": "text", "spillway.offloaded": "true"})
	if attr(offload, "spillway.artifact.id") == "" || attr(offload, "spillway.artifact.size") == "" {
		t.Errorf("the offload span lacks the artifact's id or size: %v", offload.GetAttributes())
	}
	wantAttrs(t, decision, map[string]string{"spillway.policy.point": "offload", "spillway.policy.result": "allow"})
	if rc.service != "spillway" {
		t.Errorf("service.name = %q, want spillway", rc.service)
	}
	// The upstream's traceparent: this trace, the client span its parent.
	want := "00-" + hex.EncodeToString(server.GetTraceId()) + "-" + hex.EncodeToString(client.GetSpanId()) + "-01"
	if got := lastCall(t, seen()).traceparent; got != want {
		t.Errorf("the upstream received traceparent %q, want %q", got, want)
	}

	// The fetch of the link: a server span of its own trace.
	var link string
	json.Unmarshal(m[1], &link)
	resp, b := fetch(t, link)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("fetch = %d", resp.StatusCode)
	}
	spans = rc.waitFor(t, "the fetch's span", func(s []*tracepb.Span) bool { return named(s, "GET /a/{id}", tracepb.Span_SPAN_KIND_SERVER) != nil })
	f := named(spans, "GET /a/{id}", tracepb.Span_SPAN_KIND_SERVER)
	id := attr(offload, "spillway.artifact.id")
	wantAttrs(t, f, map[string]string{"spillway.artifact.id": id, "http.response.status_code": "200", "url.path": "/a/" + id})
	if got, want := attr(f, "spillway.fetch.bytes"), strconv.Itoa(len(b)); got != want {
		t.Errorf("spillway.fetch.bytes = %s, want %s", got, want)
	}
	u, _ := url.Parse(link)
	for _, s := range spans {
		for _, a := range s.GetAttributes() {
			if tokv := u.Query().Get("t"); tokv != "" && strings.Contains(attr(s, a.GetKey()), tokv) {
				t.Errorf("span %q attribute %s carries the link's token", s.GetName(), a.GetKey())
			}
		}
	}
}

// A client's traceparent is continued: the server span is its child, in
// its trace, over the HTTP header (session era) and over _meta
// (2026-07-28), where the request the upstream receives carries the
// client span's context in its _meta in place of the client's.
func TestTracesContinueTheClients(t *testing.T) {
	rc := newOTLPReceiver(t)
	upstream, seen := tracedUpstream(t)
	base, tok := startTracedSpillway(t, upstream, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+rc.URL+"/v1/traces", "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=edge")
	sid := sessionOpen(t, base, tok)
	tracedCall(t, base, tok, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25", "Traceparent": clientTraceparent},
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"query","arguments":{"rows":3}}}`)
	spans := rc.waitFor(t, "the header-continued span", func(s []*tracepb.Span) bool { return inTrace(s, clientTrace, tracepb.Span_SPAN_KIND_CLIENT) != nil })
	server := inTrace(spans, clientTrace, tracepb.Span_SPAN_KIND_SERVER)
	if server == nil || hex.EncodeToString(server.GetParentSpanId()) != clientSpan {
		t.Fatalf("no server span under the client's span %s", clientSpan)
	}
	client := inTrace(spans, clientTrace, tracepb.Span_SPAN_KIND_CLIENT)
	if got, want := lastCall(t, seen()).traceparent, "00-"+clientTrace+"-"+hex.EncodeToString(client.GetSpanId())+"-01"; got != want {
		t.Errorf("the upstream received %q, want %q", got, want)
	}

	// 2026-07-28: the context in _meta, the header absent.
	const metaTrace = "0af7651916cd43dd8448eb211c80319c"
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"query","arguments":{"rows":3},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"traceparent":"00-` + metaTrace + `-b7ad6b7169203331-01","tracestate":"congo=t61rcWkgMzE"}}}`
	tracedCall(t, base, tok, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "query"}, call)
	spans = rc.waitFor(t, "the _meta-continued span", func(s []*tracepb.Span) bool { return inTrace(s, metaTrace, tracepb.Span_SPAN_KIND_CLIENT) != nil })
	server = inTrace(spans, metaTrace, tracepb.Span_SPAN_KIND_SERVER)
	client = inTrace(spans, metaTrace, tracepb.Span_SPAN_KIND_CLIENT)
	if server == nil || hex.EncodeToString(server.GetParentSpanId()) != "b7ad6b7169203331" {
		t.Fatal("no server span under the span _meta named")
	}
	wantAttrs(t, server, map[string]string{"mcp.protocol.version": "2026-07-28"})
	got := lastCall(t, seen())
	var sent struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(got.body, &sent); err != nil {
		t.Fatal(err)
	}
	want := "00-" + metaTrace + "-" + hex.EncodeToString(client.GetSpanId()) + "-01"
	if string(sent.Params.Meta["traceparent"]) != `"`+want+`"` || got.traceparent != want {
		t.Errorf("the upstream received _meta.traceparent %s and header %q, want %q in both", sent.Params.Meta["traceparent"], got.traceparent, want)
	}
	if string(sent.Params.Meta["tracestate"]) != `"congo=t61rcWkgMzE"` || sent.Params.Meta["io.modelcontextprotocol/protocolVersion"] == nil {
		t.Errorf("the rest of _meta changed: %s", got.body)
	}
	if rc.service != "edge" {
		t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's edge", rc.service)
	}
}

// With tracing off, Spillway invents no traceparent: the upstream gets
// none, or the client's unchanged (a transparent proxy).
func TestTracingOffPassesTheClientsTraceparent(t *testing.T) {
	upstream, seen := tracedUpstream(t)
	base, tok := startTracedSpillway(t, upstream, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9", "OTEL_TRACES_EXPORTER=none")
	sid := sessionOpen(t, base, tok)
	hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	tracedCall(t, base, tok, hdr, bigCall)
	if got := lastCall(t, seen()).traceparent; got != "" {
		t.Errorf("tracing off, the upstream received traceparent %q", got)
	}
	hdr["Traceparent"] = clientTraceparent
	tracedCall(t, base, tok, hdr, bigCall)
	if got := lastCall(t, seen()).traceparent; got != clientTraceparent {
		t.Errorf("tracing off, the upstream received traceparent %q, want the client's", got)
	}
}

// An OTLP protocol Spillway cannot export is a startup error that says
// what to set.
func TestTracingRefusesGRPC(t *testing.T) {
	for _, env := range [][]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317", "OTEL_TRACES_EXPORTER=zipkin"},
	} {
		getenv := func(k string) string {
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, k+"="); ok {
					return v
				}
			}
			return ""
		}
		var stderr bytes.Buffer
		code := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--data", t.TempDir()}, strings.NewReader(""), io.Discard, &stderr, getenv)
		if code != 1 || !strings.Contains(stderr.String(), "OTLP") {
			t.Errorf("%v: exit %d, stderr %q; want 1 and a message naming OTLP", env, code, stderr.String())
		}
	}
	for _, env := range []map[string]string{
		{},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, // no endpoint: off, whatever the protocol
	} {
		if on, err := tracingWanted(func(k string) string { return env[k] }); on || err != nil {
			t.Errorf("%v: tracing on %v, err %v; want off", env, on, err)
		}
	}
}

// named returns the first span called name of kind (0: any).
func named(spans []*tracepb.Span, name string, kind tracepb.Span_SpanKind) *tracepb.Span {
	for _, s := range spans {
		if s.GetName() == name && (kind == 0 || s.GetKind() == kind) {
			return s
		}
	}
	return nil
}

// inTrace returns the first span of kind in trace (hex).
func inTrace(spans []*tracepb.Span, trace string, kind tracepb.Span_SpanKind) *tracepb.Span {
	for _, s := range spans {
		if hex.EncodeToString(s.GetTraceId()) == trace && s.GetKind() == kind {
			return s
		}
	}
	return nil
}

// attr returns s's attribute key as a string ("" when absent).
func attr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() != key {
			continue
		}
		switch v := a.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			return strconv.FormatBool(v.BoolValue)
		}
	}
	return ""
}

func wantAttrs(t *testing.T, s *tracepb.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := attr(s, k); got != v {
			t.Errorf("span %q: %s = %q, want %q", s.GetName(), k, got, v)
		}
	}
}

// lastCall is the last tools/call the upstream received.
func lastCall(t *testing.T, seen []upstreamSeen) upstreamSeen {
	t.Helper()
	for i := len(seen) - 1; i >= 0; i-- {
		if bytes.Contains(seen[i].body, []byte(`"tools/call"`)) {
			return seen[i]
		}
	}
	t.Fatal("the upstream received no tools/call")
	return upstreamSeen{}
}
