package mcpproxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/eratest"
)

// upstreamError is the data of the gateway's error for a request its
// upstream could not answer.
type upstreamError struct {
	Upstream     string `json:"upstream"`
	Reason       string `json:"reason"`
	RetryAfterMs *int64 `json:"retryAfterMs"`
}

// wantUpstreamError checks that err is the gateway's JSON-RPC error
// naming upstream (code -32000, data {upstream, reason, retryAfterMs}) and
// returns its data.
func wantUpstreamError(t *testing.T, what string, err error, upstream string) upstreamError {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("%s: want a JSON-RPC error naming %s, got %v", what, upstream, err)
	}
	var d upstreamError
	if we.Code != -32000 || json.Unmarshal(we.Data, &d) != nil || d.Upstream != upstream || d.Reason == "" || d.RetryAfterMs == nil {
		t.Fatalf("%s: want code -32000 with data {upstream %q, reason, retryAfterMs}, got %d %q %s", what, upstream, we.Code, we.Message, we.Data)
	}
	if !strings.Contains(we.Message, strconv.Quote(upstream)) {
		t.Errorf("%s: the message does not name %s: %q", what, upstream, we.Message)
	}
	return d
}

// unavailable returns the upstreams a tools/list result's _meta names as
// missing.
func unavailable(r *mcp.ListToolsResult) []string {
	var names []string
	list, _ := r.Meta["io.spillway/unavailable"].([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			if s, _ := m["upstream"].(string); s != "" {
				names = append(names, s)
			}
		}
	}
	return names
}

// listOnce is one tools/list: the names and the upstreams said missing.
func listOnce(t *testing.T, cs *mcp.ClientSession) (names, missing []string) {
	t.Helper()
	r, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range r.Tools {
		names = append(names, tool.Name)
	}
	return names, unavailable(r)
}

func hasPrefixed(names []string, prefix string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// clientEras are the eras a Go SDK client speaks, by the version it asks
// for: a session era's revision, or "" for its newest (the stateless era).
var clientEras = []struct{ name, version string }{{"session", "2025-11-25"}, {"stateless", ""}}

// eraClient is a Go SDK client of url in the era of version: a session
// era's revision, or "" for the SDK's newest (the stateless era).
func eraClient(t *testing.T, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "gw-test", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// signals counts notifications as they come.
type signals struct {
	mu sync.Mutex
	n  int
}

func (s *signals) add() { s.mu.Lock(); s.n++; s.mu.Unlock() }
func (s *signals) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// everythingAt runs the Go SDK's everything-server on addr (again, when
// it ran there before); the test's end kills it.
func everythingAt(t *testing.T, addr string) *exec.Cmd {
	t.Helper()
	bin := tool(t, "SPILLWAY_EVERYTHING_SERVER", "bin/everything-server")
	cmd := exec.Command(bin, "-http="+addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListening(t, addr)
	return cmd
}

// childrenOf returns the pids of the running processes whose command
// line starts with bin (a binary the test built, so no other test runs
// it).
func childrenOf(bin string) []int {
	var found []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !strings.HasPrefix(string(b), bin+"\x00") {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(filepath.Dir(d), "stat")); err != nil || strings.Contains(string(st), ") Z ") {
			continue // gone, or a zombie not reaped yet
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		found = append(found, pid)
	}
	return found
}

// Killing one upstream mid-session fails only its calls, with an error
// that names it; the others answer; a tools/list while it is down lists
// the others and names it in _meta; once it is back (an HTTP server
// started again on its port, a stdio child restarted by the gateway) its
// tools come back with a list_changed the client sees. Clients of both
// eras over HTTP, and one on the stdio face.
func TestGatewayIsolatesADeadUpstream(t *testing.T) {
	for _, era := range clientEras {
		t.Run(era.name, func(t *testing.T) {
			isolation(t, func(p *mcpproxy.Proxy, opts *mcp.ClientOptions) *mcp.ClientSession {
				return eraClient(t, serve(t, p), era.version, opts)
			})
		})
	}
	t.Run("stdio-face", func(t *testing.T) { isolation(t, stdioSession(t, "2025-11-25")) })
}

// stdioSession returns how to connect a Go SDK client asking for version
// (see eraClient) to a proxy's stdio face; the test's end disconnects it.
func stdioSession(t *testing.T, version string) func(*mcpproxy.Proxy, *mcp.ClientOptions) *mcp.ClientSession {
	return func(p *mcpproxy.Proxy, opts *mcp.ClientOptions) *mcp.ClientSession {
		ctx, cancel := context.WithCancel(context.Background())
		toProxy, fromClient := io.Pipe()
		toClient, fromProxy := io.Pipe()
		served := make(chan error, 1)
		go func() { served <- p.ServeStdio(ctx, toProxy, fromProxy); fromProxy.Close() }()
		guard, stop := context.WithTimeout(ctx, 30*time.Second) // a deadlock guard
		defer stop()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "gw-test", Version: "1"}, opts).Connect(guard,
			&mcp.IOTransport{Reader: toClient, Writer: fromClient}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cs.Close()
			fromClient.Close()
			cancel()
			<-served
		})
		return cs
	}
}

