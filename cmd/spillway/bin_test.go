package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// spillwayBin builds this command once per test run, into a directory
// every user may read (some tests run it as nobody).
func spillwayBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		var dir string
		if dir, binErr = os.MkdirTemp("", "spillway-bin-"); binErr != nil {
			return
		}
		os.Chmod(dir, 0o755)
		binPath = filepath.Join(dir, "spillway")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// tool finds a pinned test tool named by env (make tools builds them into
// .tools/bin); with CI set, a missing tool fails the test.
func tool(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = "../../.tools/bin/" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "SPILLWAY_"), "_", "-"))
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no %s at %s (make tools): %v", env, p, err)
		}
		t.Skipf("no %s at %s (make tools)", env, p)
	}
	return p
}
