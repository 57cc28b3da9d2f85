package main

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Issue 42: the MCP proxy's series on /metrics. Behind a gateway of two
// bigtool servers, a scripted session makes each outcome once: an
// offloaded call (ok, with bytes stored and kept out of the context), a
// call the upstream answers with a JSON-RPC error, one the call decision
// denies, and one the upstream does not answer within its call_timeout
// (an upstream error of kind timeout). Each moves its own series, under
// its server's name, and the tool calls' series under the tool's name.
func TestMCPMetricsMoveWithASession(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "servers.yaml")
	writeServers(t, cfg, "servers:\n"+bigtoolServer("big", bigtoolBin(t))+"    call_timeout: 300ms\n"+bigtoolServer("other", bigtoolBin(t)))
	s := startServer(t, data, "--config", cfg, "--policy", denyingCallPolicy(t), "--api-listen", "127.0.0.1:0")
	metricsURL := "http://" + s.APIAddr() + "/metrics"
	before := scrape(t, metricsURL)
	for _, name := range []string{"spillway_offloads_total", "spillway_offload_bytes_stored_total", "spillway_offload_bytes_saved_total", "spillway_upstream_errors_total"} {
		if before[name] == nil {
			t.Errorf("/metrics lacks %s before any call (its kinds start at 0)", name)
		}
	}

	base, tok := "http://"+s.Addr(), mcpToken(t, data)
	offloadThroughGateway(t, base, tok) // initialize, tools/list, big_query offloaded
	session := sessionOf(t, base, tok)
	for _, tt := range []struct{ call, want string }{
		{`"name":"other_no_such_tool","arguments":{}`, `"error"`},
		{`"name":"other_small","arguments":{}`, `-32006`},
		{`"name":"big_slow_report","arguments":{"seconds":3,"interval_ms":1000,"size":10}`, `did not answer within`},
	} {
		resp := mcpPost(t, base+"/mcp", tok, session, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{`+tt.call+`}}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), tt.want) {
			t.Fatalf("tools/call {%s}: want %s in %.300s", tt.call, tt.want, b)
		}
	}
	after := scrape(t, metricsURL)

	moved := mover(t, before, after)
	req := func(method, upstream, outcome string) map[string]string {
		return map[string]string{"method": method, "upstream": upstream, "outcome": outcome}
	}
	checkMoves(t, moved, []seriesMove{
		{"spillway_mcp_request_duration_seconds", req("tools/call", "big", "ok"), histCount, 1, 1},
		{"spillway_mcp_request_duration_seconds", req("tools/call", "other", "error"), histCount, 1, 1},
		{"spillway_mcp_request_duration_seconds", req("tools/call", "other", "denied"), histCount, 1, 1},
		{"spillway_mcp_request_duration_seconds", req("tools/call", "big", "upstream_error"), histCount, 1, 1},
		{"spillway_mcp_request_duration_seconds", req("tools/list", "_all", "ok"), histCount, 1, 1},
		{"spillway_upstream_errors_total", map[string]string{"upstream": "big", "kind": "timeout"}, counterValue, 1, 1},
		{"spillway_upstream_errors_total", map[string]string{"upstream": "other", "kind": "connect"}, counterValue, 0, 0},
		// Tools by the name the client was given when listed; a name no
		// list had counts as other.
		{"spillway_mcp_tool_calls_total", map[string]string{"upstream": "big", "tool": "big_query", "outcome": "ok"}, counterValue, 1, 1},
		{"spillway_mcp_tool_calls_total", map[string]string{"upstream": "big", "tool": "big_slow_report", "outcome": "upstream_error"}, counterValue, 1, 1},
		{"spillway_mcp_tool_calls_total", map[string]string{"upstream": "other", "tool": "other_small", "outcome": "denied"}, counterValue, 1, 1},
		{"spillway_mcp_tool_calls_total", map[string]string{"upstream": "other", "tool": "other", "outcome": "error"}, counterValue, 1, 1},
		{"spillway_offloads_total", map[string]string{"kind": "text"}, counterValue, 1, 1},
		{"spillway_offload_bytes_stored_total", map[string]string{"kind": "text"}, counterValue, 300_000, 1e7},
		{"spillway_offload_bytes_saved_total", map[string]string{"kind": "text"}, counterValue, 290_000, 1e7},
		{"spillway_offloads_total", map[string]string{"kind": "image"}, counterValue, 0, 0},
	})
	// Each request is observed once, whatever its outcome: the test's
	// client closes its initialize POSTs without reading them (ok or
	// cancelled, as the close and the answer race).
	inits := map[string]string{"method": "initialize", "upstream": "_all"}
	if d := sumOf(after, "spillway_mcp_request_duration_seconds", inits) - sumOf(before, "spillway_mcp_request_duration_seconds", inits); d != 2 {
		t.Errorf("initialize observed %v times, want 2", d)
	}
	// The timed-out call waited for its call_timeout: its latency is measured.
	if d := moved("spillway_mcp_request_duration_seconds", req("tools/call", "big", "upstream_error"), histSum); d < 0.3 || d > 3 {
		t.Errorf("the timed-out call took %v s, want its 300ms call_timeout", d)
	}
	stored := moved("spillway_offload_bytes_stored_total", map[string]string{"kind": "text"}, counterValue)
	if saved := moved("spillway_offload_bytes_saved_total", map[string]string{"kind": "text"}, counterValue); saved >= stored {
		t.Errorf("bytes saved %v, want less than the %v stored (a preview and a link stay inline)", saved, stored)
	}
}

