package mcpproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy/policytest"
)

// guard is how long a test waits for something that must happen before
// it calls it a deadlock: generous, since the machine's load varies.
const guard = 60 * time.Second

// facesProxy is a proxy in front of the scripted child in mode, served on
// loopback by srv; what the child says on stderr (its cancellations) goes
// to childLog.
func facesProxy(t *testing.T, mode string, o mcpproxy.Options) (p *mcpproxy.Proxy, srv *http.Server, url string, childLog *policytest.Buffer) {
	t.Helper()
	childLog = &policytest.Buffer{}
	cmd, args := childCmd(mode)
	o.Upstream = &mcpproxy.CommandUpstream{Command: cmd, Args: args,
		Logger: slog.New(slog.NewTextHandler(childLog, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	p, err := mcpproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv = &http.Server{Handler: p}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p, srv, "http://" + ln.Addr().String() + "/mcp", childLog
}

// waitChild waits until the child has said what on stderr n times, or
// fails the test after a generous guard (a deadlock, not a timing).
func waitChild(t *testing.T, childLog *policytest.Buffer, what string, n int, why string) {
	t.Helper()
	for deadline := time.Now().Add(guard); strings.Count(childLog.String(), what) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the child said %q %d times, not %d:\n%s", why, what, strings.Count(childLog.String(), what), n, childLog)
		}
	}
}

// stalledPost sends a POST to /mcp on a raw connection that never reads
// what comes back (with a small receive buffer, so the server's writes
// block soon).
func stalledPost(t *testing.T, url, body string, header map[string]string) {
	t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	var h strings.Builder
	for k, v := range header {
		fmt.Fprintf(&h, "%s: %s\r\n", k, v)
	}
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n%s",
		host, h.String(), len(body), body)
}

// statelessEndless is a stateless tools/call of the endless tool with
// progress token tok, and its headers.
func statelessEndless(tok string) (string, map[string]string) {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"endless","arguments":{},"_meta":{"progressToken":"` + tok +
			`","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "endless"}
}

// TestFacesStalledClientIsCut: a stateless client that stops reading its
// stream while the upstream keeps sending is cut by the write deadline,
// and its call is cancelled upstream.
func TestFacesStalledClientIsCut(t *testing.T) {
	_, _, url, childLog := facesProxy(t, "plain", mcpproxy.Options{WriteStallTimeout: time.Second})
	body, hdr := statelessEndless("a")
	stalledPost(t, url, body, hdr)
	waitChild(t, childLog, "cancelled ", 1, "the stalled client's call was not cancelled upstream")
}

// TestFacesCloseEndsEveryStream: Close ends every stream of the
// terminating face at once — a session's GET stream and a silent call's
// POST stream, a silent stateless call, and the streams of clients that
// stopped reading in the middle of a write, in both eras — so the HTTP
// server's graceful shutdown returns. No write deadline helps here: it is
// off.
func TestFacesCloseEndsEveryStream(t *testing.T) {
	p, srv, url, childLog := facesProxy(t, "plain", mcpproxy.Options{WriteStallTimeout: -1})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	sid := initSession(t, ctx, url)

	var ended []chan string // each reading client's end, with what it saw
	read := func(name string, do func() (*http.Response, error)) {
		ch := make(chan string, 1)
		ended = append(ended, ch)
		go func() {
			resp, err := do()
			if err != nil {
				ch <- name + ": " + err.Error()
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ch <- name + ": " + resp.Status
		}()
	}
	read("GET stream", func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		return http.DefaultClient.Do(req)
	})
	read("session POST", func() (*http.Response, error) {
		return sessionPost(ctx, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"silent","arguments":{}}}`)
	})
	read("stateless POST", func() (*http.Response, error) {
		return statelessPost(ctx, url, 3, "tools/call", map[string]any{"name": "silent", "arguments": map[string]any{}})
	})
	body, hdr := statelessEndless("a")
	stalledPost(t, url, body, hdr)
	stalledPost(t, url, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"endless","arguments":{},"_meta":{"progressToken":"b"}}}`,
		map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"})
	// Both stalled writers are blocked now: each call sent far more than
	// a socket's buffers hold, to a client that reads nothing.
	waitChild(t, childLog, "sent 3000", 2, "the calls never got going")

	closeProxy(t, p)
	sctx, scancel := context.WithTimeout(context.Background(), guard)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatalf("the server's graceful shutdown after Close: %v (a handler is still running)", err)
	}
	for _, ch := range ended {
		select {
		case got := <-ch:
			t.Log(got)
		case <-time.After(guard):
			t.Fatal("a client's stream did not end")
		}
	}
}

// TestFacesStdioCloseEndsChildGroup: Close ends ServeStdio and its child's
// whole process group (`serve --stdio` stopped by SIGTERM closes the proxy
// and exits; what Close leaves running outlives Spillway).
func TestFacesStdioCloseEndsChildGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	cmd, args := childCmd("plain")
	script := "sleep 300 & echo $! > " + pidFile + "; exec " + cmd + " " + strings.Join(args, " ")
	p, inW, outR, served := stdioProxy(t, context.Background(), &mcpproxy.CommandUpstream{Command: "sh", Args: []string{"-c", script}})
	fmt.Fprintln(inW, initBody)
	if line, err := bufio.NewReader(outR).ReadString('\n'); err != nil || !strings.Contains(line, `"result"`) {
		t.Fatalf("initialize over stdio: %q %v", line, err)
	}
	go io.Copy(io.Discard, outR)
	b, err := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("the child's grandchild: %q %v", b, err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL) // on failure, leave nothing behind

	closeProxy(t, p)
	// SIGKILL went to the group before Close returned; the kernel ends the
	// process soon after.
	for deadline := time.Now().Add(guard); running(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d of the child's group still runs after Close", pid)
		}
	}
	select {
	case <-served:
	case <-time.After(guard):
		t.Fatal("ServeStdio did not return after Close")
	}
}

// closeProxy closes p, failing the test if Close does not return.
func closeProxy(t *testing.T, p *mcpproxy.Proxy) {
	t.Helper()
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(guard):
		t.Fatal("Close did not return")
	}
}

// stdioProxy is a proxy for up serving stdio on pipes until t ends: the
// client's end of its input and output, and ServeStdio's result.
func stdioProxy(t *testing.T, ctx context.Context, up mcpproxy.Upstream) (p *mcpproxy.Proxy, in *io.PipeWriter, out *io.PipeReader, served <-chan error) {
	t.Helper()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { inW.Close() })
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, inR, outW) }()
	return p, inW, outR, done
}

// running reports whether process pid runs (exists and is no zombie).
func running(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(st), ") Z ")
}
