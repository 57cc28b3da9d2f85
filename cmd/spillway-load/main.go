// Command spillway-load measures Spillway against its anchors on this
// machine and prints the figures BENCHMARKS.md records:
//
//   - a small tools/call through Spillway vs directly to the same upstream
//     and vs a bare httputil.ReverseProxy in front of it, in -small-runs
//     runs (nine by default) with the sides interleaved (latency
//     percentiles, ratios per run and their median, each server's peak RSS);
//   - a ~50 MB tool output through Spillway with offloading vs plain
//     pass-through (time, and the proxy's peak RSS against the message);
//   - fetches of a link (fetch.go): a small cached artifact at concurrency
//     64 and a 100 MiB one from the local-directory store vs a bare
//     http.FileServer over the same bytes, and a 100 MiB one from MinIO vs
//     a direct, presigned MinIO GET of the same object and a bare Go proxy
//     of that GET (requests per second, percentiles, throughput ratios).
//     -fetch-only runs just these;
//   - with a stdio upstream (stdio.go), Spillway (--upstream-cmd) vs the
//     npm mcp-proxy and supergateway fronting the same server and a bare
//     relay of its bytes: small tools/call to bigtool at each -stdio-c
//     concurrency (requests per second, p50, p99, ratios), then one big
//     output of -big-mib and -conc outputs of -conc-mib at once from a tool
//     server that streams them (stdioserve.go): each proxy's peak RSS above
//     idle, wall time against the relay's, what the client received, and
//     for links the SHA-256 of the artifact fetched. -stdio-only runs these;
//   - the same big outputs from an HTTP upstream answering over SSE
//     (ssebig.go), through Spillway (--upstream-url) vs a bare
//     httputil.ReverseProxy. -sse-only runs these;
//   - 1,000 slow and idle connections against Spillway vs a bare net/http
//     server with the same server timeouts (memory and descriptors held,
//     and for how long; slow.go). -slow-only runs just this one;
//   - the held-open run (hostile.go): hostile images and schemas at once
//     on one session of Spillway's HTTP and stdio faces and the bare
//     relay, a ping meanwhile (peak RSS above idle, ping latency, what the
//     client received). -hostile-only runs just this one;
//   - the gateway (gateway.go): small tools/call from -gateway-c sessions
//     at once through a Spillway in front of -gateway-upstreams bigtools
//     over stdio (a config file's servers:), spread over their prefixed
//     tools, vs the same calls through a Spillway in front of one
//     (--upstream-cmd), interleaved in rounds, -gateway-runs runs (nine
//     by default; p50, p99, requests/s, CPU per call of Spillway and of
//     its upstreams, RSS, the ratios). -gateway-only runs just this one.
//
// Every server listens on loopback and is stopped at the end; the run is
// bounded by its counts. Usage: make build && go run ./cmd/spillway-load
// (-small-only for the small-call comparison alone).
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