// sumOf adds the sample counts of family's series whose labels include
// labels.
func sumOf(mfs map[string]*dto.MetricFamily, family string, labels map[string]string) float64 {
	var n float64
series:
	for _, m := range mfs[family].GetMetric() {
		for k, v := range labels {
			if !hasLabel(m, k, v) {
				continue series
			}
		}
		n += histCount(m)
	}
	return n
}

// sessionOf opens an MCP session on base/mcp and returns its id.
func sessionOf(t *testing.T, base, tok string) string {
	t.Helper()
	resp := mcpPost(t, base+"/mcp", tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	mcpPost(t, base+"/mcp", tok, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	return session
}

// denyingCallPolicy is the built-in policy, with calls of the server
// "other"'s tool "small" denied (and the tool still listed).
func denyingCallPolicy(t *testing.T) string {
	t.Helper()
	const rule = "default call := {\"allow\": true}\n"
	return builtinPolicyWith(t, rule, rule+"call := {\"allow\": false, \"reason\": \"test\"} if {\n\tinput.upstream == \"other\"\n\tinput.name == \"small\"\n\tnot input.listing\n}\n")
}

// `spillway serve --stdio` measures its stdio face too, on the registry
// --api-listen serves: the handshake and an offloaded call are ok, a call
// the child refuses is its error, all under the upstream "default", and
// the offloaded megabyte is counted.
func TestStdioMCPMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := ln.Addr().String()
	ln.Close()
	in, lines := startStdio(t, nil, "--api-listen", api)
	exchange := func(line, want string) {
		t.Helper()
		fmt.Fprintln(in, line)
		for {
			select {
			case got, ok := <-lines:
				if !ok {
					t.Fatal("spillway's stdout ended")
				}
				if strings.Contains(got, want) {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s after %s", want, line)
			}
		}
	}
	exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, `"id":1`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{}}}`, `"id":2`)
	exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, `"id":3`)

	mfs := scrape(t, "http://"+api+"/metrics")
	req := func(method, outcome string) map[string]string {
		return map[string]string{"method": method, "upstream": "default", "outcome": outcome}
	}
	for _, tt := range []struct {
		family string
		labels map[string]string
		read   func(*dto.Metric) float64
		want   float64
	}{
		{"spillway_mcp_request_duration_seconds", req("initialize", "ok"), histCount, 1},
		{"spillway_mcp_request_duration_seconds", req("tools/call", "ok"), histCount, 1},
		{"spillway_mcp_request_duration_seconds", req("tools/call", "error"), histCount, 1},
		{"spillway_offloads_total", map[string]string{"kind": "text"}, counterValue, 1},
		{"spillway_offload_bytes_stored_total", map[string]string{"kind": "text"}, counterValue, float64(facesText / 22 * 22)},
	} {
		if got := valueOf(mfs, tt.family, tt.labels, tt.read); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.family, tt.labels, got, tt.want)
		}
	}
}
