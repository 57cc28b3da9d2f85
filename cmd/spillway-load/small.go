package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	smallOnly    = flag.Bool("small-only", false, "run only the small tools/call comparison")
	rproxyTarget = flag.String("rproxy", "", "internal: run as a bare httputil.ReverseProxy to this base URL")
	rproxyListen = flag.String("rproxy-listen", "", "internal: the bare reverse proxy's listen address")
)

// smallRounds is how many rounds the small calls are split into; each round
// runs every side once, in a rotating order, so drift in the machine's load
// (it is shared) hits all sides alike.
const smallRounds = 20

// newReverseProxy is the anchor Spillway's small calls are held against:
// the standard library's reverse proxy with nothing added. FlushInterval -1
// flushes after every write, so every answer streams through as it does
// through Spillway (the library already does so for text/event-stream).
func newReverseProxy(target *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		FlushInterval: -1,
	}
}

// reverseProxy is the -rproxy mode: the anchor in its own process, so it
// pays for its own hop and its RSS is its own. It exits when its stdin
// closes (the parent stopped or died) or on SIGINT or SIGTERM.
func reverseProxy() int {
	target, err := url.Parse(*rproxyTarget)
	if err != nil || target.Host == "" {
		fmt.Fprintf(os.Stderr, "spillway-load: -rproxy %q: want a base URL\n", *rproxyTarget)
		return 2
	}
	exitWithParent()
	rp := newReverseProxy(target)
	// Full duplex: an MCP server starts its SSE answer as soon as it has
	// read the request, and by default the HTTP/1 server then closes the
	// inbound body under the transport still checking it, which tears down
	// the upstream connection mid-answer (golang/go#40747). No copy added.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})
	srv := &http.Server{Addr: *rproxyListen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, "spillway-load -rproxy:", srv.ListenAndServe())
	return 1
}

// exitWithParent makes an anchor child exit when its stdin closes (the
// parent stopped or died) or on SIGINT or SIGTERM.
func exitWithParent() {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	// Notify, not the default action: a process started in the background
	// inherits SIGINT ignored, and Go then leaves it ignored, so the
	// parent's stop would wait forever.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		os.Exit(0)
	}()
}

// startReverseProxy runs this binary in -rproxy mode in front of upstream
// and returns its listen address.
func startReverseProxy(upstream string) (string, error) {
	cmd, err := selfServer("-rproxy", upstream, "-rproxy-listen", addr())
	if err != nil {
		return "", err
	}
	cmd.Stderr = os.Stderr
	return launch(cmd), nil
}

// side is one path of the small-call comparison.
type side struct {
	name, url string
	pid       int
	s         *session
	lat       []time.Duration
}

// smallRuns is how many runs the small-call comparison makes; its ratios
// are reported per run and as their median (the target is on the
// median of nine).
var smallRuns = flag.Int("small-runs", 9, "runs of the small tools/call comparison (each -small round trips per side, interleaved)")

// pcts are the latency percentiles of one side in one run.
type pcts struct{ p50, p90, p99 time.Duration }

// smallCalls measures a small tools/call directly to the upstream, through
// a bare reverse proxy and through Spillway: one session per side, a
// warm-up, then -small-runs runs of the same number of round trips each,
// every run interleaved in rounds. Ratios are taken within each run.
func smallCalls(upstream, rproxy, spillway string) error {
	sides := []*side{
		{name: "direct to bigtool (anchor)", url: "http://" + upstream + "/mcp", pid: pid(upstream)},
		{name: "bare httputil.ReverseProxy (anchor)", url: "http://" + rproxy + "/mcp", pid: pid(rproxy)},
		{name: "through Spillway", url: "http://" + spillway + "/mcp", pid: pid(spillway)},
	}
	if err := openSmallSides(sides); err != nil {
		return err
	}
	cpu0 := make([]time.Duration, len(sides))
	for i, sd := range sides {
		cpu0[i] = cpuTime(sd.pid)
	}
	per := max(*smallN/smallRounds, 1)
	runs := max(*smallRuns, 1)
	res := make([][]pcts, runs) // res[run][side]
	loads := make([]string, runs)
	total := 0
	for run := range runs {
		load0 := loadAvg()
		if err := smallRun(sides, run, per); err != nil {
			return err
		}
		total += len(sides[0].lat)
		loads[run] = load0 + "–" + loadAvg()
		res[run] = make([]pcts, len(sides))
		for i, sd := range sides {
			us := func(p float64) time.Duration { return percentile(sd.lat, p).Round(time.Microsecond) }
			res[run][i] = pcts{us(.5), us(.9), us(.99)}
		}
	}
	perCall := smallCPUPerCall(sides, cpu0, total)
	q := printSmallRuns(res, loads, total)
	printSmallMedians(sides, res, perCall, q)
	return nil
}

// smallCall makes the small tools/call of the comparisons on s and
// returns how long it took.
func smallCall(s *session) (time.Duration, error) { return smallCallOf(s, "small") }

// smallCallOf makes bigtool's small call under the name tool (a
// gateway's prefixed name) on s and returns how long it took.
func smallCallOf(s *session, tool string) (time.Duration, error) {
	t0 := time.Now()
	_, err := s.call("tools/call", `{"name":`+strconv.Quote(tool)+`,"arguments":{"echo":"x"}}`)
	return time.Since(t0), err
}

