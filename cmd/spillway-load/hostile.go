package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spillway-dev/spillway/artifact/preview/previewtest"
)

// The held-open run (-hostile-only): -hostile results at once on one
// session, each a hostile image (a 127 KiB progressive JPEG declaring
// 5400×4100 pixels, which Go's decoder would hold as 318 MiB of DCT
// coefficients) or a structuredContent of 20 KB checked against a 1.3 KB
// outputSchema of 20 nested anyOf levels (2^20 paths for the validator),
// while a ping is sent on the same session and face every pingEvery. Each
// side reports its peak RSS above idle, the pings' latency while the
// results were in flight, and what the client received. The anchor is the
// bare relay (-relay-cmd) in front of the same upstream, which only copies
// bytes: what the upstream itself costs.

var (
	hostileOnly   = flag.Bool("hostile-only", false, "run only the held-open run: hostile images and schemas at once, pings meanwhile")
	hostileN      = flag.Int("hostile", 16, "hostile results at once in the held-open run")
	hostileRounds = flag.Int("hostile-rounds", 5, "rounds of -hostile results in the held-open run")
	hostileKinds  = flag.String("hostile-kinds", "both", "what the held-open run's results carry: images, schemas, both (half each), or bound (images just under the thumbnail bound, which are drawn)")
)

// pingEvery is how often the held-open run pings while results are in flight.
const pingEvery = 20 * time.Millisecond

// hostileTimeout bounds one side of the held-open run: a side whose calls
// are not all answered by then is reported as failed.
const hostileTimeout = 3 * time.Minute

// hostileResult is one side's figures in the held-open run.
type hostileResult struct {
	name               string
	idle, peak         int64 // bytes: resident at idle, high-water mark
	pings              []time.Duration
	answered, isError  int
	thumbnails, linked int
	wall               time.Duration
	err                error
}

// hostileRuns measures the held-open run on Spillway's HTTP and stdio
// faces and on the bare relay, in front of this binary's stdio upstream.
func hostileRuns() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	up := []string{self, "-upstream-stdio"}
	fmt.Printf("## Held open: %d rounds of %d hostile results at once on one session (%s), a ping every %v meanwhile\n\n",
		*hostileRounds, *hostileN, *hostileKinds, pingEvery)
	var rs []hostileResult

	a := startSpillway("--upstream-cmd", strings.Join(up, " "))
	rs = append(rs, heldOpen("Spillway, HTTP face", newHTTPFace("http://"+a+"/mcp", pid(a))))
	stopChild(a)

	if f, err := newStdioFace(up); err != nil {
		rs = append(rs, hostileResult{name: "Spillway, stdio face", err: err})
	} else {
		rs = append(rs, heldOpen("Spillway, stdio face", f))
		f.close()
	}

	if a, err = startRelay(up); err != nil {
		return err
	}
	rs = append(rs, heldOpen("bare relay (anchor)", newHTTPFace("http://"+a+"/mcp", pid(a))))
	stopChild(a)
	printHostile(rs)
	return nil
}

// printHostile prints the held-open run's table, a row per side.
func printHostile(rs []hostileResult) {
	fmt.Println("| side | peak RSS above idle | pings answered | ping p50 | ping p99 | ping max | results answered | tool errors | thumbnails | with a link | wall |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		if r.err != nil {
			fmt.Printf("| %s | failed: %v |\n", r.name, r.err)
			continue
		}
		var p50, p99, most time.Duration
		if len(r.pings) > 0 {
			p50, p99, most = percentile(r.pings, 0.5), percentile(r.pings, 0.99), percentile(r.pings, 1)
		}
		fmt.Printf("| %s | %.1f MB (idle %.1f MB) | %d | %.1f ms | %.1f ms | %.1f ms | %d/%d | %d | %d | %d | %.2f s |\n",
			r.name, float64(r.peak-r.idle)/1e6, float64(r.idle)/1e6, len(r.pings), ms(p50), ms(p99), ms(most),
			r.answered, *hostileN**hostileRounds, r.isError, r.thumbnails, r.linked, r.wall.Seconds())
	}
	fmt.Println()
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// hostileCall returns the params of the i-th call in a round of the
// held-open run.
func hostileCall(i int) string {
	image := `{"name":"big","arguments":{"kind":"jpeg","bytes":1}}`
	schema := `{"name":"shaped","arguments":{}}`
	switch *hostileKinds {
	case "images":
		return image
	case "bound":
		return `{"name":"big","arguments":{"kind":"jpeg-bound","bytes":1}}`
	case "schemas":
		return schema
	}
	if i%2 == 0 {
		return image
	}
	return schema
}

