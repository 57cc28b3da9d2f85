package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary play the processes spillway-load starts
// from its own executable (the stdio upstream, the bare relay, the anchors).
func TestMain(m *testing.M) {
	flag.Parse()
	if code, ok := internalMode(); ok {
		os.Exit(code)
	}
	code := m.Run()
	for _, c := range children {
		c.Process.Kill()
		c.Wait()
	}
	removeTempDirs()
	os.Exit(code)
}

// TestStdioComparisons runs the stdio-upstream modes small: every proxy
// (Spillway, the bare relay, and with `make tools` mcp-proxy and
// supergateway) must carry small calls, and two 1 MiB outputs at once, as
// JSON text and as a base64 image; Spillway must answer with links whose
// artifacts hash as the outputs, the others with the outputs themselves.
// Under CI a missing npm proxy fails the test.
func TestStdioComparisons(t *testing.T) {
	buildBins(t)
	want := 5
	if _, err := os.Stat(filepath.Join(*npmDir, "supergateway/dist/index.js")); err != nil || os.Getenv("SPILLWAY_NODE") == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("npm proxies missing under CI (make tools; source the test environment): %v", err)
		}
		t.Logf("without mcp-proxy and supergateway (make tools installs them): %v", err)
		*nodeBin, want = "", 3
	}
	ps, err := stdioProxies()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != want {
		t.Fatalf("%d proxies, want %d", len(ps), want)
	}
	small, err := stdioSmall(ps, []string{*bigtoolBin}, 2, 40)
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != want-1 { // Spillway --offload=false is left out of the small calls
		t.Errorf("small calls through %d proxies, want %d", len(small), want-1)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"text", "image"} {
		*bigKind = kind
		rs, err := bigOutputs(ps, "a stdio upstream", []string{self, "-upstream-stdio"}, 2, 1<<20, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkBig(t, kind, rs)
	}
}

// TestSSEComparisons runs the HTTP-upstream modes small: the bare reverse
// proxy and Spillway (offloading, on two cores and on one, and not
// offloading) carry two 1 MiB outputs at
// once from the SSE upstream, as JSON text (spelt as encoders spell it, as
// Go's json.Marshal does, and with \u escapes no encoder writes: the
// offloader keeps the first two as they arrive and hands the third back
// to the spill file) and as a base64 image, with the answers
// TestStdioComparisons wants.
func TestSSEComparisons(t *testing.T) {
	buildBins(t)
	up, err := startSSEUpstream()
	if err != nil {
		t.Fatal(err)
	}
	ps := sseProxies(up)
	for _, kind := range []string{"text", "text-go", "text-u", "image"} {
		*bigKind = kind
		rs, err := bigOutputs(ps, "an HTTP upstream over SSE", nil, 2, 1<<20, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 4 {
			t.Fatalf("%d proxies measured, want 4", len(rs))
		}
		checkBig(t, kind, rs)
	}
}

var built struct {
	sync.Once
	err error
}

// buildBins builds spillway and bigtool once for the tests and points the
// flags at them.
func buildBins(t *testing.T) {
	built.Do(func() {
		dir := tempDir("spillway-load-test-")
		build := exec.Command("go", "build", "-o", dir+"/", "github.com/spillway-dev/spillway/cmd/spillway", "github.com/spillway-dev/spillway/examples/bigtool/cmd/bigtool")
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
		*spillwayBin, *bigtoolBin = filepath.Join(dir, "spillway"), filepath.Join(dir, "bigtool")
		*bigTimeout = time.Minute
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
}

// checkBig wants Spillway's answers to be links with the right SHA-256 (a
// few KB to the client), every other side's the outputs themselves.
func checkBig(t *testing.T, kind string, rs []bigResult) {
	t.Helper()
	for _, r := range rs {
		links, inline := 0, 2
		if r.name == "Spillway" || r.name == "Spillway, GOMAXPROCS=1" {
			links, inline = 2, 0
			if r.received > 2*8<<10 {
				t.Errorf("%s %s: the client received %d bytes for two links", kind, r.name, r.received)
			}
		} else if r.received < 2<<20 {
			t.Errorf("%s %s: the client received %d bytes for two 1 MiB outputs", kind, r.name, r.received)
		}
		if r.links != links || r.inline != inline || len(r.errs) > 0 || r.killed || r.peak < r.idle || r.idle == 0 {
			t.Errorf("%s %s: %d links, %d inline (want %d, %d), errors %q, killed %v, RSS idle %d peak %d",
				kind, r.name, r.links, r.inline, links, inline, r.errs, r.killed, r.idle, r.peak)
		}
	}
}

// A binary that does not start is reported in one line that says how to
// build it, with exit code 1, and what was started before it is stopped
// (before, a panic's stack ended the tool).
func TestMissingBinary(t *testing.T) {
	old, oldSmall := *bigtoolBin, *smallOnly
	t.Cleanup(func() { *bigtoolBin, *smallOnly = old, oldSmall })
	*bigtoolBin, *smallOnly = filepath.Join(t.TempDir(), "no-bigtool"), true
	var stderr strings.Builder
	if code := mainCode(&stderr); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if msg := stderr.String(); !strings.Contains(msg, "no-bigtool") || !strings.Contains(msg, "make build") || strings.Count(msg, "\n") != 1 {
		t.Errorf("stderr %q, want one line naming the binary and make build", msg)
	}
	if len(children) != 0 {
		t.Errorf("%d children left", len(children))
	}
}
