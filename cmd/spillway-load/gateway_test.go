package main

import (
	"path/filepath"
	"testing"
)

// TestGatewayComparison runs the gateway comparison small: two sessions
// per side, two runs. Every small call through the single-upstream
// Spillway, the gateway of four (each session calling all four servers'
// prefixed tools) and the gateway of one must be answered with a result,
// every figure filled in, and each Spillway must run one upstream child
// per session and server.
func TestGatewayComparison(t *testing.T) {
	buildBins(t)
	c, runs, one := *gatewayC, *gatewayRunsN, *gatewayOne
	t.Cleanup(func() { *gatewayC, *gatewayRunsN, *gatewayOne = c, runs, one })
	*gatewayC, *gatewayRunsN, *gatewayOne = 2, 2, true
	bt, err := filepath.Abs(*bigtoolBin)
	if err != nil {
		t.Fatal(err)
	}
	sides, err := startGatewaySides(bt)
	defer stopStdioSides(stdioSidesOf(sides))
	if err != nil {
		t.Fatal(err)
	}
	if len(sides) != 3 {
		t.Fatalf("%d sides, want 3", len(sides))
	}
	const per = 4 // each session's calls go to b1…b4 in a round
	for run := range *gatewayRunsN {
		if err := gatewayRunOnce(sides, run, per); err != nil {
			t.Fatal(err)
		}
	}
	for i, sd := range sides {
		if want := 2 * []int{1, 4, 1}[i]; len(descendants(sd.pid)) != want {
			t.Errorf("%s: %d upstream processes, want %d", sd.name, len(descendants(sd.pid)), want)
		}
		if len(sd.runs) != 2 {
			t.Fatalf("%s: %d runs, want 2", sd.name, len(sd.runs))
		}
		for _, r := range sd.runs {
			if r.calls != 2*per*gatewayRounds || r.p50 <= 0 || r.p99 < r.p50 || r.rps <= 0 || r.cpu <= 0 || r.kidsCPU <= 0 {
				t.Errorf("%s: %+v", sd.name, r)
			}
		}
	}
	printGateway(sides)
}
