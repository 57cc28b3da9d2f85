package mcpproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// An upstream that starts a big text and then stalls, more times than
// strings are worked on as they arrive (eight), each time until the agent
// gives up: every spill file and staged copy of the abandoned strings is
// closed, and the next big output is offloaded whole and right. (Spill
// files and stagings are counted among the process's open descriptors:
// the spill files are unlinked at once.)
func TestBigSSEStallReleases(t *testing.T) {
	text := newBigText(8 << 20)
	var stall atomic.Bool
	started, release := make(chan struct{}, 1), make(chan struct{})
	up := bigSSEServer(t, func(w io.Writer) {
		io.WriteString(w, `{"content":[{"type":"text","text":"`)
		if stall.Load() {
			newBigText(4 << 20).escaped(w)
			w.(*bufio.Writer).Flush()
			started <- struct{}{}
			<-release // half a string, then nothing
			return
		}
		text.escaped(w)
		io.WriteString(w, `"}]}`)
	})
	t.Cleanup(func() { close(release) })
	svc, url := offloadingSpillway(t, up)
	// An *os.File left open is closed by its finalizer at some garbage
	// collection: none runs here, so only closing counts.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	base := openFiles(t)
	stall.Store(true)
	for i := range 10 {
		c := &rawClient{url: url}
		c.do(t, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
		c.notify(t, "notifications/initialized")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", c.session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done <- err
		}()
		<-started
		// The proxy has the half string on disk (spilled, staged) before
		// the agent gives up.
		waitFor(t, fmt.Sprintf("stall %d: the half string spilled", i), func() bool { return openFiles(t) > base })
		cancel()
		if err := <-done; err == nil {
			t.Fatalf("stall %d: the call ended without an error", i)
		}
		waitFor(t, fmt.Sprintf("stall %d: its files closed", i), func() bool { return openFiles(t) == base })
	}
	stall.Store(false)
	_, size, head := bigCall(t, url)
	if size > 8000 {
		t.Fatalf("after the stalls the agent got %d bytes: %.300s", size, head)
	}
	if artifactSum(t, svc, head, 0) != text.sum() {
		t.Errorf("after the stalls the artifact differs from the output")
	}
}

// A stdio child that stops mid-string for good holds its half string
// (spilled, staged, an early slot) only as long as it lives: once the
// agent has given up and the proxy stops the child, every file of it is
// closed. (A child's stdout is one stream: the rest of a message cannot
// be skipped while the child lives.)
func TestBigStdioStallReleases(t *testing.T) {
	svc := newService(t)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	base := openFiles(t)
	p, err := mcpproxy.New(mcpproxy.Options{
		Upstream:  &mcpproxy.CommandUpstream{Command: os.Args[0], Args: []string{"-test.run=^TestSpillChild$", "--", "spillstall", strconv.Itoa(4 << 20)}},
		Artifacts: svc, Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{}), SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		resp, err := statelessPost(ctx, url, 7, "tools/call", map[string]any{"name": "export", "arguments": map[string]any{}})
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	waitFor(t, "the half string spilled", func() bool { return openFiles(t) > base+1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the call ended without an error")
	}
	p.Close()
	waitFor(t, "the stalled string's files closed", func() bool { return openFiles(t) <= base })
}

// openFiles counts this process's open descriptors of files (spill files,
// stagings, artifacts): not sockets, pipes or devices.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "/") && !strings.HasPrefix(l, "/dev/") && !strings.HasPrefix(l, "/proc/") {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, failing after a deadlock guard's
// minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not after a minute", what)
		}
	}
}
