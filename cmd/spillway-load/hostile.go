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
	hostileOnly = flag.Bool("hostile-only", false, "run only the held-open run: hostile images and schemas at once, pings meanwhile")
	hostileN    = flag.Int("hostile", 16, "hostile results at once in the held-open run")
)

// pingEvery is how often the held-open run pings while results are in flight.
const pingEvery = 20 * time.Millisecond

// hostileTimeout bounds one side of the held-open run: a side whose calls
// are not all answered by then is reported as such.
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
	fmt.Printf("## Held open: %d hostile results at once on one session (half images, half schemas), a ping every %v meanwhile\n\n", *hostileN, pingEvery)
	var rs []hostileResult

	a := startSpillway("--upstream-cmd", strings.Join(up, " "))
	rs = append(rs, hostileHTTP("Spillway, HTTP face", "http://"+a+"/mcp", pid(a)))
	stopChild(a)

	rs = append(rs, hostileStdio("Spillway, stdio face", up))

	relay := exec.Command(self, "-relay-cmd", strings.Join(up, " "), "-relay-listen", addr())
	if _, err := relay.StdinPipe(); err != nil {
		return err
	}
	a = launch(relay)
	rs = append(rs, hostileHTTP("bare relay (anchor)", "http://"+a+"/mcp", pid(a)))
	stopChild(a)

	fmt.Println("| side | peak RSS above idle | pings answered | ping p50 | ping max | results answered | tool errors | thumbnails | with a link | wall |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		if r.err != nil {
			fmt.Printf("| %s | failed: %v |\n", r.name, r.err)
			continue
		}
		p50, most := time.Duration(0), time.Duration(0)
		if len(r.pings) > 0 {
			p50, most = percentile(r.pings, 0.5), percentile(r.pings, 1)
		}
		fmt.Printf("| %s | %.1f MB (idle %.1f MB) | %d | %.1f ms | %.1f ms | %d/%d | %d | %d | %d | %.2f s |\n",
			r.name, float64(r.peak-r.idle)/1e6, float64(r.idle)/1e6, len(r.pings), ms(p50), ms(most),
			r.answered, *hostileN, r.isError, r.thumbnails, r.linked, r.wall.Seconds())
	}
	fmt.Println()
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// hostileCall is the params of the held-open run's i-th call.
func hostileCall(i int) string {
	if i%2 == 0 {
		return `{"name":"big","arguments":{"kind":"jpeg","bytes":1}}`
	}
	return `{"name":"shaped","arguments":{}}`
}

// tally counts what one answer carried.
func (r *hostileResult) tally(answer []byte) {
	var m struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &m) != nil || m.Result == nil {
		return
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
}

// hostileHTTP is the held-open run against a session-era /mcp.
func hostileHTTP(name, url string, pid int) (r hostileResult) {
	r.name = name
	s, err := open(url)
	if err == nil {
		_, err = s.call("tools/list", `{}`)
	}
	if err != nil {
		r.err = err
		return r
	}
	time.Sleep(500 * time.Millisecond) // let the process settle before its idle figure
	r.idle = procStatusKB(pid, "VmRSS") << 10
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	answers := make([][]byte, *hostileN)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range *hostileN {
		wg.Go(func() {
			resp, err := s.do(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, 1000+i, hostileCall(i)))
			if err == nil {
				answers[i], _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for n := 0; ; n++ {
		select {
		case <-done:
			r.wall = time.Since(start)
			r.peak = peakRSS(pid)
			for _, a := range answers {
				r.tally(sseData(a))
			}
			return r
		case <-time.After(pingEvery):
		}
		t := time.Now()
		resp, err := s.do(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 5000+n))
		if err != nil {
			continue // the deadline: the calls' wait reports it
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r.pings = append(r.pings, time.Since(t))
	}
}

// sseData is the JSON-RPC message of an answer given as JSON or as SSE
// (its last data line).
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

// hostileStdio is the held-open run against `spillway serve --stdio`: the
// calls and the pings are lines on its stdin, the answers lines on its
// stdout, told apart by id.
func hostileStdio(name string, up []string) (r hostileResult) {
	r.name = name
	cmd := exec.Command(*spillwayBin, "serve", "--stdio", "--data", tempDir("spillway-load-"), "--log-level", "error",
		"--upstream-cmd", strings.Join(up, " "))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		r.err = err
		return r
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.err = err
		return r
	}
	if err := cmd.Start(); err != nil {
		r.err = err
		return r
	}
	defer func() {
		in.Close()
		t := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
		cmd.Wait()
		t.Stop()
	}()
	var mu sync.Mutex
	waiting := map[string]chan []byte{}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
				continue
			}
			mu.Lock()
			ch := waiting[string(m.ID)]
			delete(waiting, string(m.ID))
			mu.Unlock()
			if ch != nil {
				ch <- bytes.Clone(sc.Bytes())
			}
		}
	}()
	var wmu sync.Mutex
	send := func(id int, method, params string) chan []byte {
		ch := make(chan []byte, 1)
		mu.Lock()
		waiting[fmt.Sprint(id)] = ch
		mu.Unlock()
		wmu.Lock()
		defer wmu.Unlock()
		fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		return ch
	}
	wait := func(ch chan []byte) ([]byte, error) {
		select {
		case b := <-ch:
			return b, nil
		case <-time.After(hostileTimeout):
			return nil, fmt.Errorf("no answer in %v", hostileTimeout)
		}
	}
	if _, err := wait(send(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"load","version":"1"}}`)); err != nil {
		r.err = err
		return r
	}
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if _, err := wait(send(2, "tools/list", `{}`)); err != nil {
		r.err = err
		return r
	}
	time.Sleep(500 * time.Millisecond)
	r.idle = procStatusKB(cmd.Process.Pid, "VmRSS") << 10
	calls := make([]chan []byte, *hostileN)
	start := time.Now()
	for i := range calls {
		calls[i] = send(1000+i, "tools/call", hostileCall(i))
	}
	done := make(chan struct{})
	go func() {
		for _, ch := range calls {
			if b, err := wait(ch); err == nil {
				mu.Lock()
				r.tally(b)
				mu.Unlock()
			}
		}
		close(done)
	}()
	for n := 0; ; n++ {
		select {
		case <-done:
			r.wall = time.Since(start)
			r.peak = peakRSS(cmd.Process.Pid)
			return r
		case <-time.After(pingEvery):
		}
		t := time.Now()
		if _, err := wait(send(5000+n, "ping", `{}`)); err == nil {
			r.pings = append(r.pings, time.Since(t))
		}
	}
}

// hostileJPEG is the held-open run's image, base64: 127 KiB of progressive
// JPEG declaring 5400×4100 pixels of 4:4:4, which a decoder that keeps
// every coefficient holds as 318 MiB.
var hostileJPEG = sync.OnceValue(func() string {
	return base64.StdEncoding.EncodeToString(previewtest.ProgressiveJPEG(5400, 4100))
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
