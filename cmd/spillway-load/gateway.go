package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The gateway comparison (issue 40): one Spillway in front of several
// stdio upstreams (bigtool each), its clients' small calls spread over the
// upstreams' prefixed tools, against the same calls through a Spillway in
// front of one bigtool (--upstream-cmd), in the same run, interleaved.

var (
	gatewayOnly      = flag.Bool("gateway-only", false, "run only the gateway comparison: small calls through a Spillway in front of -gateway-upstreams bigtools vs one")
	gatewayN         = flag.Int("gateway-small", 4000, "small tools/call round trips per side and run, gateway comparison")
	gatewayC         = flag.Int("gateway-c", 8, "concurrent sessions per side, gateway comparison")
	gatewayRunsN     = flag.Int("gateway-runs", 9, "runs of the gateway comparison (ratios per run and their median)")
	gatewayUpstreams = flag.Int("gateway-upstreams", 4, "bigtool servers behind the gateway")
	gatewayOne       = flag.Bool("gateway-one", false, "also measure a gateway of one bigtool (its routing without the other upstreams)")
	gatewaySpread    = flag.Bool("gateway-spread", true, "spread each session's calls over every upstream; false: session i calls upstream i mod -gateway-upstreams only (as many upstreams busy as with one)")
	gatewayAlso      = flag.String("gateway-also", "", "another spillway binary whose gateway is measured too, in the same rounds (a change's before and after)")
	gatewayBudget    = flag.Duration("gateway-timeout", 5*time.Minute, "the gateway comparison stops starting rounds after this long and reports the runs it finished")
)

// gatewayRounds is how many rounds a run of the gateway comparison is
// split into, the sides' order rotating from round to round.
const gatewayRounds = 20

// gatewaySide is one Spillway of the gateway comparison: its sessions
// (the stdio comparison's side) and what was measured of its upstream
// processes.
type gatewaySide struct {
	*stdioSide
	kidsCPU time.Duration // of the upstream processes over the measured rounds
	runs    []gatewayRun
}

// gatewayRun is one side's figures in one run.
type gatewayRun struct {
	p50, p99      time.Duration
	rps           float64
	cpu, kidsCPU  time.Duration // per round trip
	load0, load1  string
	rounds, calls int
}

// gatewayComparison starts the sides, warms them up, measures
// -gateway-runs runs and prints them.
func gatewayComparison() error {
	bt, err := filepath.Abs(*bigtoolBin)
	if err != nil {
		return err
	}
	sides, err := startGatewaySides(bt)
	defer stopStdioSides(stdioSidesOf(sides))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(*gatewayBudget)
	per := max(*gatewayN/gatewayRounds/len(sides[0].ss), 1)
	for run := range max(*gatewayRunsN, 1) {
		if time.Now().After(deadline) {
			fmt.Printf("(stopped after %d runs: -gateway-timeout %v passed)\n\n", run, *gatewayBudget)
			break
		}
		if err := gatewayRunOnce(sides, run, per); err != nil {
			return err
		}
	}
	printGateway(sides)
	return nil
}

// startGatewaySides starts the single-upstream Spillway, the gateway (and
// with -gateway-one the gateway of one), opens -gateway-c sessions on
// each and warms them up: each session calls every tool it will call,
// then 50 small calls.
func startGatewaySides(bt string) ([]*gatewaySide, error) {
	k := max(*gatewayUpstreams, 1)
	type spec struct {
		name, bin string
		args      []string
		tool      func(i, n int) string
	}
	name := fmt.Sprintf("gateway of %d", k)
	specs := []spec{
		{"single-upstream Spillway (anchor)", *spillwayBin, []string{"--upstream-cmd", bt}, nil},
		{name, *spillwayBin, []string{"--config", gatewayConfig(bt, k)}, gatewayTool(k)},
	}
	if *gatewayAlso != "" {
		specs = append(specs, spec{name + " (" + *gatewayAlso + ")", *gatewayAlso, []string{"--config", gatewayConfig(bt, k)}, gatewayTool(k)})
	}
	if *gatewayOne {
		specs = append(specs, spec{"gateway of 1", *spillwayBin, []string{"--config", gatewayConfig(bt, 1)}, nil})
	}
	var sides []*gatewaySide
	for _, sp := range specs {
		// Its refusals on stderr: a binary without the config's servers:
		// key says so before launch gives up waiting.
		cmd := spillwayCommandOf(sp.bin, "error", sp.args...)
		cmd.Stderr = os.Stderr
		a := launch(cmd)
		sd := &gatewaySide{stdioSide: &stdioSide{smallResult: smallResult{name: sp.name}, addr: a, pid: pid(a), tool: sp.tool}}
		sides = append(sides, sd)
		if err := sd.openAndWarm(k); err != nil {
			return sides, err
		}
	}
	return sides, nil
}

