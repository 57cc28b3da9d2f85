package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
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
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/spillway-dev/spillway/cmd/spillway", "github.com/spillway-dev/spillway/examples/bigtool/cmd/bigtool")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	*spillwayBin, *bigtoolBin = filepath.Join(dir, "spillway"), filepath.Join(dir, "bigtool")
	*bigTimeout = time.Minute
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
		rs, err := bigOutputs(ps, []string{self, "-upstream-stdio"}, 2, 1<<20, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			links, inline := 0, 2
			if r.name == "Spillway" {
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
}
