package policy

import (
	"bytes"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Issue 42: every decision is timed into
// spillway_policy_decision_duration_seconds by decision point and result,
// and the engine's series parse with the Prometheus text parser.
func TestDecisionLatencyByResult(t *testing.T) {
	e, err := New(ctx, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e.Fetch(ctx, fetchIn("GET", "a"))
	e.Fetch(ctx, fetchIn("GET", "a"))
	headOnly := fetchIn("GET", "a")
	headOnly.Token.Method = "HEAD"
	if d, _ := e.Fetch(ctx, headOnly); d.Allow {
		t.Fatal("a HEAD link allowed a GET")
	}
	e.Offload(ctx, OffloadInput{Method: "tools/call", Kind: "text", Size: 1 << 20})
	e.Offload(ctx, OffloadInput{Method: "tools/call", Kind: "text", Size: 10})
	e.Mint(ctx, MintInput{Source: "api", RequestedTTLSeconds: 60})
	e.Call(ctx, CallInput{})
	checkDecisions(t, e, map[[2]string]uint64{
		{"fetch", "allow"}: 2, {"fetch", "deny"}: 1, {"fetch", "error"}: 0,
		{"offload", "allow"}: 1, {"offload", "deny"}: 1,
		{"mint", "allow"}: 1, {"mint", "error"}: 0, {"call", "allow"}: 1, {"call", "deny"}: 0,
	})

	// A decision of the wrong shape is an error, which denies.
	dir := t.TempDir()
	writePolicy(t, dir, "package spillway\nfetch := {\"allow\": true}\noffload := {\"offload\": false}\nmint := {\"allow\": \"yes\"}\n")
	bad, err := New(ctx, Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Mint(ctx, MintInput{Source: "api"}); err == nil {
		t.Fatal("a mint decision of the wrong shape did not fail")
	}
	checkDecisions(t, bad, map[[2]string]uint64{{"mint", "error"}: 1, {"mint", "allow"}: 0, {"mint", "deny"}: 0})
}

// checkDecisions parses e's series and checks the decisions timed by
// (decision, result), and that the engine's counters are there too.
func checkDecisions(t *testing.T, e *Engine, want map[[2]string]uint64) {
	t.Helper()
	var b bytes.Buffer
	e.WriteMetrics(&b)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("WriteMetrics does not parse: %v\n%s", err, b.String())
	}
	hist := mfs["spillway_policy_decision_duration_seconds"]
	if hist.GetType() != dto.MetricType_HISTOGRAM || len(hist.GetMetric()) != len(decisionPoints)*len(decisionResults) {
		t.Fatalf("decision histogram: %v", hist)
	}
	for _, m := range hist.GetMetric() {
		var k [2]string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "decision":
				k[0] = l.GetValue()
			case "result":
				k[1] = l.GetValue()
			}
		}
		if n, ok := want[k]; ok && m.GetHistogram().GetSampleCount() != n {
			t.Errorf("%v: %d decisions timed, want %d", k, m.GetHistogram().GetSampleCount(), n)
		}
	}
	for _, name := range []string{"spillway_policy_reloads_total", "spillway_policy_eval_errors_total", "spillway_policy_last_reload_refused"} {
		if mfs[name] == nil {
			t.Errorf("WriteMetrics lacks %s", name)
		}
	}
}
