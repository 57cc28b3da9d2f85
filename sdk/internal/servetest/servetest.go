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
// with a temp data dir, and returns its base URL. extra are more flags of
// `spillway serve`. The server stops when t ends.
func Start(t testing.TB, extra ...string) string {
	t.Helper()
	bin := binary(t)
	addr := freeAddr(t)
	args := append([]string{"serve", "--listen", addr, "--data", t.TempDir(), "--auth-tokens", Token + "=test", "--log-level", "error"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	waitReady(t, addr)
	return "http://" + addr
}

// binary builds ./cmd/spillway of this module into a temp directory, once
// per test binary, and returns its path.
func binary(t testing.TB) string {
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
	return build.bin
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitReady waits up to 30 s for the server at addr to answer /readyz
// with 200.
func waitReady(t testing.TB, addr string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("spillway never became ready: %v", err)
		}
	}
}

// buildError is a failed build; its message is the compiler's output.
type buildError struct{ out string }

func (e *buildError) Error() string { return e.out }
