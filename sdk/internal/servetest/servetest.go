// Package servetest starts a real `spillway serve`, built from this
// repository, on loopback for tests.
package servetest

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Token is the inbound token the server accepts, for tenant "test".
const Token = "sdk-test-token-0123456789abcdef"

var build struct {
	sync.Once
	bin string
	err error
}

// Start builds spillway once per test binary, serves it on a free port
// with a temp data dir, and returns its base URL. The server stops when t
// ends.
func Start(t testing.TB, extra ...string) string {
	t.Helper()
	build.Do(func() {
		dir, err := os.MkdirTemp("", "spillway-sdk-")
		if err != nil {
			build.err = err
			return
		}
		root, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			build.err = err
			return
		}
		build.bin = filepath.Join(dir, "spillway")
		cmd := exec.Command("go", "build", "-o", build.bin, "./cmd/spillway")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = &buildError{string(out)}
		}
	})
	if build.err != nil {
		t.Fatalf("building spillway: %v", build.err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"serve", "--listen", addr, "--data", t.TempDir(), "--auth-tokens", Token + "=test", "--log-level", "error"}, extra...)
	cmd := exec.Command(build.bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return "http://" + addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("spillway never became ready: %v", err)
		}
	}
}

type buildError struct{ out string }

func (e *buildError) Error() string { return e.out }