var (
	spillwayBin = flag.String("spillway", "bin/spillway", "spillway binary")
	bigtoolBin  = flag.String("bigtool", "bin/bigtool", "bigtool binary (the upstream)")
	minioBin    = flag.String("minio", envOr("SPILLWAY_MINIO", ".tools/bin/minio"), "minio binary; empty skips the fetch comparison")
	smallN      = flag.Int("small", 2000, "small tools/call round trips per side")
	bigRows     = flag.Int("rows", 250_000, "rows of the big query (about 200 bytes each)")
	streamSizes = flag.String("stream-mib", "1,10,100", "artifact sizes (MiB) for resources/stream vs resources/read; empty skips")
	clientMode  = flag.String("client", "", "internal: run as the MCP client of one read/stream measurement")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

var children []*exec.Cmd

func main() {
	flag.Parse()
	if code, ok := internalMode(); ok {
		os.Exit(code)
	}
	os.Exit(mainCode(os.Stderr))
}

// mainCode runs the measurements once the flags are parsed, stops the
// children it started, and returns the exit code.
func mainCode(stderr io.Writer) (code int) {
	defer func() {
		r := recover()
		for _, c := range children {
			stopGently(c)
		}
		children = nil
		removeTempDirs()
		if se, ok := r.(setupError); ok {
			// A binary missing or a server that never listens is the
			// user's to fix, not a bug: a line, not a stack.
			fmt.Fprintln(stderr, "spillway-load:", se.err)
			code = 1
		} else if r != nil {
			panic(r)
		}
	}()
	if err := run(); err != nil {
		fmt.Fprintln(stderr, "spillway-load:", err)
		return 1
	}
	return 0
}

// stopGently interrupts c and waits for it, killing it if it has not
// gone in ten seconds: the tool stops by itself even when a child does not
// (MinIO, mid-shutdown, was seen to stay for minutes).
func stopGently(c *exec.Cmd) {
	c.Process.Signal(os.Interrupt)
	t := time.AfterFunc(10*time.Second, func() { c.Process.Kill() })
	c.Wait()
	t.Stop()
}

// internalMode runs this binary as one of the processes it starts (a
// client, an anchor, the stdio upstream) when the flags ask for one, and
// returns its exit code; ok is false when they do not.
func internalMode() (int, bool) {
	switch {
	case *clientMode != "":
		return client(), true
	case *rproxyTarget != "":
		return reverseProxy(), true
	case *copyProxyTarget != "":
		return copyProxy(), true
	case *anchorDir != "":
		return anchorServe(), true
	case *upstreamMode:
		return upstreamStdio(), true
	case *relayCmd != "":
		return relay(), true
	case *upstreamSSE != "":
		return upstreamSSEServe(), true
	}
	return 0, false
}

// tempDirs are the data folders of the servers this program started,
// removed once they have stopped (a fetch run leaves hundreds of MB).
var tempDirs []string

// tempDir makes a folder that removeTempDirs removes.
func tempDir(prefix string) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		panic(err)
	}
	tempDirs = append(tempDirs, dir)
	return dir
}

func removeTempDirs() {
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
}

// run prints a line about the machine, then runs the measurement an
// -X-only flag names, or else all of them.
func run() error {
	fmt.Printf("machine: %s, %d cores, %s; %s; %s\n\n", cpuModel(), runtime.NumCPU(), memTotal(), runtime.Version(), time.Now().UTC().Format("2006-01-02"))
	if only := onlyRun(); only != nil {
		return only()
	}
	return runAll()
}

// cpuModel is the machine's CPU model from /proc/cpuinfo.
func cpuModel() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name\t: "); ok {
				return v
			}
		}
	}
	return "unknown CPU"
}

// onlyRun is the measurement an -X-only flag asks for, nil if no such
// flag is set.
func onlyRun() func() error {
	switch {
	case *slowOnly:
		return slowClients
	case *fetchOnly:
		return fetches
	case *stdioOnly:
		return stdioComparisons
	case *sseOnly:
		return sseComparisons
	case *hostileOnly:
		return hostileRuns
	case *gatewayOnly:
		return gatewayComparison
	}
	return nil
}

// runAll runs the small-call comparison against bigtool over HTTP and,
// unless -small-only is set, every other measurement after it.
func runAll() error {
	up := start(*bigtoolBin, "-http", addr())
	upURL := "http://" + up + "/mcp"
	rproxy, err := startReverseProxy("http://" + up)
	if err != nil {
		return err
	}
	if err := smallCalls(up, rproxy, startSpillway("--upstream-url", upURL)); err != nil {
		return err
	}
	if *smallOnly {
		return nil
	}
	if err := bigOutput(upURL); err != nil {
		return err
	}
	if *streamSizes != "" {
		if err := streamVsRead(upURL); err != nil {
			return err
		}
	}
	for _, measure := range []func() error{stdioComparisons, gatewayComparison, sseComparisons, fetches, hostileRuns} {
		if err := measure(); err != nil {
			return err
		}
	}
	if *slowN > 0 {
		return slowClients()
	}
	return nil
}

func memTotal() string {
	if kb := meminfoKB("MemTotal"); kb >= 0 {
		return fmt.Sprintf("%.0f GiB RAM", float64(kb)/(1<<20))
	}
	return "RAM unknown"
}

