package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// rsEraStep is one line statelessclient.mjs printed for a step.
type rsEraStep struct {
	Step   string          `json:"step"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
	Size   int             `json:"size"`
}

// rsStatelessClient runs statelessclient.mjs with sdk ("v1": 2025-11-25, "v2pin": 2026-07-28
// only) against url and returns its steps by name; a connect or listing
// failure is returned as err.
func rsStatelessClient(t *testing.T, rt rsTools, sdk, url, token string) (tools []string, steps map[string]rsEraStep, connectErr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a deadlock guard
	defer cancel()
	stderr := new(policytest.Buffer)
	cmd, in, out := rt.start(t, ctx, stderr, "statelessclient.mjs", sdk, url, token)
	in.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(out, 1<<20))
	var head struct {
		Tools []string `json:"tools"`
		Error string   `json:"error"`
	}
	if err := dec.Decode(&head); err != nil {
		t.Fatalf("statelessclient.mjs %s %s: %v; stderr:\n%s", sdk, url, err, rsTail(stderr.String()))
	}
	steps = map[string]rsEraStep{}
	for head.Error == "" {
		var s rsEraStep
		if err := dec.Decode(&s); err != nil {
			break
		}
		steps[s.Step] = s
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Errorf("statelessclient.mjs %s %s: %v; stderr:\n%s", sdk, url, err, rsTail(stderr.String()))
	}
	return head.Tools, steps, head.Error
}

// rsListen waits until addr accepts connections (a deadlock guard of a
// minute).
func rsListen(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func rsFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// rsRun starts a long-running process for the test, stopped at its end.
func rsRun(t *testing.T, env []string, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	log := new(policytest.Buffer)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", argv[len(argv)-1], rsTail(log.String()))
		}
	})
}

// rsWithoutEra is a result without the members only the stateless era
// has (resultType, ttlMs, cacheScope).
func rsWithoutEra(t *testing.T, r json.RawMessage) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r, &m); err != nil {
		t.Fatalf("result %.300s: %v", r, err)
	}
	delete(m, "resultType")
	delete(m, "ttlMs")
	delete(m, "cacheScope")
	b, _ := json.Marshal(m)
	return string(b)
}

// TestRealServersStateless: the TypeScript SDK v2 client pinned to 2026-07-28
// (no fallback) reaches @modelcontextprotocol/server-everything, a
// TypeScript SDK v1 server that speaks only the session era, through
// Spillway, the server run over stdio and over its Streamable HTTP mode:
// it lists and calls tools, reads a resource, gets a prompt, and
// completes a sampling and an elicitation round trip; every result equals
// what the v1 client (2025-11-25) gets through Spillway apart from the
// era's own members, and a large output is offloaded in both. Side by
// side, the same client through mcp-proxy 6.7.19 in front of the same
// stdio server: every step that passes there passes through Spillway.
func TestRealServersStateless(t *testing.T) {
	rt := rsSetup(t)
	index := rt.bin("server-everything")
	stdioCmd := rt.node + " " + index + " stdio"

	httpAddr := rsFreeAddr(t)
	rsRun(t, []string{"PORT=" + httpAddr[strings.LastIndex(httpAddr, ":")+1:]}, rt.node, index, "streamableHttp")
	rsListen(t, httpAddr)

	proxyAddr := rsFreeAddr(t)
	_, port, _ := net.SplitHostPort(proxyAddr)
	rsRun(t, nil, rt.node, rt.npm+"/mcp-proxy/dist/bin/mcp-proxy.mjs", "--host", "127.0.0.1", "--port", port,
		"--server", "stream", "--", rt.node, index, "stdio")
	rsListen(t, proxyAddr)

	through := map[string][]string{
		"stdio": {"--upstream-cmd", stdioCmd},
		"http":  {"--upstream-url", "http://" + httpAddr + "/mcp"},
	}
	var viaSpillwayStdio map[string]rsEraStep
	for _, mode := range []string{"stdio", "http"} {
		t.Run(mode, func(t *testing.T) {
			base, token := rsSpillway(t, through[mode]...)
			_, old, err := rsStatelessClient(t, rt, "v1", base+"/mcp", token)
			if err != "" {
				t.Fatalf("the 2025-11-25 client: %s", err)
			}
			tools, now, err := rsStatelessClient(t, rt, "v2pin", base+"/mcp", token)
			if err != "" {
				t.Fatalf("the 2026-07-28 client: %s", err)
			}
			if mode == "stdio" {
				viaSpillwayStdio = now
			}
			if !strings.Contains(strings.Join(tools, " "), "trigger-sampling-request") {
				t.Errorf("the 2026-07-28 client lists %v: no sampling tool (its capabilities did not reach the server)", tools)
			}
			for _, step := range []string{"echo", "resources/read", "prompts/get", "sampling", "elicitation", "large"} {
				o, n := old[step], now[step]
				if n.Error != "" || o.Error != "" || n.Result == nil {
					t.Errorf("%s: 2026-07-28 %q, 2025-11-25 %q", step, n.Error, o.Error)
					continue
				}
				if step == "large" {
					// Offloaded in both: a link instead of 400 KB.
					for era, s := range map[string]rsEraStep{"2025-11-25": o, "2026-07-28": n} {
						if s.Size > rsMaxMessage || !strings.Contains(string(s.Result), "dev.spillway/replaced") {
							t.Errorf("large output, %s: %d bytes: %.300s", era, s.Size, s.Result)
						}
					}
					continue
				}
				if g, w := rsWithoutEra(t, n.Result), rsWithoutEra(t, o.Result); g != w {
					t.Errorf("%s: 2026-07-28 result\n%.600s\n2025-11-25 result\n%.600s", step, g, w)
				}
			}
			t.Logf("2026-07-28 through Spillway (%s): %d steps; large output %d bytes", mode, len(now), now["large"].Size)
		})
	}

	t.Run("mcp-proxy side by side", func(t *testing.T) {
		if viaSpillwayStdio == nil {
			t.Skip("the stdio run did not finish")
		}
		_, theirs, err := rsStatelessClient(t, rt, "v2pin", "http://"+proxyAddr+"/mcp", "")
		if err != "" {
			t.Fatalf("the 2026-07-28 client through mcp-proxy: %s", err)
		}
		passed := 0
		for step, s := range theirs {
			if s.Error != "" {
				t.Logf("%s fails through mcp-proxy too: %s", step, s.Error)
				continue
			}
			passed++
			if ours := viaSpillwayStdio[step]; ours.Error != "" || ours.Result == nil {
				t.Errorf("%s passes through mcp-proxy (%d bytes) but not through Spillway: %s", step, s.Size, ours.Error)
			}
		}
		t.Logf("%d of %d steps pass through mcp-proxy 6.7.19; large output there %d bytes, through Spillway %d",
			passed, len(theirs), theirs["large"].Size, viaSpillwayStdio["large"].Size)
		if passed == 0 {
			t.Error("nothing passed through mcp-proxy: the comparison shows nothing")
		}
	})
}
