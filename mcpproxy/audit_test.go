package mcpproxy_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
	"github.com/spillway-dev/spillway/policy/policytest"
)

var httpURL = regexp.MustCompile(`"httpUrl":"([^"]+)"`)

// TestAuditJoinsOnTrace: the audit lines of one offloaded tools/call
// (traced: a span in its request's context), two fetches of its link
// (whole and a range), a resources/read, a resources/stream and an
// artifact tool's read of its URI share the
// artifact id and the call's trace id, and name the call's upstream,
// tool, request id and session; the offload line names the decision
// log lines of its offload and mint decisions. A read of an artifact
// that does not exist is audited with its denial. No line holds the
// token.
func TestAuditJoinsOnTrace(t *testing.T) {
	store, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc, fetch := serviceOn(t, store)
	var audit, dlog policytest.Buffer
	svc.Audit = slog.New(slog.NewJSONHandler(&audit, nil))
	eng, err := policy.New(t.Context(), policy.Options{Logger: slog.New(slog.DiscardHandler), DecisionLog: &dlog})
	if err != nil {
		t.Fatal(err)
	}
	svc.Mint, svc.Fetch = eng, eng // every decision in the one decision log
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: resumableUpstream(t, nil), Transport: "streamable"},
		Artifacts: svc, Fetch: fetch, Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{Server: "big"})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 1}, SpanID: trace.SpanID{0xf0, 0x67, 2},
		TraceFlags: trace.FlagsSampled})
	traced := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r.WithContext(trace.ContextWithSpanContext(r.Context(), sc)))
	})
	a := &agent{url: serve(t, traced)}
	a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"resourceStreaming": map[string]any{}},
		"clientInfo": map[string]any{"name": "audit", "version": "1"}})
	a.id = 1 // the upstream answers id 2
	res := a.call(t, "tools/call", map[string]any{"name": "big"})
	m := httpURL.FindSubmatch(res)
	if m == nil {
		t.Fatalf("no httpUrl in %.300s", res)
	}
	link := string(m[1])
	// A fetch's line is written once its response is out, maybe after the
	// client has it: each step waits for its line, so the lines are in
	// the order of the steps.
	for i, rng := range []string{"", "bytes=0-99"} {
		req, _ := http.NewRequest(http.MethodGet, link, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("GET %q: %s", rng, resp.Status)
		}
		audit.Lines(t, 2+i)
	}
	u, _ := url.Parse(link)
	id := strings.TrimPrefix(u.Path, "/a/")
	a.call(t, "resources/read", map[string]any{"uri": artifact.URI(id)})
	resp := streamPost(t, a.url, a.session, artifact.URI(id))
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || len(b) != 160_000 {
		t.Fatalf("resources/stream: %s, %.300s", resp.Status, b)
	}
	resp.Body.Close()
	audit.Lines(t, 5)
	a.call(t, "tools/call", map[string]any{"name": "spillway_artifact_grep", "arguments": map[string]any{"uri": artifact.URI(id), "pattern": "0123", "maxMatches": 1}})
	req, _ := http.NewRequest(http.MethodPost, a.url, strings.NewReader(
		`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"`+artifact.URI(strings.Repeat("a", 32))+`"}}`)) // no such artifact
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", a.session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	lines := audit.Lines(t, 7)
	if len(lines) != 7 {
		t.Fatalf("%d audit lines, want 7:\n%s", len(lines), audit.String())
	}
	eng.Close()
	points := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(dlog.String()), "\n") {
		var d map[string]any
		json.Unmarshal([]byte(l), &d)
		points[d["decision_id"].(string)], _ = d["point"].(string)
	}
	off := lines[0]
	if off["msg"] != artifact.AuditOffloadMsg || off["artifact"] != id || off["trace_id"] != sc.TraceID().String() ||
		off["span_id"] != sc.SpanID().String() || off["upstream"] != "big" || off["tool"] != "big" || off["request_id"] != "2" ||
		off["session"] != a.session || points[off["offload_decision"].(string)] != "offload" || points[off["mint_decision"].(string)] != "mint" {
		t.Errorf("offload line %v", off)
	}
	for i, via := range []string{artifact.ViaLink, artifact.ViaLink, artifact.ViaRead, artifact.ViaStream, artifact.ViaRead} {
		l := lines[1+i]
		if l["msg"] != artifact.AuditFetchMsg || l["via"] != via || l["artifact"] != id || l["call_trace_id"] != off["trace_id"] ||
			l["call_request_id"] != "2" || l["call_upstream"] != "big" || l["call_tool"] != "big" || l["status"] == 0.0 ||
			points[l["decision"].(string)] != "fetch" {
			t.Errorf("fetch line %d: %v", i, l)
		}
	}
	for _, l := range lines[3:5] { // the read's and the stream's own span
		if l["trace_id"] != sc.TraceID().String() || l["bytes"] != 160_000.0 || l["status"] != 200.0 {
			t.Errorf("%v line: trace id %v, %v bytes, status %v", l["via"], l["trace_id"], l["bytes"], l["status"])
		}
	}
	if l := lines[5]; l["bytes"] == 0.0 || l["bytes"].(float64) >= 160_000 || l["status"] != 200.0 { // the grep's answer
		t.Errorf("artifact tool line %v", l)
	}
	if l := lines[6]; l["via"] != artifact.ViaRead || l["status"] != 404.0 || l["denial"] != "not_found" || l["artifact"] != strings.Repeat("a", 32) {
		t.Errorf("refused read line %v", l)
	}
	if tok := u.Query().Get("t"); tok == "" || strings.Contains(audit.String(), tok) {
		t.Errorf("token %q in the audit trail:\n%s", tok, audit.String())
	}
}
