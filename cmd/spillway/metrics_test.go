package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"
)

// Issue 42: /metrics is client_golang's exposition of one registry. It
// parses with the Prometheus text parser, holds the fetch, store and
// policy histograms and the Go runtime and process collectors, and its
// values move while a session runs: an offload through bigtool (behind
// the gateway, so the call decision is asked too), two fetches of its
// link and one the policy denies.
func TestMetricsMoveWithASession(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "servers.yaml")
	// Two servers: one alone would be served as it is, not behind the
	// gateway that asks the call decision.
	writeServers(t, cfg, "servers:\n"+bigtoolServer("big", bigtoolBin(t))+bigtoolServer("other", bigtoolBin(t)))
	s := startServer(t, data, "--config", cfg, "--policy", denyingFetchPolicy(t), "--api-listen", "127.0.0.1:0")
	metricsURL := "http://" + s.APIAddr() + "/metrics"
	before := scrape(t, metricsURL)
	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if before[name] == nil {
			t.Errorf("/metrics lacks %s (Go runtime and process collectors)", name)
		}
	}

	link := offloadThroughGateway(t, "http://"+s.Addr(), mcpToken(t, data))
	var served int
	for range 2 {
		resp, b := fetch(t, link)
		if resp.StatusCode != 200 {
			t.Fatalf("fetch = %d %.200s", resp.StatusCode, b)
		}
		served += len(b)
	}
	if resp, b := fetch(t, link, "X-Test-Deny", "1"); resp.StatusCode != 403 {
		t.Fatalf("a fetch the policy denies = %d %.200s", resp.StatusCode, b)
	}
	after := scrape(t, metricsURL)

	moved := mover(t, before, after)
	checkMoves(t, moved, []seriesMove{
		{"spillway_fetch_duration_seconds", map[string]string{"code": "2xx"}, histCount, 2, 2},
		{"spillway_fetch_duration_seconds", map[string]string{"code": "4xx"}, histCount, 1, 1},
		{"spillway_fetch_requests_total", map[string]string{"code": "2xx"}, counterValue, 2, 2},
		{"spillway_fetch_bytes_total", nil, counterValue, float64(served), float64(served) + 4096}, // the 403's JSON body too
		{"spillway_store_operation_duration_seconds", map[string]string{"op": "put"}, histCount, 1, 1},
		{"spillway_store_operation_errors_total", map[string]string{"op": "put"}, counterValue, 0, 0},
		{"spillway_artifacts_stored_total", nil, counterValue, 1, 1},
		{"spillway_policy_decision_duration_seconds", map[string]string{"decision": "offload", "result": "allow"}, histCount, 1, 1},
		{"spillway_policy_decision_duration_seconds", map[string]string{"decision": "mint", "result": "allow"}, histCount, 1, 1e9},
		{"spillway_policy_decision_duration_seconds", map[string]string{"decision": "call", "result": "allow"}, histCount, 1, 1e9},
		{"spillway_policy_decision_duration_seconds", map[string]string{"decision": "fetch", "result": "allow"}, histCount, 2, 2},
		{"spillway_policy_decision_duration_seconds", map[string]string{"decision": "fetch", "result": "deny"}, histCount, 1, 1},
		{"spillway_policy_decision_duration_seconds", map[string]string{"decision": "fetch", "result": "error"}, histCount, 0, 0},
	})
	// A histogram's sum moves with its count: the latencies are measured.
	if d := moved("spillway_fetch_duration_seconds", map[string]string{"code": "2xx"}, histSum); d <= 0 {
		t.Errorf("spillway_fetch_duration_seconds_sum{code=2xx} moved by %v", d)
	}
	if d := moved("spillway_policy_decision_duration_seconds", map[string]string{"decision": "fetch", "result": "deny"}, histSum); d <= 0 {
		t.Errorf("the denied fetch decision took %v s", d)
	}
}

