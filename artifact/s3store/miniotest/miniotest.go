// Package miniotest runs a real MinIO server for tests: the `minio server`
// binary, on a free 127.0.0.1 port, with a temporary data directory and
// random root credentials.
//
// The binary is $SPILLWAY_MINIO, else <module root>/.tools/bin/minio (make
// tools builds it; deploy/local/minio.sh install does too). When it is
// missing, tests are skipped, or fail when the environment variable CI is
// set.
//
// Start gives a test its own server, stopped when the test ends. Startup
// takes well under a second; a package with many MinIO tests can still
// share one server with Shared and RunShared:
//
//	func TestMain(m *testing.M) { os.Exit(miniotest.RunShared(m)) }
//
//	func TestX(t *testing.T) {
//		store := miniotest.Shared(t).Store(t) // a fresh bucket
//		...
//	}
package miniotest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/s3store"
)

// Server is a running MinIO. Its fields are set by Start and Shared and
// must not be changed; its methods are safe for concurrent use.
type Server struct {
	Endpoint  string        // host:port of the S3 API on 127.0.0.1
	AccessKey string        // root user
	SecretKey string        // root password
	Dir       string        // data directory
	Startup   time.Duration // from exec to ready

	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has exited
	log      *tailBuffer
	stopOnce sync.Once
}

// Binary returns the path of the MinIO binary tests use, or an error
// saying where it was looked for.
func Binary() (string, error) {
	if p := os.Getenv("SPILLWAY_MINIO"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("SPILLWAY_MINIO=%s: %w", p, err)
		}
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, ".tools", "bin", "minio")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no MinIO at %s (run make tools or deploy/local/minio.sh install, or set SPILLWAY_MINIO): %w", p, err)
	}
	return p, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("miniotest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// binary returns Binary's path or ends t: Fatal under CI, Skip otherwise.
func binary(t testing.TB) string {
	t.Helper()
	p, err := Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("miniotest: %v", err)
		}
		t.Skipf("miniotest: %v (set CI to make this a failure)", err)
	}
	return p
}

// Start starts a MinIO server for t and stops it (waiting for it to exit)
// when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	s, err := launch(bin, t.TempDir())
	if err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("miniotest: stop: %v", err)
		}
	})
	t.Logf("miniotest: MinIO on %s ready in %v", s.Endpoint, s.Startup.Round(time.Millisecond))
	return s
}

var shared struct {
	sync.Mutex
	enabled bool
	srv     *Server
	err     error
}

// RunShared runs m with a server that Shared starts on first use, stops
// it afterwards, and returns m.Run's exit code. Call it from TestMain.
func RunShared(m *testing.M) int {
	shared.Lock()
	shared.enabled = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "miniotest: stop:", err)
		}
		os.RemoveAll(shared.srv.Dir)
	}
	return code
}

// Shared returns the package's shared server, starting it on first use.
// TestMain must run the tests through RunShared. Do not Stop it; give each
// test its own bucket (Server.Options and Server.Store do).
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	shared.Lock()
	defer shared.Unlock()
	if !shared.enabled {
		t.Fatal("miniotest: Shared needs TestMain to call miniotest.RunShared")
	}
	if shared.srv == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "miniotest-")
		if err == nil {
			shared.srv, err = launch(bin, dir)
			if err != nil {
				os.RemoveAll(dir)
			}
		}
		shared.err = err
		if err == nil {
			t.Logf("miniotest: shared MinIO on %s ready in %v", shared.srv.Endpoint, shared.srv.Startup.Round(time.Millisecond))
		}
	}
	if shared.err != nil {
		t.Fatalf("miniotest: shared server: %v", shared.err)
	}
	return shared.srv
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// launch starts MinIO on dir and waits until it is ready. A port taken
// between choosing and binding makes it try again with others.
func launch(bin, dir string) (*Server, error) {
	var err error
	for range 3 {
		var s *Server
		if s, err = launchOnce(bin, dir); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func launchOnce(bin, dir string) (*Server, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	console, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  addr,
		AccessKey: "test-" + randHex(6),
		SecretKey: randHex(20),
		Dir:       dir,
		exited:    make(chan struct{}),
		log:       &tailBuffer{max: 64 << 10},
	}
	cmd := exec.Command(bin, "server", "--quiet", "--address", addr, "--console-address", console, dir)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"MINIO_ROOT_USER="+s.AccessKey,
		"MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off", // no console UI to serve
		"MINIO_UPDATE=off",  // no update checks
		"MINIO_CI_CD=1",     // accept a data dir on the root disk, skip interactive niceties
	)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = sysProcAttr()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s.cmd = cmd
	go func() { cmd.Wait(); close(s.exited) }()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("MinIO on %s: %w\n%s", addr, err, s.log.String())
	}
	s.Startup = time.Since(start)
	return s, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	url := "http://" + s.Endpoint + "/minio/health/ready"
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before ready (%v)", s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for
// it to exit. Later calls do nothing. It returns an error only when the
// process had to be killed.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			return
		default:
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
			err = fmt.Errorf("MinIO on %s ignored SIGTERM for 10s; killed\n%s", s.Endpoint, s.log.String())
		}
	})
	return err
}

// Log returns the tail of the server's output.
func (s *Server) Log() string { return s.log.String() }

var buckets atomic.Int64

// Options returns store options for a fresh, uniquely named bucket on s
// (created by s3store.New).
func (s *Server) Options(t testing.TB) s3store.Options {
	return s3store.Options{
		Endpoint:     s.Endpoint,
		Bucket:       fmt.Sprintf("t%d-%s", buckets.Add(1), randHex(6)),
		AccessKey:    s.AccessKey,
		SecretKey:    s.SecretKey,
		Region:       "us-east-1", // MinIO's; saves a location lookup
		CreateBucket: true,
	}
}

// Store returns a store on a fresh bucket of s, or ends t.
func (s *Server) Store(t testing.TB) *s3store.Store {
	t.Helper()
	st, err := s3store.New(context.Background(), s.Options(t))
	if err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	return st
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = bytes.Clone(w.b[len(w.b)-w.max:])
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