func isolation(t *testing.T, connect func(*mcpproxy.Proxy, *mcp.ClientOptions) *mcp.ClientSession) {
	evAddr := freePort(t)
	ev := everythingAt(t, evAddr)
	bigBin := buildBigtool(t)
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.Gateway{Servers: []mcpproxy.Server{
		{Name: "ev", Upstream: &mcpproxy.HTTPUpstream{URL: "http://" + evAddr + "/mcp"}},
		{Name: "era", Upstream: &mcpproxy.HTTPUpstream{URL: serve(t, eratest.Handler())}},
		{Name: "big", Upstream: &mcpproxy.CommandUpstream{Command: bigBin}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var changed signals
	cs := connect(p, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.add() },
	})
	ctx := context.Background()
	others := func(t *testing.T) {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "era_echo", Arguments: map[string]any{"text": "still here"}})
		if err != nil || !strings.Contains(textOf(r), "still here") {
			t.Fatalf("era_echo while another upstream is down: %v %+v", err, r)
		}
	}
	names, missing := listOnce(t, cs)
	if !hasPrefixed(names, "ev_") || !hasPrefixed(names, "big_") || !hasPrefixed(names, "era_") || len(missing) > 0 {
		t.Fatalf("before: tools %v, missing %v", names, missing)
	}

	top := t
	t.Run("http-server-killed", func(t *testing.T) {
		before := changed.count()
		ev.Process.Kill()
		ev.Wait()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev_test_simple_text"})
		wantUpstreamError(t, "ev_test_simple_text with its server killed", err, "ev")
		others(t)
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big_small", Arguments: map[string]any{"echo": "x"}})
		if err != nil || r.IsError {
			t.Fatalf("big_small while ev is down: %v %+v", err, r)
		}
		names, missing := listOnce(t, cs)
		if hasPrefixed(names, "ev_") || !hasPrefixed(names, "era_") || !hasPrefixed(names, "big_") || !slices.Equal(missing, []string{"ev"}) {
			t.Fatalf("while ev is down: tools %v, missing %v", names, missing)
		}
		everythingAt(top, evAddr) // until the test's end
		waitFor(t, "ev's tools never came back", func() bool {
			names, missing := listOnce(t, cs)
			return hasPrefixed(names, "ev_") && len(missing) == 0
		})
		waitFor(t, "no tools/list_changed reached the client", func() bool { return changed.count() > before })
		r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev_test_simple_text"})
		if err != nil || r.IsError || textOf(r) == "" {
			t.Fatalf("ev_test_simple_text once ev is back: %v %+v", err, r)
		}
	})

	t.Run("stdio-child-killed", func(t *testing.T) {
		before := changed.count()
		pids := childrenOf(bigBin)
		if len(pids) == 0 {
			t.Fatal("no bigtool runs")
		}
		// A call in flight when the child dies fails, naming it.
		inflight := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big_slow_report", Arguments: map[string]any{"seconds": 20}})
			inflight <- err
		}()
		time.Sleep(300 * time.Millisecond) // the call reaches the child
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-inflight:
			wantUpstreamError(t, "big_slow_report when its child was killed", err, "big")
		case <-time.After(10 * time.Second):
			t.Fatal("the call in flight when its child died was never answered")
		}
		others(t)
		waitFor(t, "the gateway never restarted bigtool", func() bool {
			names, missing := listOnce(t, cs)
			return hasPrefixed(names, "big_") && len(missing) == 0
		})
		if again := childrenOf(bigBin); len(again) == 0 || slices.ContainsFunc(again, func(p int) bool { return slices.Contains(pids, p) }) {
			t.Fatalf("bigtool ran as %v, then as %v", pids, again)
		}
		waitFor(t, "no tools/list_changed reached the client", func() bool { return changed.count() > before })
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big_small", Arguments: map[string]any{"echo": "back"}})
		if err != nil || r.IsError || !strings.Contains(textOf(r), "back") {
			t.Fatalf("big_small once bigtool is back: %v %+v", err, r)
		}
	})
}

// hostileCmd is the command line of the gateway tests' hostile child in
// mode (see TestGatewayHostileChild).
func hostileCmd(mode string) *mcpproxy.CommandUpstream {
	return &mcpproxy.CommandUpstream{Command: os.Args[0], Args: []string{"-test.run=^TestGatewayHostileChild$", "--", mode}}
}