// gatewayTool names the tool of session i's n-th call through a gateway
// of k bigtools named b1…bk: the small tool of each in turn, or with
// -gateway-spread=false of the session's own.
func gatewayTool(k int) func(i, n int) string {
	return func(i, n int) string {
		if !*gatewaySpread {
			n = 0
		}
		return "b" + strconv.Itoa((i+n)%k+1) + "_small"
	}
}

// openAndWarm opens the side's sessions (each call bounded to 30 s, so
// that the run ends even if a call never does) and warms them up.
func (sd *gatewaySide) openAndWarm(tools int) error {
	for range max(*gatewayC, 1) {
		s, err := open("http://" + sd.addr + "/mcp")
		if err != nil {
			return fmt.Errorf("%s: %w", sd.name, err)
		}
		s.c.Timeout = 30 * time.Second
		sd.ss = append(sd.ss, s)
	}
	if err := sd.round(tools, false); err != nil {
		return err
	}
	return sd.round(50, false)
}

// gatewayConfig writes the config file of a Spillway in front of k
// bigtools named b1…bk over stdio, and returns its path.
func gatewayConfig(bt string, k int) string {
	var b strings.Builder
	b.WriteString("servers:\n")
	for i := range k {
		fmt.Fprintf(&b, "  - name: b%d\n    command: %s\n", i+1, strconv.Quote(bt))
	}
	path := filepath.Join(tempDir("spillway-load-gw-"), "servers.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		panic(err)
	}
	return path
}

func stdioSidesOf(sides []*gatewaySide) []*stdioSide {
	out := make([]*stdioSide, len(sides))
	for i, sd := range sides {
		out[i] = sd.stdioSide
	}
	return out
}

// gatewayRunOnce is one run: gatewayRounds rounds of per calls on each
// session of each side, the sides' order rotating from round to round and
// from run to run. It records each side's figures for the run.
func gatewayRunOnce(sides []*gatewaySide, run, per int) error {
	load0 := loadAvg()
	for _, sd := range sides {
		sd.lat, sd.elapsed, sd.cpu, sd.kidsCPU = sd.lat[:0], 0, 0, 0
	}
	for r := range gatewayRounds {
		for i := range sides {
			sd := sides[(run+r+i)%len(sides)]
			kids := descendants(sd.pid)
			k0 := cpuTimeOf(kids)
			if err := sd.round(per, true); err != nil {
				return err
			}
			sd.kidsCPU += cpuTimeOf(kids) - k0
		}
	}
	load1 := loadAvg()
	for _, sd := range sides {
		n := len(sd.lat)
		sd.runs = append(sd.runs, gatewayRun{
			p50: percentile(sd.lat, .5).Round(time.Microsecond), p99: percentile(sd.lat, .99).Round(time.Microsecond),
			rps: float64(n) / sd.elapsed.Seconds(), cpu: sd.cpu / time.Duration(n), kidsCPU: sd.kidsCPU / time.Duration(n),
			load0: load0, load1: load1, rounds: gatewayRounds, calls: n,
		})
	}
	return nil
}

// descendants are the processes whose parent is pid, and theirs (the
// upstream children a Spillway started), from /proc/*/stat.
func descendants(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	parent := map[int][]int{}
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		p, _ := strconv.Atoi(strings.Fields(s)[0])
		pp, _ := strconv.Atoi(f[1])
		parent[pp] = append(parent[pp], p)
	}
	var out []int
	for q := []int{pid}; len(q) > 0; q = q[1:] {
		out = append(out, parent[q[0]]...)
		q = append(q, parent[q[0]]...)
	}
	return out
}

// cpuTimeOf is the CPU time of the processes pids, summed.
func cpuTimeOf(pids []int) time.Duration {
	var sum time.Duration
	for _, p := range pids {
		sum += cpuTime(p)
	}
	return sum
}

