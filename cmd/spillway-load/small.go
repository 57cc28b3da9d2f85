package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
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
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(self, "-rproxy", upstream, "-rproxy-listen", addr())
	// The pipe is held by cmd until Wait; its closing tells the child to go.
	if _, err := cmd.StdinPipe(); err != nil {
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

// smallCalls measures a small tools/call directly to the upstream, through
// a bare reverse proxy and through Spillway: one session per side, a
// warm-up, then the same number of round trips each, interleaved in rounds.
func smallCalls(upstream, rproxy, spillway string) error {
	sides := []*side{
		{name: "direct to bigtool (anchor)", url: "http://" + upstream + "/mcp", pid: pid(upstream)},
		{name: "bare httputil.ReverseProxy (anchor)", url: "http://" + rproxy + "/mcp", pid: pid(rproxy)},
		{name: "through Spillway", url: "http://" + spillway + "/mcp", pid: pid(spillway)},
	}
	call := func(sd *side) (time.Duration, error) {
		t0 := time.Now()
		_, err := sd.s.call("tools/call", `{"name":"small","arguments":{"echo":"x"}}`)
		return time.Since(t0), err
	}
	for _, sd := range sides {
		var err error
		if sd.s, err = open(sd.url); err != nil {
			return fmt.Errorf("%s: %w", sd.name, err)
		}
		for range 200 {
			if _, err := call(sd); err != nil {
				return fmt.Errorf("%s: %w", sd.name, err)
			}
		}
	}
	load0 := loadAvg()
	cpu0 := make([]time.Duration, len(sides))
	for i, sd := range sides {
		cpu0[i] = cpuTime(sd.pid)
	}
	per := max(*smallN/smallRounds, 1)
	for r := range smallRounds {
		for i := range sides {
			sd := sides[(r+i)%len(sides)]
			for range per {
				d, err := call(sd)
				if err != nil {
					return fmt.Errorf("%s: %w", sd.name, err)
				}
				sd.lat = append(sd.lat, d)
			}
		}
	}
	// CPU per round trip is less at the mercy of the shared machine than
	// latency: it is each server's own work (bigtool's serves all sides).
	perCall := make([]time.Duration, len(sides))
	for i, sd := range sides {
		n := len(sd.lat)
		if i == 0 {
			n *= len(sides)
		}
		perCall[i] = ((cpuTime(sd.pid) - cpu0[i]) / time.Duration(n)).Round(100 * time.Nanosecond)
	}
	type pcts struct{ p50, p90, p99 time.Duration }
	res := make([]pcts, len(sides))
	for i, sd := range sides {
		us := func(p float64) time.Duration { return percentile(sd.lat, p).Round(time.Microsecond) }
		res[i] = pcts{us(.5), us(.9), us(.99)}
	}
	fmt.Printf("## small tools/call, %d round trips per side in %d interleaved rounds (session era, HTTP upstream)\n\n", len(sides[0].lat), smallRounds)
	fmt.Printf("load average (1 min) before / after: %s / %s\n\n", load0, loadAvg())
	fmt.Printf("| path | p50 | p90 | p99 | server process CPU per round trip | server process peak RSS |\n|---|---|---|---|---|---|\n")
	for i, sd := range sides {
		fmt.Printf("| %s | %v | %v | %v | %v | %.1f MB |\n", sd.name, res[i].p50, res[i].p90, res[i].p99, perCall[i], float64(peakRSS(sd.pid))/1e6)
	}
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	d, rp, sp := res[0], res[1], res[2]
	fmt.Printf("\nSpillway / direct: p50 %.3f×, p90 %.3f× (added at p50: %v)\n", ratio(sp.p50, d.p50), ratio(sp.p90, d.p90), sp.p50-d.p50)
	fmt.Printf("Spillway / bare reverse proxy: p50 %.3f×, p90 %.3f× (added at p50: %v)\n", ratio(sp.p50, rp.p50), ratio(sp.p90, rp.p90), sp.p50-rp.p50)
	fmt.Printf("(bigtool serves all three sides: its RSS covers them all, its CPU is per round trip of any side)\n\n")
	return nil
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