// meminfoKB is one kB figure of /proc/meminfo, -1 if unknown.
func meminfoKB(key string) int64 {
	if kb, ok := procKB("/proc/meminfo", key); ok {
		return kb
	}
	return -1
}

// procKB reads the figure of the line "key: N kB" in a /proc file such as
// /proc/meminfo or /proc/PID/status; ok is false when the file or the
// line is missing.
func procKB(path, key string) (kb int64, ok bool) {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(l, key+":"); found {
			kb, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb, true
		}
	}
	return 0, false
}

func addr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs a server whose last argument is its listen address and waits
// until it accepts connections.
func start(bin string, args ...string) string {
	return launch(exec.Command(bin, args...))
}

// launch starts a prepared command whose last argument is its listen
// address and waits until it accepts connections.
func launch(cmd *exec.Cmd) string {
	return launchAt(cmd, cmd.Args[len(cmd.Args)-1])
}

// launchAt starts cmd and waits until it accepts connections on a, which
// may stand anywhere in its arguments. A command that does not start or
// never listens panics with a setupError.
func launchAt(cmd *exec.Cmd, a string) string {
	if cmd.Stderr == nil {
		cmd.Stderr = io.Discard
	}
	if err := cmd.Start(); err != nil {
		panic(setupError{fmt.Errorf("%w (make build makes bin/spillway and bin/bigtool)", err)})
	}
	children = append(children, cmd)
	listens[a] = cmd
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", a); err == nil {
			c.Close()
			return a
		}
	}
	panic(setupError{fmt.Errorf("%s never listened on %s", cmd.Path, a)})
}

// setupError is the panic value of a failed setup (a binary that does not
// start, a server that never listens). mainCode recovers it and reports
// it in one line, because the fix is the user's and a stack would not
// help.
type setupError struct{ err error }

// mcpToken is the bearer token for /mcp of every Spillway this program
// starts: it is written as the local token, and runs that pass
// --auth-tokens name it as the one inbound token.
const mcpToken = "load-token-0123456789abcdef"

// startSpillway runs `spillway serve` with the extra arguments, on a
// fresh data folder, and returns its listen address.
func startSpillway(extra ...string) string { return startSpillwayEnv(nil, extra...) }

