package mcpproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// childProxy is a proxy in front of the scripted child in mode, served on
// loopback; it returns the proxy and its /mcp URL.
func childProxy(t *testing.T, mode string, o mcpproxy.Options) (*mcpproxy.Proxy, string) {
	t.Helper()
	cmd, args := childCmd(mode)
	o.Upstream = &mcpproxy.CommandUpstream{Command: cmd, Args: args}
	p, err := mcpproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, serve(t, p)
}

// sseMessages reads an answer's JSON-RPC messages as they come, until the
// stream ends or ctx is done.
func sseMessages(ctx context.Context, resp *http.Response, each func(map[string]json.RawMessage)) {
	defer resp.Body.Close()
	go func() { <-ctx.Done(); resp.Body.Close() }()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]json.RawMessage
		b, _ := io.ReadAll(resp.Body)
		if json.Unmarshal(b, &m) == nil {
			each(m)
		}
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]json.RawMessage
			if json.Unmarshal([]byte(d), &m) == nil {
				each(m)
			}
		}
	}
}

// statelessPost starts a 2026-07-28 request and returns the response.
func statelessPost(ctx context.Context, url string, id any, method string, params map[string]any) (*http.Response, error) {
	return http.DefaultClient.Do(statelessRequest(ctx, url, id, method, params))
}

// statelessRequest is statelessPost's request.
func statelessRequest(ctx context.Context, url string, id any, method string, params map[string]any) *http.Request {
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	params["_meta"] = meta
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if id != nil {
		msg["id"] = id
	}
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	return req
}

// TestSharedChildKeepsClientsApart: two stateless clients use the same id
// and progress token on the shared child at once. Each gets exactly its
// own progress; one client leaving cancels its own request only, and a
// cancellation posted by one client cannot reach the other's request.
func TestSharedChildKeepsClientsApart(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	slow := func() map[string]any {
		return map[string]any{"name": "slow", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": "t"}}
	}
	actx, leaveA := context.WithCancel(ctx)
	respA, err := statelessPost(actx, url, 1, "tools/call", slow())
	if err != nil {
		t.Fatal(err)
	}
	respB, err := statelessPost(ctx, url, 1, "tools/call", slow())
	if err != nil {
		t.Fatal(err)
	}
	var progressB []string
	var resultB json.RawMessage
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		n := 0
		sseMessages(actx, respA, func(m map[string]json.RawMessage) {
			if n++; n == 5 {
				// A cancels "its" request 1 by a separate POST, then leaves.
				if r, err := statelessPost(ctx, url, nil, "notifications/cancelled", map[string]any{"requestId": 1}); err == nil {
					r.Body.Close()
				}
				leaveA()
			}
		})
	}()
	go func() {
		defer wg.Done()
		sseMessages(ctx, respB, func(m map[string]json.RawMessage) {
			if string(m["method"]) == `"notifications/progress"` {
				var p struct {
					Token    json.RawMessage `json:"progressToken"`
					Progress int             `json:"progress"`
				}
				json.Unmarshal(m["params"], &p)
				progressB = append(progressB, fmt.Sprintf("%s:%d", p.Token, p.Progress))
			}
			if m["result"] != nil || m["error"] != nil {
				resultB = append(m["result"], m["error"]...)
			}
		})
	}()
	wg.Wait()
	if !strings.Contains(string(resultB), "slow done") {
		t.Fatalf("B's call did not complete (cancelled by A?): %s after %d progress notifications", resultB, len(progressB))
	}
	if len(progressB) != 100 {
		t.Fatalf("B got %d progress notifications, want exactly its own 100: %v", len(progressB), progressB)
	}
	for i, p := range progressB {
		if p != fmt.Sprintf(`"t":%d`, i) {
			t.Fatalf("B's progress #%d is %s", i, p)
		}
	}
}

// TestSlowClientCostsOnlyItself: a stateless client that never reads its
// stream while the child floods it does not hold up another client; its
// own request is cut.
func TestSlowClientCostsOnlyItself(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{})
	// A raw connection that sends one request and never reads.
	host := strings.TrimPrefix(strings.TrimSuffix(url, "/mcp"), "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flood","arguments":{},"_meta":{"progressToken":"f","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: flood\r\nContent-Length: %d\r\n\r\n%s", host, len(body), body)
	time.Sleep(500 * time.Millisecond) // the flood is under way
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		resp, err := statelessPost(ctx, url, 7, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"i": i}})
		if err != nil {
			t.Fatalf("call %d of another client while one does not read: %v", i, err)
		}
		got := ""
		sseMessages(ctx, resp, func(m map[string]json.RawMessage) { got += string(m["result"]) })
		if !strings.Contains(got, fmt.Sprintf(`\"i\":%d`, i)) {
			t.Fatalf("call %d: %s", i, got)
		}
	}
	// The client that never read had its request cut: reading what was
	// written for it shows neither all 5000 progress notifications nor the
	// result.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(c)
	if n := strings.Count(string(got), "notifications/progress"); n >= 5000 || strings.Contains(string(got), `"result":{"content":[]}`) {
		t.Fatalf("the stalled client's request was not cut: %d progress notifications, result %v", n, strings.Contains(string(got), `"result":{"content":[]}`))
	}
}