// tally counts what one answer carried; it reports whether the answer
// was a result.
func (r *hostileResult) tally(answer []byte) bool {
	var m struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &m) != nil || m.Result == nil {
		return false
	}
	r.answered++
	if m.Result.IsError {
		r.isError++
	}
	for _, c := range m.Result.Content {
		switch c.Type {
		case "image":
			r.thumbnails++
		case "resource_link":
			r.linked++
		}
	}
	return true
}

// face is one session of a proxy under the held-open run. ask sends one
// request and returns its answer (a JSON-RPC message); it is safe for
// concurrent use.
type face interface {
	ask(ctx context.Context, id int, method, params string) ([]byte, error)
	pid() int
}

// heldOpen is the held-open run on one session: after an idle figure,
// rounds of -hostile calls at once, a ping every pingEvery on the same
// session while each round is in flight.
func heldOpen(name string, f face) (r hostileResult) {
	r.name = name
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	if _, err := f.ask(ctx, 2, "tools/list", `{}`); err != nil {
		r.err = err
		return r
	}
	time.Sleep(500 * time.Millisecond) // let the process settle before its idle figure
	r.idle = procStatusKB(f.pid(), "VmRSS") << 10
	start := time.Now()
	var mu sync.Mutex // guards r against the calls' goroutines
	id := 1000
	for range *hostileRounds {
		done := r.callAll(ctx, f, &mu, &id)
		r.pingUntil(ctx, f, done, &id)
	}
	r.wall = time.Since(start)
	r.peak = peakRSS(f.pid())
	return r
}