// denyingFetchPolicy is the built-in policy, with fetches that carry an
// X-Test-Deny header denied: a fetch the policy, not the token, refuses.
func denyingFetchPolicy(t *testing.T) string {
	t.Helper()
	const rule = "fetch := {\"allow\": true, \"redirect\": true} if {\n"
	return builtinPolicyWith(t, rule, rule+"\tnot input.request.headers[\"x-test-deny\"]\n")
}

// builtinPolicyWith writes the built-in policy with its text anchor
// replaced by with into a folder of its own, and returns the folder.
func builtinPolicyWith(t *testing.T, anchor, with string) string {
	t.Helper()
	b, err := os.ReadFile("../../policy/default/spillway.rego")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), anchor) {
		t.Fatalf("the built-in policy has no %q", anchor)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spillway.rego"), []byte(strings.Replace(string(b), anchor, with, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// seriesMove is how far one series should move during a session.
type seriesMove struct {
	family          string
	labels          map[string]string
	read            func(*dto.Metric) float64
	atLeast, atMost float64
}

// mover returns how far a series moved from before to after; a family
// absent after fails the test.
func mover(t *testing.T, before, after map[string]*dto.MetricFamily) func(family string, labels map[string]string, read func(*dto.Metric) float64) float64 {
	return func(family string, labels map[string]string, read func(*dto.Metric) float64) float64 {
		t.Helper()
		if after[family] == nil {
			t.Fatalf("/metrics lacks %s", family)
		}
		return valueOf(after, family, labels, read) - valueOf(before, family, labels, read)
	}
}

// checkMoves checks each series moved within its bounds.
func checkMoves(t *testing.T, moved func(string, map[string]string, func(*dto.Metric) float64) float64, moves []seriesMove) {
	t.Helper()
	for _, tt := range moves {
		if d := moved(tt.family, tt.labels, tt.read); d < tt.atLeast || d > tt.atMost {
			t.Errorf("%s%v moved by %v, want [%v, %v]", tt.family, tt.labels, d, tt.atLeast, tt.atMost)
		}
	}
}

var httpURLField = regexp.MustCompile(`"httpUrl":("(?:[^"\\]|\\.)*")`)

// offloadThroughGateway runs an MCP session on base/mcp that calls
// bigtool's query for about 400 kB of rows, which Spillway offloads, and
// returns the link of the artifact.
func offloadThroughGateway(t *testing.T, base, tok string) string {
	t.Helper()
	resp := mcpPost(t, base+"/mcp", tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	mcpPost(t, base+"/mcp", tok, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	resp = mcpPost(t, base+"/mcp", tok, session, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "big_query") {
		t.Fatalf("tools/list: %.500s", b)
	}
	resp.Body.Close()
	resp = mcpPost(t, base+"/mcp", tok, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big_query","arguments":{"rows":2000}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := httpURLField.FindSubmatch(body)
	if m == nil {
		t.Fatalf("tools/call big_query: no httpUrl in %.500s", body)
	}
	var link string
	if err := json.Unmarshal(m[1], &link); err != nil {
		t.Fatal(err)
	}
	return link
}

// scrape reads url with the Prometheus text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return mfs
}

// valueOf reads the series of family whose labels include labels; a
// series absent reads 0.
func valueOf(mfs map[string]*dto.MetricFamily, family string, labels map[string]string, read func(*dto.Metric) float64) float64 {
	mf := mfs[family]
	if mf == nil {
		return 0
	}
series:
	for _, m := range mf.GetMetric() {
		for k, v := range labels {
			if !hasLabel(m, k, v) {
				continue series
			}
		}
		return read(m)
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

func histCount(m *dto.Metric) float64    { return float64(m.GetHistogram().GetSampleCount()) }
func histSum(m *dto.Metric) float64      { return m.GetHistogram().GetSampleSum() }
func counterValue(m *dto.Metric) float64 { return m.GetCounter().GetValue() }