// startSpillwayEnv is startSpillway with env added to this program's
// environment.
func startSpillwayEnv(env []string, extra ...string) string {
	cmd := spillwayCommand("error", extra...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return launch(cmd)
}

// spillwayCommand prepares `spillway serve` at the given log level on a
// fresh data folder whose mcp.token is mcpToken, with the extra arguments,
// listening on a free loopback address (its last argument, as launch
// wants).
func spillwayCommand(logLevel string, extra ...string) *exec.Cmd {
	return spillwayCommandOf(*spillwayBin, logLevel, extra...)
}

// spillwayCommandOf is spillwayCommand of the spillway binary bin.
func spillwayCommandOf(bin, logLevel string, extra ...string) *exec.Cmd {
	dir := tempDir("spillway-load-")
	if err := os.WriteFile(filepath.Join(dir, "mcp.token"), []byte(mcpToken+"\n"), 0o600); err != nil {
		panic(err)
	}
	args := append([]string{"serve", "--data", dir, "--log-level", logLevel}, extra...)
	return exec.Command(bin, append(args, "--listen", addr())...)
}

// selfServer prepares this binary in one of its internal server modes
// (-rproxy, -relay-cmd, -copy-proxy, -upstream-sse). The command holds
// the child's stdin pipe until Wait; the pipe closing tells the child to
// exit (see exitWithParent), so no child outlives this process.
func selfServer(args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// startSelf runs selfServer(args...), whose last argument must be its
// listen address, and returns that address once it accepts connections.
func startSelf(args ...string) (string, error) {
	cmd, err := selfServer(args...)
	if err != nil {
		return "", err
	}
	return launch(cmd), nil
}

// listens maps the listen address of each server started to its command.
var listens = map[string]*exec.Cmd{}

// pid is the process id of the server listening on listen.
func pid(listen string) int {
	if c := listens[listen]; c != nil {
		return c.Process.Pid
	}
	return 0
}

// stopChild stops the server listening on a (an interrupt, then a kill
// after 10 s) and forgets it.
func stopChild(a string) {
	c := listens[a]
	if c == nil {
		return
	}
	delete(listens, a)
	children = slices.DeleteFunc(children, func(x *exec.Cmd) bool { return x == c })
	stopGently(c)
}

// peakRSS is a process's high-water resident set, in bytes.
func peakRSS(pid int) int64 { return procStatusKB(pid, "VmHWM") << 10 }

// procStatusKB is one kB figure of /proc/PID/status (VmRSS, VmHWM), 0 if
// the process is gone.
func procStatusKB(pid int, key string) int64 {
	kb, _ := procKB(fmt.Sprintf("/proc/%d/status", pid), key)
	return kb
}

// session is a raw session-era MCP client: it posts messages to url and
// sends back the session id the server gave. It is not safe for
// concurrent use.
type session struct {
	url, id string
	n       int // the id of the last request sent by call
	c       *http.Client
	// token is the bearer token sent; empty sends mcpToken, which
	// Spillway's /mcp needs and the anchors ignore.
	token string
	// accept is the Accept header; empty asks for JSON or SSE.
	accept string
}

func open(url string) (*session, error) {
	s := &session{url: url, c: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	if _, err := s.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"load","version":"1"}}`); err != nil {
		return nil, err
	}
	_, err := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s, err
}

func (s *session) post(body string) ([]byte, error) {
	resp, err := s.do(context.Background(), body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	return b, err
}

// do posts one message in the session and returns the response; it
// keeps the session id the server sends.
func (s *session) do(ctx context.Context, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", cmp.Or(s.accept, "application/json, text/event-stream"))
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+cmp.Or(s.token, mcpToken))
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	resp, err := s.c.Do(req)
	if err != nil {
		return nil, err
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		s.id = id
	}
	return resp, nil
}

func (s *session) call(method, params string) ([]byte, error) {
	s.n++
	b, err := s.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, s.n, method, params))
	if err == nil && !bytes.Contains(b, []byte(`"result"`)) {
		err = fmt.Errorf("%s: %.300s", method, b)
	}
	return b, err
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

func bigOutput(upURL string) error {
	args := fmt.Sprintf(`{"name":"query","arguments":{"rows":%d,"seed":1}}`, *bigRows)
	timed := func(url string) (time.Duration, int, error) {
		s, err := open(url)
		if err != nil {
			return 0, 0, err
		}
		t0 := time.Now()
		b, err := s.call("tools/call", args)
		return time.Since(t0), len(b), err
	}
	if _, _, err := timed(upURL); err != nil { // warm-up: the first call pays for the upstream's start
		return err
	}
	dt, dn, err := timed(upURL)
	if err != nil {
		return err
	}
	fmt.Printf("## one big tool output (query, %d rows: a %.1f MB message)\n\n", *bigRows, float64(dn)/1e6)
	fmt.Printf("| path | time | bytes to the agent | proxy peak RSS | RSS / message |\n|---|---|---|---|---|\n")
	fmt.Printf("| direct to bigtool (anchor) | %v | %d | – | – |\n", dt.Round(time.Millisecond), dn)
	for _, mode := range []struct{ name, flag string }{{"through Spillway, offloading", "--offload=true"}, {"through Spillway, pass-through", "--offload=false"}} {
		a := startSpillway("--upstream-url", upURL, mode.flag)
		base := peakRSS(pid(a))
		t, n, err := timed("http://" + a + "/mcp")
		if err != nil {
			return err
		}
		peak := peakRSS(pid(a))
		fmt.Printf("| %s | %v (%.2f× direct) | %d | %.1f MB (%.1f MB at start) | %.2f |\n", mode.name, t.Round(time.Millisecond),
			float64(t)/float64(dt), n, float64(peak)/1e6, float64(base)/1e6, float64(peak)/float64(dn))
	}
	fmt.Println()
	return nil
}

// upload stores body through the management API of the Spillway at sp
// and returns its resource_link.
func upload(sp, token string, body []byte) (link struct{ URI, HTTPURL string }, err error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+sp+"/v1/artifacts?ttl=30m", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return link, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return link, fmt.Errorf("upload: %s", resp.Status)
	}
	return link, json.NewDecoder(resp.Body).Decode(&link)
}

// streamVsRead compares resources/stream (direct mode: raw bytes) with
// resources/read (base64 in a JSON-RPC response) for the same artifact.
// Each measurement runs in a fresh Spillway and a fresh client process,
// so both peak RSS figures are its own.
func streamVsRead(upURL string) error {
	fmt.Printf("## resources/stream (direct) vs resources/read, one fresh server and client each\n\n")
	fmt.Printf("| size | method | bytes on the wire | time | Spillway peak RSS | client peak RSS |\n|---|---|---|---|---|---|\n")
	const token = mcpToken
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, ms := range strings.Split(*streamSizes, ",") {
		mib, err := strconv.Atoi(strings.TrimSpace(ms))
		if err != nil {
			return err
		}
		for _, method := range []string{"resources/read", "resources/stream"} {
			sp := startSpillway("--upstream-url", upURL, "--auth-tokens", token+"=load", "--max-inline-read", strconv.Itoa(200<<20))
			body := make([]byte, mib<<20)
			rand.Read(body)
			link, err := upload(sp, token, body)
			if err != nil {
				return err
			}
			base := peakRSS(pid(sp))
			out, err := exec.Command(self, "-client", method, "-client-url", "http://"+sp+"/mcp", "-client-uri", link.URI, "-client-token", token).Output()
			if err != nil {
				return fmt.Errorf("client %s: %w", method, err)
			}
			var r struct {
				Bytes   int64
				Seconds float64
				RSS     int64
			}
			if err := json.Unmarshal(out, &r); err != nil {
				return fmt.Errorf("client output %q: %w", out, err)
			}
			fmt.Printf("| %d MiB | %s | %.1f MB | %.0f ms | %.0f MB (%.0f MB before) | %.0f MB |\n", mib, method, float64(r.Bytes)/1e6,
				r.Seconds*1000, float64(peakRSS(pid(sp)))/1e6, float64(base)/1e6, float64(r.RSS)/1e6)
		}
	}
	fmt.Println()
	return nil
}

var (
	clientURL   = flag.String("client-url", "", "internal")
	clientURI   = flag.String("client-uri", "", "internal")
	clientToken = flag.String("client-token", "", "internal")
)

// client is one measured MCP client: it initializes with resourceStreaming,
// asks for the artifact and consumes the answer as a real client would
// (resources/read: parse the JSON and decode the base64; resources/stream:
// read the bytes), then prints bytes, seconds and its own peak RSS.
func client() int {
	s := &session{url: *clientURL, c: &http.Client{}, token: *clientToken, accept: "application/json, text/event-stream, */*"}
	ctx := context.Background()
	resp, err := s.do(ctx, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"resourceStreaming":{}},"clientInfo":{"name":"load","version":"1"}}}`)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t0 := time.Now()
	resp, err = s.do(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q,"params":{"uri":%q}}`, *clientMode, *clientURI))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, err := consumeArtifact(resp.Body)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	resp.Body.Close()
	secs := time.Since(t0).Seconds()
	json.NewEncoder(os.Stdout).Encode(map[string]any{"bytes": n, "seconds": secs, "rss": peakRSS(os.Getpid())})
	return 0
}

// consumeArtifact reads the answer to the client's request as a real
// client would: for resources/read it parses the JSON and decodes the
// base64, for resources/stream it reads the bytes. It returns the bytes
// read.
func consumeArtifact(body io.Reader) (int64, error) {
	if *clientMode != "resources/read" {
		n, _ := io.Copy(io.Discard, body)
		return n, nil
	}
	b, _ := io.ReadAll(body)
	var r struct {
		Result struct {
			Contents []struct{ Blob string } `json:"contents"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &r) != nil || len(r.Result.Contents) != 1 {
		return 0, fmt.Errorf("resources/read: %.200s", b)
	}
	if _, err := base64.StdEncoding.DecodeString(r.Result.Contents[0].Blob); err != nil {
		return 0, err
	}
	return int64(len(b)), nil
}
