package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
	"github.com/spillway-dev/spillway/policy/policytest"
)

// The real `spillway serve` on a real MinIO reached through a proxy that
// turns hostile: a hung store answers fetches and uploads with 503 and
// Retry-After within 10 s (the default store timeout is 5 s), a body that
// stalls mid-stream is cut after the store's idle timeout, and the server
// serves again once the store does.
func TestServeHungStore(t *testing.T) {
	const bound = 10 * time.Second
	srv := miniotest.Start(t)
	proxy := miniotest.NewFaultProxy(t, srv.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	store := fmt.Sprintf("s3://hung?endpoint=%s&secure=false&create=true&region=us-east-1&idle-timeout=2s", proxy.Addr)
	base := runServe(t, "--data", t.TempDir(), "--store", store, "--auth-tokens", testToken+"=acme")

	upload := func(body []byte) (*http.Response, artifact.ResourceLink) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/artifacts", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l artifact.ResourceLink
		json.NewDecoder(resp.Body).Decode(&l)
		return resp, l
	}
	data := make([]byte, 8<<20) // past the blob cache: fetches stream from the store
	rand.Read(data)
	resp, l := upload(data)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s", resp.Status)
	}
	unavailable := func(what string, resp *http.Response, took time.Duration) {
		t.Helper()
		t.Logf("%s on a hung store: %s after %v", what, resp.Status, took.Round(10*time.Millisecond))
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || took > bound {
			t.Errorf("%s: %s, Retry-After %q after %v; want 503 with Retry-After within %v",
				what, resp.Status, resp.Header.Get("Retry-After"), took, bound)
		}
	}
	client := &http.Client{Timeout: bound + 5*time.Second}

	proxy.Set(miniotest.Hang)
	start := time.Now()
	resp, err := client.Get(l.HTTPURL)
	if err != nil {
		t.Fatalf("fetch on a hung store: no answer: %v", err)
	}
	resp.Body.Close()
	unavailable("fetch", resp, time.Since(start))

	start = time.Now()
	resp, _ = upload([]byte("small"))
	unavailable("upload", resp, time.Since(start))

	proxy.StallAfter = 256 << 10
	proxy.Set(miniotest.StallBody)
	start = time.Now()
	resp, err = client.Get(l.HTTPURL)
	if err != nil {
		t.Fatalf("fetch on a stalling store: %v", err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	t.Logf("stalled body: %s, %d bytes, %v after %v", resp.Status, n, err, took.Round(10*time.Millisecond))
	if err == nil || n >= int64(len(data)) || took > bound {
		t.Errorf("stalled body: %d of %d bytes, err %v after %v; want a cut transfer within %v", n, len(data), err, took, bound)
	}

	proxy.Set(miniotest.Pass)
	resp, err = client.Get(l.HTTPURL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after the store recovered: %s, %d bytes, %v", resp.Status, len(got), err)
	}
}

// runServe runs `spillway serve` through run, as main does, on a free
// loopback port until t ends, and returns its base URL once it answers.
func runServe(t *testing.T, args ...string) string {
	t.Helper()
	base, _ := runServeLog(t, args...)
	return base
}

// runServeLog is runServe that also returns what serve wrote to stderr
// (its log); a later --log-level in args overrides warn.
func runServeLog(t *testing.T, args ...string) (string, *policytest.Buffer) {
	t.Helper()
	addr := rsFreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := new(policytest.Buffer)
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", addr, "--log-level", "warn"}, args...), nil, io.Discard, stderr, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, stderr.String())
		}
	})
	base := "http://" + addr
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			return base, stderr
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		default:
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("serve did not answer within 30s: %s", stderr.String())
		}
	}
}

// throttle is a TCP proxy on 127.0.0.1 in front of a real server (MinIO)
// that forwards what the client sends at rate bytes per second, and with
// stallAfter > 0 stops reading from each client after that many bytes
// (keeping the connection open): a slow uplink, or a store that hangs in
// the middle of an upload. What the server sends passes freely.
type throttle struct {
	addr       string
	rate       int
	stallAfter int64
}

func newThrottle(t *testing.T, target string, rate int, stallAfter int64) *throttle {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	p := &throttle{addr: ln.Addr().String(), rate: rate, stallAfter: stallAfter}
	t.Cleanup(func() { close(done); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(c, up); c.Close() }()
			go func() { defer wg.Done(); p.forward(up, c, done); up.Close() }()
			go func() { <-done; c.Close(); up.Close() }()
		}
	}()
	return p
}

// forward copies from c to up at p.rate, and stops reading after
// p.stallAfter bytes until done.
func (p *throttle) forward(up, c net.Conn, done chan struct{}) {
	buf := make([]byte, max(p.rate/20, 1))
	start := time.Now()
	var sent int64
	for {
		if p.stallAfter > 0 && sent >= p.stallAfter {
			<-done
			return
		}
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
			sent += int64(n)
			// Sleep until the bytes sent so far fit the rate.
			time.Sleep(time.Until(start.Add(time.Duration(sent) * time.Second / time.Duration(p.rate))))
		}
		if err != nil {
			return
		}
	}
}