// rssOf is the resident set of the processes pids, summed, in bytes.
func rssOf(pids []int) int64 {
	var sum int64
	for _, p := range pids {
		sum += procStatusKB(p, "VmRSS") << 10
	}
	return sum
}

// printGateway prints the heading, a row per run with the gateway's
// ratios to the anchor (the first side), the medians of each side, and
// the ratios' medians.
func printGateway(sides []*gatewaySide) {
	if len(sides[0].runs) == 0 {
		fmt.Printf("(no run of the gateway comparison finished)\n\n")
		return
	}
	anchor, runs := sides[0], len(sides[0].runs)
	fmt.Printf("## small tools/call through a gateway of %d stdio upstreams (bigtool) vs a single-upstream Spillway, %d sessions per side, %d run(s) of %d round trips per side, each in %d interleaved rounds\n\n",
		max(*gatewayUpstreams, 1), len(anchor.ss), runs, anchor.runs[0].calls, gatewayRounds)
	fmt.Printf("| run | load average (1 min) | side | p50 | p99 | requests/s | gateway / anchor: p50 | p99 | requests/s |\n|---|---|---|---|---|---|---|---|---|\n")
	for run := range runs {
		a := anchor.runs[run]
		for _, sd := range sides {
			r := sd.runs[run]
			rel := "– | – | –"
			if sd != anchor {
				rel = fmt.Sprintf("%.3f× | %.3f× | %.3f×", ratio(r.p50, a.p50), ratio(r.p99, a.p99), r.rps/a.rps)
			}
			fmt.Printf("| %d | %s–%s | %s | %v | %v | %.0f | %s |\n", run+1, r.load0, r.load1, sd.name, r.p50, r.p99, r.rps, rel)
		}
	}
	printGatewayMedians(sides)
}

// printGatewayMedians prints each side's medians over the runs, its CPU
// per round trip and memory, then each gateway's ratios to the anchor.
func printGatewayMedians(sides []*gatewaySide) {
	fmt.Printf("\nMedian over the runs, cell by cell:\n\n| path | p50 | p99 | requests/s | Spillway CPU per round trip | upstreams' CPU per round trip | Spillway RSS (peak) | upstream processes: RSS |\n|---|---|---|---|---|---|---|---|\n")
	for _, sd := range sides {
		kids := descendants(sd.pid)
		fmt.Printf("| %s | %v | %v | %.0f | %v | %v | %.1f MB (%.1f MB) | %d: %.1f MB |\n", sd.name,
			medianDur(sd.runs, func(r gatewayRun) time.Duration { return r.p50 }),
			medianDur(sd.runs, func(r gatewayRun) time.Duration { return r.p99 }),
			medianOf(sd.runs, func(r gatewayRun) float64 { return r.rps }),
			medianDur(sd.runs, func(r gatewayRun) time.Duration { return r.cpu }).Round(time.Microsecond),
			medianDur(sd.runs, func(r gatewayRun) time.Duration { return r.kidsCPU }).Round(time.Microsecond),
			float64(procStatusKB(sd.pid, "VmRSS")<<10)/1e6, float64(peakRSS(sd.pid))/1e6, len(kids), float64(rssOf(kids))/1e6)
	}
	anchor := sides[0]
	for _, sd := range sides[1:] {
		var p50, p99, rps, cpu []float64
		for run, r := range sd.runs {
			a := anchor.runs[run]
			p50, p99 = append(p50, ratio(r.p50, a.p50)), append(p99, ratio(r.p99, a.p99))
			rps, cpu = append(rps, r.rps/a.rps), append(cpu, ratio(r.cpu, a.cpu))
		}
		fmt.Printf("\n%s / single-upstream Spillway, median [range] of %d runs: p50 **%s** (target ≤ 1.1×), p99 %s, requests/s %s, Spillway CPU per round trip %s\n",
			sd.name, len(sd.runs), medianRange(p50), medianRange(p99), medianRange(rps), medianRange(cpu))
	}
	fmt.Println()
}

// medianDur is the median over runs of f.
func medianDur(runs []gatewayRun, f func(gatewayRun) time.Duration) time.Duration {
	return time.Duration(medianOf(runs, func(r gatewayRun) float64 { return float64(f(r)) }))
}

// medianOf is the median over runs of f.
func medianOf(runs []gatewayRun, f func(gatewayRun) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}