// TestSharedChildIsInitialized: a child that refuses everything before the
// handshake (as the Python SDK's servers do) serves stateless requests.
func TestSharedChildIsInitialized(t *testing.T) {
	_, url := childProxy(t, "strict2025", mcpproxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := statelessPost(ctx, url, 1, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"x": 1}})
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	sseMessages(ctx, resp, func(m map[string]json.RawMessage) { got += string(m["result"]) + string(m["error"]) })
	if !strings.Contains(got, `\"x\":1`) {
		t.Fatalf("stateless call to a session-era child: %s", got)
	}
}

// TestUpstreamStallsMidMessage: a shared child that writes half of an
// answer and then nothing is stopped after UpstreamStallTimeout. The
// stalled call, and another client's call waiting behind the stalled
// line, each get an error instead of waiting forever; the next call
// runs on a fresh child. Before: both waited for as long as their
// clients did, and every later call too.
func TestUpstreamStallsMidMessage(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{UpstreamStallTimeout: 500 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // the clients' own patience
	defer cancel()
	call := func(id int, name string) string {
		resp, err := statelessPost(ctx, url, id, "tools/call", map[string]any{"name": name, "arguments": map[string]any{"id": id}})
		if err != nil {
			return "post: " + err.Error()
		}
		defer resp.Body.Close()
		got := ""
		sseMessages(ctx, resp, func(m map[string]json.RawMessage) { got += string(m["result"]) + string(m["error"]) })
		return got
	}
	if got := call(1, "echo"); !strings.Contains(got, `\"id\":1`) {
		t.Fatalf("first call: %s", got)
	}
	start := time.Now()
	stalled := make(chan string, 1)
	go func() { stalled <- call(2, "stallmid") }()
	time.Sleep(100 * time.Millisecond) // the half line is out: the next answer waits behind it
	behind := call(3, "echo")
	if got := <-stalled; !strings.Contains(got, "stalled mid-message") {
		t.Errorf("the stalled call got %q, want an error saying the upstream stalled", got)
	}
	if !strings.Contains(behind, "stalled mid-message") {
		t.Errorf("the call behind the stalled line got %q, want the same error", behind)
	}
	if d := time.Since(start); ctx.Err() != nil {
		t.Fatalf("the calls waited %v, as long as their clients", d)
	}
	if got := call(4, "echo"); !strings.Contains(got, `\"id\":4`) {
		t.Fatalf("the call after the stall: %s", got)
	}
}

// TestNullResults: an upstream answering "result": null to the methods
// the proxy rewrites gets its client a JSON-RPC error, and the proxy
// lives on (on the stdio face too).
func TestNullResults(t *testing.T) {
	_, url := childProxy(t, "null", mcpproxy.Options{Artifacts: newService(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, method := range []string{"server/discover", "resources/list", "resources/templates/list", "tools/list"} {
		resp, err := statelessPost(ctx, url, 1, method, map[string]any{})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		got := ""
		sseMessages(ctx, resp, func(m map[string]json.RawMessage) { got += string(m["error"]) })
		if !strings.Contains(got, "code") {
			t.Fatalf("%s with a null result: want a JSON-RPC error, got %q", method, got)
		}
	}
	// The session era's initialize, on the HTTP face.
	a := &agent{url: url}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	sseMessages(ctx, resp, func(m map[string]json.RawMessage) { got += string(m["error"]) })
	if !strings.Contains(got, "code") {
		t.Fatalf("initialize with a null result: want a JSON-RPC error, got %q", got)
	}
	// The stdio face: the process survives and answers.
	cmd, args := childCmd("null")
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: cmd, Args: args}, Artifacts: newService(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, inR, outW) }()
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.Contains(line, `"error"`) {
		t.Fatalf("stdio initialize with a null result: %q %v", line, err)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
}

// countChildren counts live processes of the scripted child in mode.
func countChildren(mode string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), "TestChildServer") && strings.HasSuffix(strings.TrimRight(string(b), "\x00"), "\x00"+mode) {
			// Only this test process's own children: another test binary
			// on the machine (a second go test run) has its own.
			st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
			if len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(os.Getpid()) {
				n++
			}
		}
	}
	return n
}

// TestSessionCapIsAtomic: 20 initializes at once against a cap of 2 start
// at most 2 children.
func TestSessionCapIsAtomic(t *testing.T) {
	mode := "strict2025"
	before := countChildren(mode)
	_, url := childProxy(t, mode, mcpproxy.Options{MaxSessions: 2})
	var wg sync.WaitGroup
	peak := 0
	var mu sync.Mutex
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			n := countChildren(mode) - before
			mu.Lock()
			peak = max(peak, n)
			mu.Unlock()
		}
	}()
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	mu.Lock()
	defer mu.Unlock()
	// A child being replaced may linger while it is stopped: the bound is
	// the cap plus the one on its way out.
	if peak > 3 {
		t.Fatalf("%d children ran at once with MaxSessions 2", peak)
	}
}
