package policy

import (
	"context"
	"regexp"
	"testing"

	"github.com/spillway-dev/spillway/policy/decision"
	"github.com/spillway-dev/spillway/policy/policytest"
)

var decisionIDShape = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestDecisionIDRecorded: a caller that carries a Recorder learns the id
// of each decision made for it: the decision_id of its decision log line
// when decisions are logged, a fresh one when they are not (the built-in
// policy's Go fast paths included), and none is made without a Recorder.
func TestDecisionIDRecorded(t *testing.T) {
	ask := func(e *Engine) []string {
		var ids []string
		for _, decide := range []func(context.Context){
			func(c context.Context) { e.Fetch(c, FetchInput{Via: "link"}) },
			func(c context.Context) { e.Offload(c, OffloadInput{Method: "tools/call", Kind: "text", Size: 1}) },
			func(c context.Context) { e.Mint(c, MintInput{Source: "offload"}) },
			func(c context.Context) { e.Call(c, CallInput{Tenant: "t", Upstream: "u", Kind: "tool", Name: "x"}) },
		} {
			rctx, r := decision.WithRecorder(ctx)
			decide(rctx)
			ids = append(ids, r.ID())
		}
		return ids
	}
	off, err := New(ctx, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	seen := map[string]bool{}
	for i, id := range ask(off) {
		if !decisionIDShape.MatchString(id) || seen[id] {
			t.Errorf("decision %d without a decision log: id %q (want 32 hex digits, each new)", i, id)
		}
		seen[id] = true
	}

	var buf policytest.Buffer
	on, err := New(ctx, Options{Logger: quiet, DecisionLog: &buf})
	if err != nil {
		t.Fatal(err)
	}
	ids := ask(on)
	lines := logged(t, on, &buf)
	if len(lines) != len(ids) {
		t.Fatalf("%d decision log lines for %d decisions", len(lines), len(ids))
	}
	for i, l := range lines {
		if l["decision_id"] != ids[i] || !decisionIDShape.MatchString(ids[i]) {
			t.Errorf("decision %d (%v): recorded id %q, logged %v", i, l["point"], ids[i], l["decision_id"])
		}
	}

	var none *decision.Recorder
	if none.ID() != "" || decision.RecorderFrom(ctx) != nil {
		t.Error("a nil Recorder, or a context without one, has an id")
	}
}
