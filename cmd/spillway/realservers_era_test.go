package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// eraServerBin builds mcpproxy/internal/upstreams/eratest's server (the Go SDK
// limited to protocol 2026-07-28) once per test binary.
var eraServerBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "spillway-eraserver-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "eraserver")
	if out, err := exec.Command("go", "build", "-o", bin, "../../mcpproxy/internal/upstreams/eratest/cmd/eraserver").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return bin, nil
})

// rsEraServer runs the stateless-only server over HTTP and returns its URL.
func rsEraServer(t *testing.T) string {
	t.Helper()
	bin, err := eraServerBin()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("eraserver printed %q: %v", line, err)
	}
	return url
}

// eraReport is what eraclient.mjs printed.
type eraReport struct {
	ProtocolVersion string   `json:"protocolVersion"`
	Server          string   `json:"server"`
	Tools           []string `json:"tools"`
	Error           string   `json:"error"`
	Asked           []string `json:"asked"`
	Steps           []struct {
		Step   string          `json:"step"`
		Result json.RawMessage `json:"result"`
		Error  string          `json:"error"`
	} `json:"steps"`
}

// rsEraClient runs eraclient.mjs as the client name against conn.
func rsEraClient(t *testing.T, rt rsTools, name string, conn ...string) eraReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a deadlock guard
	defer cancel()
	stderr := new(policytest.Buffer)
	cmd, in, out := rt.start(t, ctx, stderr, "eraclient.mjs", append([]string{name}, conn...)...)
	in.Close()
	var rep eraReport
	err := json.NewDecoder(out).Decode(&rep)
	io.Copy(io.Discard, out)
	if werr := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("eraclient %s: %v, %v; stderr:\n%s", name, err, werr, rsTail(stderr.String()))
	}
	return rep
}

// TestRealServersEraBridge puts Spillway between session-era clients (the
// TypeScript SDK v1 client and the Inspector CLI, both at 2025-11-25) and
// a server that speaks only 2026-07-28 (the Go SDK with
// SupportedProtocolVersions limited to it), over HTTP and as a stdio
// child. Directly, the client cannot even connect; through Spillway it
// lists and calls tools, completes the sampling, elicitation and roots
// round trips the server asks for, reads the resource, gets the prompt,
// and a large output is offloaded to a link that serves the bytes.
// Two clients run at once, on two sessions, each getting only its own
// answers. Side by side, the npm mcp-proxy 6.7.19 in front of the same
// stdio server: whatever passes through it must pass through Spillway (it
// cannot start: it initializes its child, which refuses).
func TestRealServersEraBridge(t *testing.T) {
	rt := rsSetup(t)
	bin, err := eraServerBin()
	if err != nil {
		t.Fatal(err)
	}
	upURL := rsEraServer(t)

	t.Run("directly", func(t *testing.T) {
		rep := rsEraClient(t, rt, "alice", "http", upURL, "")
		if rep.Error == "" {
			t.Fatalf("the v1 client connected to a 2026-07-28-only server directly: %+v", rep)
		}
		t.Logf("directly: %s", rep.Error)
	})

	// What passes through the npm mcp-proxy 6.7.19 in front of the same
	// stdio server must pass through Spillway.
	viaMCPProxy := rsMCPProxyEra(t, rt, bin)
	for mode, extra := range map[string][]string{
		"http":  {"--upstream-url", upURL},
		"stdio": {"--upstream-cmd", bin},
	} {
		t.Run(mode, func(t *testing.T) {
			base, token := rsSpillway(t, extra...)
			var wg sync.WaitGroup
			reps := map[string]*eraReport{}
			var mu sync.Mutex
			for _, name := range []string{"alice", "bob"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rep := rsEraClient(t, rt, name, "http", base+"/mcp", token)
					mu.Lock()
					reps[name] = &rep
					mu.Unlock()
				}()
			}
			wg.Wait()
			for name, rep := range reps {
				rsCheckEra(t, name, rep)
			}
			for step := range viaMCPProxy {
				if !rsEraPassed(reps["alice"], step) {
					t.Errorf("%s passes through mcp-proxy 6.7.19 but not through Spillway", step)
				}
			}
			rsInspectEra(t, rt, base+"/mcp", token)
		})
	}
}

// rsEraPassed reports whether the report's step (or "connect") passed.
func rsEraPassed(rep *eraReport, step string) bool {
	if rep.Error != "" {
		return false
	}
	if step == "connect" {
		return true
	}
	for _, s := range rep.Steps {
		if s.Step == step {
			return s.Error == ""
		}
	}
	return false
}

