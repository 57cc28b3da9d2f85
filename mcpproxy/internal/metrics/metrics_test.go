package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Two proxies on one registry count into the same series; a registry
// holding something else under a name is an error, not a panic.
func TestNewSharesARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(reg)
	if err != nil {
		t.Fatalf("a second set on the same registry: %v", err)
	}
	a.Request("tools/call", Route{Upstream: "x", Tool: "t"}, OK, "", time.Millisecond)
	b.Request("tools/call", Route{Upstream: "x", Tool: "t"}, OK, "", time.Millisecond)
	if n := len(family(t, reg, "spillway_mcp_request_duration_seconds")); n != 1 {
		t.Fatalf("series = %d, want 1", n)
	}
	if c := histogramCount(t, reg, "spillway_mcp_request_duration_seconds"); c != 2 {
		t.Fatalf("count = %d, want 2 (both sets count into one series)", c)
	}

	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "spillway_offloads_total", Help: "not ours"}))
	if _, err := New(other); err == nil || !strings.Contains(err.Error(), "metrics:") {
		t.Fatalf("New on a registry holding another spillway_offloads_total: err = %v", err)
	}
	if s, err := New(nil); s != nil || err != nil {
		t.Fatalf("New(nil) = %v, %v; want no metrics", s, err)
	}
	var none *Set // measures nothing, and does not panic
	none.Request("ping", Route{Upstream: Default}, OK, "", 0)
	none.Offloaded("text", 1, 1)
}

// family returns the series of the family name in g.
func family(t *testing.T, g prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

func histogramCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range family(t, g, name) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// counter is the value of the series of the counter name whose kind is kind.
func counter(t *testing.T, g prometheus.Gatherer, name, kind string) float64 {
	t.Helper()
	for _, m := range family(t, g, name) {
		if m.GetLabel()[0].GetValue() == kind {
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// A client cannot add series: methods outside MCP's are "other", offload
// kinds outside the decision's are "other", and a negative saving counts 0.
func TestLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _ := New(reg)
	for i := range 100 {
		s.Request("x/"+strings.Repeat("a", i), Route{Upstream: Default}, OK, "", 0)
	}
	s.Request("tools/call", Route{Upstream: Default}, OK, "", 0)
	if n := len(family(t, reg, "spillway_mcp_request_duration_seconds")); n != 2 {
		t.Fatalf("series = %d, want 2 (other, tools/call)", n)
	}
	// An upstream listing more tools than maxTools adds maxTools+1 series.
	for i := range maxTools + 50 {
		s.Request("tools/call", Route{Upstream: Default, Tool: fmt.Sprint("t", i)}, OK, "", 0)
	}
	if n := len(family(t, reg, "spillway_mcp_tool_calls_total")); n != maxTools+1 {
		t.Fatalf("tool series = %d, want %d", n, maxTools+1)
	}
	s.Offloaded("video", 10, -5)
	if v := counter(t, reg, "spillway_offload_bytes_saved_total", "other"); v != 0 {
		t.Fatalf("saved = %v, want 0", v)
	}
	if v := counter(t, reg, "spillway_offload_bytes_stored_total", "other"); v != 10 {
		t.Fatalf("stored = %v, want 10", v)
	}
}

func TestOutcome(t *testing.T) {
	for _, tt := range []struct {
		isErr         bool
		code          int
		msg           string
		outcome, kind string
	}{
		{false, 0, "", OK, ""},
		{true, -32602, "unknown tool", Error, ""},
		{true, -32006, "denied", Denied, ""},
		{true, -32000, `upstream "big" did not answer within 300ms`, UpstreamError, KindTimeout},
		{true, -32000, "upstream MCP server stalled mid-message and was stopped", UpstreamError, KindTimeout},
		{true, -32000, "upstream MCP server unreachable", UpstreamError, KindConnect},
		{true, -32000, `upstream "a" is unavailable (down); retry in 5s`, UpstreamError, KindConnect},
		{true, -32000, "upstream answered 503 Service Unavailable", UpstreamError, KindStatus},
		{true, -32000, "upstream MCP server exited", UpstreamError, KindClosed},
		{true, -32000, "upstream returned an invalid result", UpstreamError, KindProtocol},
		{true, -32000, "upstream message exceeds the 1024 byte limit", UpstreamError, KindProtocol},
		{true, -32000, "the tool failed", Error, ""},
	} {
		o, k := Outcome(tt.isErr, tt.code, tt.msg)
		if o != tt.outcome || k != tt.kind {
			t.Errorf("Outcome(%v, %d, %q) = %s, %s; want %s, %s", tt.isErr, tt.code, tt.msg, o, k, tt.outcome, tt.kind)
		}
	}
	for _, tt := range []struct {
		status        int
		text          string
		outcome, kind string
	}{
		{403, "Forbidden", Denied, ""},
		{502, "upstream MCP server unreachable", UpstreamError, KindConnect},
		{500, "bad upstream URL", UpstreamError, KindStatus},
		{400, "bad request", Error, ""},
	} {
		if o, k := StatusOutcome(tt.status, tt.text); o != tt.outcome || k != tt.kind {
			t.Errorf("StatusOutcome(%d, %q) = %s, %s; want %s, %s", tt.status, tt.text, o, k, tt.outcome, tt.kind)
		}
	}
}