// TestGatewayHostileChild is not a test: it is a stdio tool server on the
// official SDK that the gateway tests start. Its tool "block" never
// answers (until cancelled), "ok" answers "ok"; in mode "gwhang" it never
// answers initialize either.
func TestGatewayHostileChild(t *testing.T) {
	mode := childMode()
	if mode != "gwblock" && mode != "gwhang" {
		t.Skip("the hostile child of the gateway tests")
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "never answers"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ok", Description: "answers ok"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	if mode == "gwhang" {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "initialize" || method == "server/discover" {
					<-ctx.Done() // the connection's end
					return nil, ctx.Err()
				}
				return next(ctx, method, req)
			}
		})
	}
	s.Run(context.Background(), &mcp.StdioTransport{})
}

// hostileGateway is a proxy in front of the hostile child in mode (as
// server "slow", with the timeouts given) and eratest's server over HTTP
// (as "era"), served on loopback.
func hostileGateway(t *testing.T, mode string, slow mcpproxy.Server) string {
	t.Helper()
	slow.Name, slow.Upstream = "slow", hostileCmd(mode)
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.Gateway{Servers: []mcpproxy.Server{
		slow, {Name: "era", Upstream: &mcpproxy.HTTPUpstream{URL: serve(t, eratest.Handler())}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return serve(t, p)
}

// A call its upstream never answers fails after the server's CallTimeout,
// naming it, while another upstream keeps answering; the slow upstream
// still answers what it can.
func TestGatewayCallTimeout(t *testing.T) {
	url := hostileGateway(t, "gwblock", mcpproxy.Server{CallTimeout: time.Second})
	for _, era := range clientEras {
		t.Run(era.name, func(t *testing.T) { callTimeout(t, eraClient(t, url, era.version, nil)) })
	}
}

func callTimeout(t *testing.T, cs *mcp.ClientSession) {
	ctx := context.Background()
	start := time.Now()
	blocked := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow_block"})
		blocked <- err
	}()
	for i := range 5 {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "era_echo", Arguments: map[string]any{"text": "meanwhile " + strconv.Itoa(i)}})
		if err != nil || !strings.Contains(textOf(r), "meanwhile") {
			t.Fatalf("era_echo while slow_block waits: %v %+v", err, r)
		}
	}
	select {
	case err := <-blocked:
		took := time.Since(start)
		if d := wantUpstreamError(t, "slow_block", err, "slow"); d.Reason != "timeout" {
			t.Errorf("slow_block: reason %q, want timeout", d.Reason)
		}
		if took < time.Second || took > 5*time.Second {
			t.Errorf("slow_block failed after %s; its CallTimeout is 1s", took)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("slow_block was never answered")
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow_ok"})
	if err != nil || textOf(r) != "ok" {
		t.Fatalf("slow_ok after the timeout: %v %+v", err, r)
	}
}

// An upstream whose handshake hangs holds initialize up no longer than
// its ConnectTimeout: the others are listed, it is named missing, and its
// calls fail naming it.
func TestGatewayConnectTimeout(t *testing.T) {
	url := hostileGateway(t, "gwhang", mcpproxy.Server{ConnectTimeout: time.Second})
	for _, era := range clientEras {
		t.Run(era.name, func(t *testing.T) {
			start := time.Now()
			cs := eraClient(t, url, era.version, nil)
			if took := time.Since(start); took > 4*time.Second {
				t.Errorf("initialize took %s; the hanging upstream's ConnectTimeout is 1s", took)
			}
			names, missing := listOnce(t, cs)
			if !slices.Contains(names, "era_echo") || hasPrefixed(names, "slow_") || !slices.Equal(missing, []string{"slow"}) {
				t.Errorf("tools %v, missing %v", names, missing)
			}
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow_ok"})
			wantUpstreamError(t, "slow_ok", err, "slow")
		})
	}
}

// A client on the stdio face that first probes for the stateless era
// (the Go SDK's sends server/discover before any initialize) is answered
// in that era: the gateway speaks it on the stdio face (it waited for an
// answer that never came, before it did).
func TestGatewayStdioStatelessProbe(t *testing.T) {
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.Gateway{Servers: []mcpproxy.Server{
		{Name: "era", Upstream: &mcpproxy.HTTPUpstream{URL: serve(t, eratest.Handler())}},
		{Name: "slow", Upstream: hostileCmd("gwblock")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cs := stdioSession(t, "")(p, nil) // "": the SDK's newest, which it probes for
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated %q, want 2026-07-28", v)
	}
	if names, missing := listOnce(t, cs); !slices.Contains(names, "era_echo") || !slices.Contains(names, "slow_ok") || len(missing) > 0 {
		t.Errorf("tools %v, missing %v", names, missing)
	}
}
