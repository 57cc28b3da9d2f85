package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// descendants lists pid's descendants from /proc.
func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
				out = append(out, descendants(c)...)
			}
		}
	}
	return out
}

// alive reports whether pid runs (a zombie has ended).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// rawPost sends one MCP POST and returns the response without reading its
// body: a client that stops reading.
func rawPost(t *testing.T, url, tok, version, session, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Mcp-Protocol-Version", version)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// SIGTERM ends Spillway with exit 0 within 5 s whatever its clients hold
// open — a session's GET stream, a call waiting on the client (sampling),
// a stateless subscriptions/listen stream, none of them read —, through
// the terminating face (stdio child), the relay (HTTP upstream) and the
// stdio face, and leaves no child process behind.
func TestSIGTERMWithOpenStreams(t *testing.T) {
	bin := spillwayBin(t)
	server := tool(t, "SPILLWAY_EVERYTHING_SERVER")
	// As npx and uvx do, the child leaves a process of its own behind,
	// which outlives its stdin.
	launcher := `sh -c 'sleep 1000 & exec ` + server + `'`
	httpUp := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(server, "-http="+addr, "-stateless=false")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("everything-server never listened")
			}
		}
		return "http://" + addr + "/mcp"
	}
	init := func(version string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{"sampling":{},"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`
	}
	const sampling = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"hi"}}}`
	for _, tc := range []struct {
		name  string
		up    func(t *testing.T) []string
		stdio bool
	}{
		{"terminating face", func(t *testing.T) []string { return []string{"--upstream-cmd", launcher} }, false},
		{"relay", func(t *testing.T) []string { return []string{"--upstream-url", httpUp(t)} }, false},
		{"stdio face", func(t *testing.T) []string { return []string{"--upstream-cmd", launcher} }, true},
		{"stdio face, stateless era", func(t *testing.T) []string { return []string{"--upstream-cmd", launcher} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			args := append([]string{"serve", "--listen", addr, "--data", data, "--log-level", "warn"}, tc.up(t)...)
			if tc.stdio {
				args = append(args, "--stdio")
			}
			cmd := exec.Command(bin, args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cmd.Process.Kill()
				if t.Failed() {
					t.Logf("spillway stderr:\n%s", stderr.String())
				}
			}()
			listen := `{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}},"notifications":{"toolsListChanged":true}}}`
			switch {
			case tc.stdio && strings.Contains(tc.name, "stateless"):
				// A stateless-era client holding a subscription open.
				fmt.Fprintln(stdin, listen)
				for deadline := time.Now().Add(30 * time.Second); len(descendants(cmd.Process.Pid)) < 2; time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the child never started")
					}
				}
			case tc.stdio:
				// A session-era client that asked for a sampling call and
				// then stopped reading.
				fmt.Fprintln(stdin, init("2025-11-25"))
				fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				fmt.Fprintln(stdin, sampling)
				line, err := bufio.NewReader(stdout).ReadString('\n')
				if err != nil || !strings.Contains(line, `"id":1`) {
					t.Fatalf("initialize over stdio: %q %v", line, err)
				}
			default:
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					if _, err := os.Stat(filepath.Join(data, "mcp.token")); err == nil {
						if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
							resp.Body.Close()
							break
						}
					}
					if time.Now().After(deadline) {
						t.Fatal("spillway never listened")
					}
				}
				tok := mcpToken(t, data)
				base := "http://" + addr + "/mcp"
				resp := rawPost(t, base, tok, "2025-11-25", "", init("2025-11-25"))
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				sid := resp.Header.Get("Mcp-Session-Id")
				rawPost(t, base, tok, "2025-11-25", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
				req, _ := http.NewRequest(http.MethodGet, base, nil)
				req.Header.Set("Accept", "text/event-stream")
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Mcp-Session-Id", sid)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				if get, err := http.DefaultClient.Do(req); err != nil || get.StatusCode != 200 {
					t.Fatalf("GET stream: %v %v", err, get)
				}
				// A call waiting on the client (its sampling request is
				// never answered), and a stateless-era stream that lasts.
				if resp := rawPost(t, base, tok, "2025-11-25", sid, sampling); resp.StatusCode != 200 {
					t.Fatalf("sampling call: %d", resp.StatusCode)
				}
				rawPost(t, base, tok, "2026-07-28", "", listen)
			}
			kids := descendants(cmd.Process.Pid)
			if tc.name != "relay" && len(kids) == 0 {
				t.Fatal("no child process to watch")
			}
			start := time.Now()
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				took := time.Since(start)
				t.Logf("exit after SIGTERM in %v: %v", took.Round(time.Millisecond), err)
				if err != nil {
					t.Errorf("exit: %v, want 0", err)
				}
				if took > 5*time.Second {
					t.Errorf("shutdown took %v, want under 5 s", took.Round(time.Millisecond))
				}
				// Close ended every stream: nothing was left for the grace
				// to cut.
				if strings.Contains(stderr.String(), "shutdown grace are cut") {
					t.Error("streams were still open when the shutdown grace ran out")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no exit 30 s after SIGTERM")
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var left []int
				for _, k := range kids {
					if alive(k) {
						left = append(left, k)
					}
				}
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					for _, k := range left {
						syscall.Kill(k, syscall.SIGKILL)
					}
					t.Fatalf("children %v still run after Spillway exited", left)
				}
			}
		})
	}
}
