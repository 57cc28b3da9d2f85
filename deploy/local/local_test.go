//go:build linux

package local

import (
	"bufio"
	"context"
	"github.com/spillway-dev/spillway/policy/policytest"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/s3store"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
)

func script(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	p, err := filepath.Abs("minio.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func minioBinary(t *testing.T) string {
	t.Helper()
	p, err := miniotest.Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skipf("%v (set CI to make this a failure)", err)
	}
	return p
}

// TestInstallSkips runs install where the pinned MinIO is already built,
// with a Go toolchain that fails: it must not try to build.
func TestInstallSkips(t *testing.T) {
	sh := script(t)
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^MINIO_VERSION\s*:=\s*(\S+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no MINIO_VERSION in the Makefile")
	}
	stamp := filepath.Join("..", "..", ".tools", "stamps", "minio-"+string(m[1]))
	if _, err := os.Stat(stamp); err != nil {
		t.Skipf("MinIO %s not installed here (%v)", m[1], err)
	}
	cmd := exec.Command(sh, "install")
	cmd.Env = append(os.Environ(), "GO=false")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "up to date") {
		t.Errorf("install with the stamp present: %v\n%s", err, out)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestStart runs `minio.sh start DIR`, uses the environment it prints to
// store an artifact through s3store, and checks that `env DIR` prints the
// same environment.
func TestStart(t *testing.T) {
	sh, bin := script(t), minioBinary(t)
	dir := t.TempDir()
	port, console := freePort(t), freePort(t)
	cmd := exec.Command(sh, "start", dir)
	cmd.Env = append(os.Environ(), "SPILLWAY_MINIO="+bin, "MINIO_PORT="+strconv.Itoa(port),
		"MINIO_CONSOLE_PORT="+strconv.Itoa(console), "MINIO_BUCKET=devbucket")
	var out policytest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})

	ready := "http://127.0.0.1:" + strconv.Itoa(port) + "/minio/health/ready"
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("minio.sh start exited:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 30s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	env := exports(t, out.String())
	want := "s3://devbucket?endpoint=127.0.0.1:" + strconv.Itoa(port) + "&secure=false&create=true"
	if env["SPILLWAY_STORE"] != want || env["AWS_ACCESS_KEY_ID"] == "" || len(env["AWS_SECRET_ACCESS_KEY"]) < 32 {
		t.Fatalf("printed environment %v", env)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "")
	o, err := s3store.ParseURL(env["SPILLWAY_STORE"])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := s3store.New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Put(ctx, artifact.Artifact{ID: artifact.NewID()}, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Stat(ctx, a.ID); err != nil || got.Size != 5 {
		t.Fatalf("Stat = %+v, %v", got, err)
	}

	again := exec.Command(sh, "env", dir)
	again.Env = cmd.Env
	b, err := again.Output()
	if err != nil {
		t.Fatal(err)
	}
	if env2 := exports(t, string(b)); len(env2) != len(env) || env2["AWS_SECRET_ACCESS_KEY"] != env["AWS_SECRET_ACCESS_KEY"] {
		t.Errorf("env DIR printed %v, start printed %v", env2, env)
	}
	if fi, err := os.Stat(filepath.Join(dir, "credentials")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials file: %v, %v; want mode 0600", fi.Mode(), err)
	}
}

// exports parses `export K=V` and `export K='V'` lines.
func exports(t *testing.T, s string) map[string]string {
	t.Helper()
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		kv, ok := strings.CutPrefix(sc.Text(), "export ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		env[k] = strings.Trim(v, "'")
	}
	return env
}