// rsMCPProxyEra runs the eraclient through the npm mcp-proxy 6.7.19 in
// front of the stateless-only stdio server and returns the steps that
// passed ("connect" when it connected). mcp-proxy initializes its child at
// start, so it may exit before it listens: then nothing passed.
func rsMCPProxyEra(t *testing.T, rt rsTools, server string) map[string]bool {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	out := new(policytest.Buffer)
	cmd := exec.Command(rt.node, filepath.Join(rt.npm, "mcp-proxy", "dist", "bin", "mcp-proxy.mjs"),
		"--host", "127.0.0.1", "--port", port, "--server", "stream", "--", server)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	passed := map[string]bool{}
	for deadline := time.Now().Add(time.Minute); ; { // a deadlock guard
		select {
		case <-exited:
			t.Logf("mcp-proxy 6.7.19 exited before listening: %s", rsTail(out.String()))
			return passed
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcp-proxy neither listens nor exits: %s", rsTail(out.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	rep := rsEraClient(t, rt, "alice", "http", "http://"+addr+"/mcp", "")
	if rep.Error == "" {
		passed["connect"] = true
		for _, s := range rep.Steps {
			if s.Error == "" {
				passed[s.Step] = true
			}
		}
	}
	t.Logf("through mcp-proxy 6.7.19: %v (%s)", passed, rep.Error)
	return passed
}

// rsCheckEra checks one client's report of the bridged server.
func rsCheckEra(t *testing.T, name string, rep *eraReport) {
	t.Helper()
	if rep.Error != "" {
		t.Fatalf("%s: %s", name, rep.Error)
	}
	if rep.Server != "eratest" || !strings.Contains(strings.Join(rep.Tools, " "), "sample") {
		t.Errorf("%s: server %q, tools %v", name, rep.Server, rep.Tools)
	}
	want := map[string]string{
		"tools/call echo":   "echo: " + name,
		"tools/call sample": "sampled: " + name + " heard say " + name,
		"tools/call elicit": "elicited: accept " + name,
		"tools/call roots":  "roots: file:///" + name,
		"resources/read":    "hello from a stateless-only server",
		"prompts/get":       "greet " + name,
	}
	for _, s := range rep.Steps {
		if s.Error != "" {
			t.Errorf("%s %s: %s", name, s.Step, s.Error)
			continue
		}
		var r struct {
			Content  []rsItem `json:"content"`
			Contents []struct {
				Text string `json:"text"`
			} `json:"contents"`
			Messages []struct {
				Content rsItem `json:"content"`
			} `json:"messages"`
			ResultType string `json:"resultType"`
		}
		json.Unmarshal(s.Result, &r)
		got := ""
		switch {
		case len(r.Content) > 0:
			got = r.Content[0].Text
		case len(r.Contents) > 0:
			got = r.Contents[0].Text
		case len(r.Messages) > 0:
			got = r.Messages[0].Content.Text
		}
		if r.ResultType != "" {
			t.Errorf("%s %s: the stateless era's resultType reached a session-era client: %s", name, s.Step, s.Result)
		}
		if w, ok := want[s.Step]; ok && got != w {
			t.Errorf("%s %s: %q, want %q", name, s.Step, got, w)
		}
		if s.Step == "tools/call big" {
			rsCheckEraBig(t, s.Result)
		}
	}
	if strings.Join(rep.Asked, " ") != "sampling/createMessage elicitation/create roots/list" {
		t.Errorf("%s answered %v, want one sampling, one elicitation, one roots request", name, rep.Asked)
	}
}

// rsCheckEraBig: the 256 KiB output came as a link under 8 KB whose URL
// serves all of it.
func rsCheckEraBig(t *testing.T, raw json.RawMessage) {
	t.Helper()
	var r rsResult
	json.Unmarshal(raw, &r)
	url := ""
	for _, c := range r.Content {
		if c.Type == "resource_link" {
			url = c.Meta.Link.HTTPURL
		}
	}
	if len(raw) >= rsMaxMessage || url == "" {
		t.Fatalf("big: %d bytes, link %q; want a link under %d bytes: %s", len(raw), url, rsMaxMessage, raw)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || n != 256<<10 {
		t.Errorf("big's link: %s, %d bytes; want 200 and %d", resp.Status, n, 256<<10)
	}
}

// rsInspectEra runs the Inspector CLI (1.0.3, on the TypeScript SDK v1)
// against the bridged server: it lists and calls tools, reads the
// resource, gets the prompt and sets the log level. It declares no
// sampling: the sampling tool's call is refused by name, not left
// waiting.
func rsInspectEra(t *testing.T, rt rsTools, url, token string) {
	t.Helper()
	cli := filepath.Join(rt.npm, "@modelcontextprotocol", "inspector-cli", "build", "cli.js")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--method", "tools/list"}, `"name": "sample"`},
		{[]string{"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=inspector"}, "echo: inspector"},
		{[]string{"--method", "resources/read", "--uri", "era://hello"}, "hello from a stateless-only server"},
		{[]string{"--method", "prompts/get", "--prompt-name", "greet", "--prompt-args", "name=inspector"}, "greet inspector"},
		{[]string{"--method", "logging/setLevel", "--log-level", "debug"}, "{}"},
		{[]string{"--method", "tools/call", "--tool-name", "sample", "--tool-arg", "text=x"}, `needs the client's "sampling" capability`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a deadlock guard
		args := append([]string{cli, "--cli", url, "--transport", "http", "--header", "Authorization: Bearer " + token}, tc.args...)
		cmd := exec.CommandContext(ctx, rt.node, args...)
		// It finds its own package.json relative to the working directory.
		cmd.Dir = filepath.Dir(cli)
		out, err := cmd.CombinedOutput()
		cancel()
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("inspector %v: %v, output lacks %q:\n%s", tc.args, err, tc.want, rsTail(string(out)))
		}
	}
}