// callAll sends one round of -hostile calls at once on f, taking their
// ids from *id, and tallies each answer into r under mu. The channel it
// returns is closed once every call has its answer.
func (r *hostileResult) callAll(ctx context.Context, f face, mu *sync.Mutex, id *int) <-chan struct{} {
	var wg sync.WaitGroup
	for i := range *hostileN {
		*id++
		n := *id
		wg.Go(func() {
			b, err := f.ask(ctx, n, "tools/call", hostileCall(i))
			mu.Lock()
			defer mu.Unlock()
			if err == nil && !r.tally(b) {
				err = fmt.Errorf("an answer that is no result: %.200q", b)
			}
			if err != nil && r.err == nil {
				r.err = err
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// pingUntil pings on f every pingEvery until done is closed, taking ids
// from *id, and records each answered ping's latency.
func (r *hostileResult) pingUntil(ctx context.Context, f face, done <-chan struct{}, id *int) {
	for {
		select {
		case <-done:
			return
		case <-time.After(pingEvery):
		}
		*id++
		t := time.Now()
		if _, err := f.ask(ctx, *id, "ping", `{}`); err == nil {
			r.pings = append(r.pings, time.Since(t))
		}
	}
}

// httpFace is one session-era MCP session on a proxy's /mcp. An error
// opening it is kept and returned by every ask.
type httpFace struct {
	s       *session
	process int
	err     error
}

func newHTTPFace(url string, pid int) *httpFace {
	s, err := open(url)
	return &httpFace{s: s, process: pid, err: err}
}

func (f *httpFace) pid() int { return f.process }

func (f *httpFace) ask(ctx context.Context, id int, method, params string) ([]byte, error) {
	if f.err != nil {
		return nil, f.err
	}
	resp, err := f.s.do(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return sseData(b), err
}

// sseData returns the JSON-RPC message in an answer: the body itself if
// it is JSON, else its last SSE data line.
func sseData(b []byte) []byte {
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		var last []byte
		for l := range bytes.Lines(b) {
			if d, ok := bytes.CutPrefix(l, []byte("data:")); ok {
				last = bytes.TrimSpace(d)
			}
		}
		return last
	}
	return b
}

// stdioFace drives `spillway serve --stdio`: it writes each request as a
// line to its stdin and hands each line of its stdout to the request with
// the same id.
type stdioFace struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	wmu     sync.Mutex // one line at a time
	mu      sync.Mutex
	waiting map[string]chan []byte
}

func newStdioFace(up []string) (*stdioFace, error) {
	cmd := exec.Command(*spillwayBin, "serve", "--stdio", "--data", tempDir("spillway-load-"), "--log-level", "error",
		"--upstream-cmd", strings.Join(up, " "))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &stdioFace{cmd: cmd, in: in, waiting: map[string]chan []byte{}}
	go f.read(out)
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	if _, err := f.ask(ctx, 1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"load","version":"1"}}`); err != nil {
		f.close()
		return nil, err
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	_, err = fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return f, err
}

func (f *stdioFace) pid() int { return f.cmd.Process.Pid }

// read hands each answer on out to the request waiting for its id.
func (f *stdioFace) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		f.mu.Lock()
		ch := f.waiting[string(m.ID)]
		delete(f.waiting, string(m.ID))
		f.mu.Unlock()
		if ch != nil {
			ch <- bytes.Clone(sc.Bytes())
		}
	}
}

func (f *stdioFace) ask(ctx context.Context, id int, method, params string) ([]byte, error) {
	ch := make(chan []byte, 1)
	f.mu.Lock()
	f.waiting[fmt.Sprint(id)] = ch
	f.mu.Unlock()
	f.wmu.Lock()
	_, err := fmt.Fprintf(f.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
	f.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case b := <-ch:
		return b, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s %d: no answer: %w", method, id, ctx.Err())
	}
}

// close closes the process's stdin and waits for it to exit, killing it
// if it has not gone in 10 s.
func (f *stdioFace) close() {
	f.in.Close()
	t := time.AfterFunc(10*time.Second, func() { f.cmd.Process.Kill() })
	f.cmd.Wait()
	t.Stop()
}

// hostileJPEG is the held-open run's image, base64: 127 KiB of progressive
// JPEG declaring 5400×4100 pixels of 4:4:4, which a decoder that keeps
// every coefficient holds as 318 MiB.
var hostileJPEG = sync.OnceValue(func() string {
	return base64.StdEncoding.EncodeToString(previewtest.ProgressiveJPEG(5400, 4100, 0x11, 0x11, 0x11))
})

// boundJPEG is an image just under the thumbnail bound, base64: 3840×2160
// of progressive 4:2:0 (a 4K screenshot), which is drawn.
var boundJPEG = sync.OnceValue(func() string {
	return base64.StdEncoding.EncodeToString(previewtest.ProgressiveJPEG(3840, 2160, 0x22, 0x11, 0x11))
})

// hostileSchema is the "shaped" tool's outputSchema: 20 levels, each an
// anyOf naming the next level twice, so a validator that tries every
// branch walks 2^20 paths for each value; 1.3 KB.
func hostileSchema() string {
	const levels = 20
	var b strings.Builder
	b.WriteString(`{"type":"object","$ref":"#/$defs/l0","$defs":{`)
	for i := range levels {
		fmt.Fprintf(&b, `"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"l%d":{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object"}}}}}}`, levels)
	return b.String()
}

// shapedRows is the "shaped" tool's structuredContent: 20 KB of rows.
func shapedRows() string {
	var b strings.Builder
	b.WriteString(`{"rows":[`)
	for i := 0; b.Len() < 20<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"region":"emea","note":"row %d of the shaped tool's output"}`, i, i)
	}
	b.WriteString(`]}`)
	return b.String()
}