// openSmallSides opens each side's session and warms it up with 200
// calls (connections, the servers' code and caches).
func openSmallSides(sides []*side) error {
	for _, sd := range sides {
		var err error
		if sd.s, err = open(sd.url); err != nil {
			return fmt.Errorf("%s: %w", sd.name, err)
		}
		for range 200 {
			if _, err := smallCall(sd.s); err != nil {
				return fmt.Errorf("%s: %w", sd.name, err)
			}
		}
	}
	return nil
}

// smallRun is one run of the small calls: smallRounds rounds of per calls
// on each side, the sides' order rotating from round to round and from
// run to run. Each side's latencies replace those of the run before.
func smallRun(sides []*side, run, per int) error {
	for _, sd := range sides {
		sd.lat = sd.lat[:0]
	}
	for r := range smallRounds {
		for i := range sides {
			sd := sides[(run+r+i)%len(sides)]
			for range per {
				d, err := smallCall(sd.s)
				if err != nil {
					return fmt.Errorf("%s: %w", sd.name, err)
				}
				sd.lat = append(sd.lat, d)
			}
		}
	}
	return nil
}

// smallCPUPerCall is each server's CPU time per round trip since cpu0,
// over total round trips per side. CPU per round trip is less at the
// mercy of the shared machine than latency: it is each server's own work.
// bigtool (the first side) serves every side, so its time is spread over
// all of their round trips.
func smallCPUPerCall(sides []*side, cpu0 []time.Duration, total int) []time.Duration {
	perCall := make([]time.Duration, len(sides))
	for i, sd := range sides {
		n := total
		if i == 0 {
			n *= len(sides)
		}
		perCall[i] = ((cpuTime(sd.pid) - cpu0[i]) / time.Duration(n)).Round(100 * time.Nanosecond)
	}
	return perCall
}

// smallRatios are Spillway's latency ratios in each run of the small
// calls: to the bare reverse proxy at p50, p90 and p99, and to the direct
// path at p50.
type smallRatios struct{ p50, p90, p99, direct50 []float64 }

// printSmallRuns prints the heading of the small calls and a row per run,
// and returns the run's ratios.
func printSmallRuns(res [][]pcts, loads []string, total int) smallRatios {
	runs := len(res)
	fmt.Printf("## small tools/call, %d runs of %d round trips per side, each in %d interleaved rounds (session era, HTTP upstream)\n\n", runs, total/runs, smallRounds)
	fmt.Printf("| run | load average (1 min) | direct p50 | bare proxy p50 | Spillway p50 | Spillway / bare proxy p50 | p90 | p99 |\n|---|---|---|---|---|---|---|---|\n")
	var q smallRatios
	for run, r := range res {
		d, rp, sp := r[0], r[1], r[2]
		q.p50 = append(q.p50, ratio(sp.p50, rp.p50))
		q.p90 = append(q.p90, ratio(sp.p90, rp.p90))
		q.p99 = append(q.p99, ratio(sp.p99, rp.p99))
		q.direct50 = append(q.direct50, ratio(sp.p50, d.p50))
		fmt.Printf("| %d | %s | %v | %v | %v | %.3f× | %.3f× | %.3f× |\n", run+1, loads[run], d.p50, rp.p50, sp.p50, q.p50[run], q.p90[run], q.p99[run])
	}
	return q
}

// printSmallMedians prints each side's median percentiles over the runs,
// its CPU per round trip and peak RSS, then the median ratios.
func printSmallMedians(sides []*side, res [][]pcts, perCall []time.Duration, q smallRatios) {
	runs := len(res)
	fmt.Printf("\nMedian over the runs, cell by cell:\n\n| path | p50 | p90 | p99 | server process CPU per round trip | server process peak RSS |\n|---|---|---|---|---|---|\n")
	for i, sd := range sides {
		col := func(f func(pcts) time.Duration) time.Duration {
			v := make([]time.Duration, runs)
			for run := range runs {
				v[run] = f(res[run][i])
			}
			return percentile(v, .5)
		}
		fmt.Printf("| %s | %v | %v | %v | %v | %.1f MB |\n", sd.name, col(func(p pcts) time.Duration { return p.p50 }),
			col(func(p pcts) time.Duration { return p.p90 }), col(func(p pcts) time.Duration { return p.p99 }), perCall[i], float64(peakRSS(sd.pid))/1e6)
	}
	fmt.Printf("\nSpillway / bare reverse proxy, median [range] of %d runs: p50 **%s** (target ≤ 1.02×), p90 %s, p99 %s\n", runs, medianRange(q.p50), medianRange(q.p90), medianRange(q.p99))
	fmt.Printf("Spillway / direct: p50 %s\n", medianRange(q.direct50))
	fmt.Printf("(bigtool serves all three sides: its RSS covers them all, its CPU is per round trip of any side)\n\n")
}

// medianRange formats the median of ratios and their range, as 1.234× [1.1–1.3].
func medianRange(v []float64) string {
	s := slices.Clone(v)
	slices.Sort(s)
	return fmt.Sprintf("%.3f× [%.3f–%.3f]", s[len(s)/2], s[0], s[len(s)-1])
}

// loadAvg is the machine's 1-minute load average, "?" if unknown.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// cpuTime is the time a process's threads have spent on a CPU, from
// /proc/<pid>/task/*/schedstat (nanosecond resolution; a thread that has
// exited no longer counts, and the Go runtime rarely retires threads).
func cpuTime(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}