// TestStoreChild is the upstream of TestStoreSlowUpload, run as
// `go test -run '^TestStoreChild$' -- N`: a stdio MCP server whose one
// tool answers with a text of N bytes.
func TestStoreChild(t *testing.T) {
	i := slices.Index(os.Args, "--")
	if i < 0 || i+1 >= len(os.Args) {
		t.Skip("the upstream of TestStoreSlowUpload")
	}
	n, _ := strconv.Atoi(os.Args[i+1])
	out := bufio.NewWriterSize(os.Stdout, 256<<10)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue // a notification
		}
		switch m.Method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"1"}}}`+"\n", m.ID)
		case "tools/call":
			out.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"`)
			io.CopyN(escaper{out}, bigText(), int64(n))
			out.WriteString(`"}]}}` + "\n")
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
		out.Flush()
	}
	os.Exit(0) // stdin closed; without the test binary's "PASS" on stdout
}

// bigText is an endless log of numbered lines, the same every time.
func bigText() io.Reader {
	var pending []byte
	line := 0
	return readerFunc(func(p []byte) (int, error) {
		for len(pending) < len(p) {
			line++
			pending = fmt.Appendf(pending, "line %08d of a long tool output, as a database export prints it\n", line)
		}
		n := copy(p, pending)
		pending = pending[n:]
		return n, nil
	})
}

// escaper writes bigText's bytes as the inside of a JSON string: its
// newlines escaped, the only character in it that needs to be.
type escaper struct{ w io.Writer }

func (e escaper) Write(p []byte) (int, error) {
	if _, err := e.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte(`\n`))); err != nil {
		return 0, err
	}
	return len(p), nil
}

type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// stdioCall runs the real binary with args on --stdio until t ends, calls
// the upstream's tool once and returns the result's bytes as the client
// got them, and Spillway's stderr so far.
func stdioCall(t *testing.T, env []string, args ...string) (json.RawMessage, string) {
	t.Helper()
	cmd := exec.Command(spillwayBin(t), append([]string{"serve", "--listen", rsFreeAddr(t), "--log-level", "warn", "--stdio"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr policytest.Buffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }) // its links answer until t ends
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"export","arguments":{}}}`+"\n")
	lines, deadline := readLines(stdout), time.After(2*time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("spillway ended without answering the call: %s", stderr.String())
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && string(m.ID) == "2" {
				if m.Result == nil {
					m.Result = m.Error
				}
				return m.Result, stderr.String()
			}
		case <-deadline:
			t.Fatalf("the call was never answered: %s", stderr.String())
		}
	}
}

// The real `spillway serve --stdio` offloads a 24 MiB tool output to a real
// MinIO reached through an uplink of 2 MiB/s (16 MiB parts: each takes
// 8 s to send, with no read from the source meanwhile): storing takes
// over twice --store-stall-timeout (5 s) and keeps moving, so the client
// gets a preview and a link to the whole output. A store that stops
// reading mid-upload gets the client a tool error saying the output could
// not be stored, never the output inline. (A fixed deadline of the same
// 5 s sent all 24 MiB inline in both cases.)
func TestStoreSlowUpload(t *testing.T) {
	const size = 24 << 20
	srv := miniotest.Start(t)
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey}
	run := func(t *testing.T, stallAfter int64) (json.RawMessage, string) {
		p := newThrottle(t, srv.Endpoint, 2<<20, stallAfter)
		store := fmt.Sprintf("s3://slow?endpoint=%s&secure=false&create=true&region=us-east-1&part-size=16MiB&idle-timeout=1m", p.addr)
		return stdioCall(t, env, "--data", t.TempDir(), "--store", store, "--store-stall-timeout", "5s",
			"--stdio-max-message", "-1", "--upstream-cmd", os.Args[0]+" -test.run=^TestStoreChild$ -- "+strconv.Itoa(size))
	}
	var r struct {
		Content []json.RawMessage
		IsError bool
	}
	t.Run("moving", func(t *testing.T) {
		res, stderr := run(t, 0)
		t.Logf("the client got %d bytes", len(res))
		var l artifact.ResourceLink
		if err := json.Unmarshal(res, &r); err != nil || len(res) > 16<<10 || r.IsError || len(r.Content) != 2 ||
			json.Unmarshal(r.Content[1], &l) != nil || l.Type != "resource_link" {
			t.Fatalf("the client got %d bytes (%v), want a preview and a link: %.300s\n%s", len(res), err, res, stderr)
		}
		resp, err := http.Get(l.HTTPURL)
		if err != nil {
			t.Fatal(err)
		}
		got, want := sha256.New(), sha256.New()
		n, err := io.Copy(got, resp.Body)
		resp.Body.Close()
		io.CopyN(want, bigText(), size)
		if err != nil || n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
			t.Fatalf("the link gave %d bytes (%v), not the output", n, err)
		}
	})
	t.Run("stalled", func(t *testing.T) {
		res, stderr := run(t, 8<<20)
		t.Logf("the client got %d bytes: %.200s", len(res), res)
		if err := json.Unmarshal(res, &r); err != nil || len(res) > 1024 || !r.IsError || len(r.Content) != 1 ||
			!bytes.Contains(r.Content[0], []byte("could not be stored")) {
			t.Fatalf("the client got %d bytes (%v), want a tool error: %.300s\n%s", len(res), err, res, stderr)
		}
	})
}
