package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sharedDir is a temporary directory that the unprivileged user of
// runUnprivileged can use too.
func sharedDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "spillway-secrets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// A --upstream-cmd child runs under Spillway's own uid. It must not read
// Spillway's environment (inbound tokens, store credentials) through
// /proc/PPID/environ, nor find the signing key under the HOME it inherits.
// Spillway runs as an unprivileged user here, as in production: as root
// (this test's usual case) it is started as nobody, and its child with it.
func TestChildCannotReadSpillwaySecrets(t *testing.T) {
	dir := sharedDir(t)
	bin := spillwayBin(t)
	home := filepath.Join(dir, "home")
	out := filepath.Join(dir, "seen")
	for _, d := range []string{home, out} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// What the child tries, each into a file of its own.
	child := `sh -c 'cat /proc/$PPID/environ > ` + out + `/environ 2>&1; ` +
		`cat "$HOME/.local/share/spillway/signing.keys" > ` + out + `/key 2>&1; ` +
		`echo "$HOME" > ` + out + `/home; exec cat > /dev/null'`
	cmd := exec.Command(bin, "serve", "--stdio", "--listen", "127.0.0.1:0", "--log-level", "warn", "--upstream-cmd", child)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"SPILLWAY_AUTH_TOKENS=inbound-secret-0123456789=team", "AWS_SECRET_ACCESS_KEY=store-secret-abc"}
	if os.Geteuid() == 0 {
		for _, d := range []string{home, out} {
			if err := os.Chown(d, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("spillway stderr:\n%s", stderr.String())
		}
	}()
	go io.Copy(io.Discard, bufio.NewReader(stdout))
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	home2 := ""
	for deadline := time.Now().Add(30 * time.Second); !strings.HasSuffix(home2, "\n"); time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(out, "home"))
		home2 = string(b)
		if time.Now().After(deadline) {
			t.Fatal("the child did not start")
		}
	}
	environ, _ := os.ReadFile(filepath.Join(out, "environ"))
	for _, secret := range []string{"inbound-secret", "store-secret"} {
		if strings.Contains(string(environ), secret) {
			t.Errorf("the child read %s from /proc/$PPID/environ", secret)
		}
	}
	if !strings.Contains(string(environ), "Permission denied") {
		t.Errorf("reading /proc/$PPID/environ: %q, want Permission denied", environ)
	}
	// Spillway made its signing key under the HOME it was given.
	if _, err := os.Stat(filepath.Join(home, ".local/share/spillway/signing.keys")); err != nil {
		t.Fatalf("no default signing key: %v", err)
	}
	if key, _ := os.ReadFile(filepath.Join(out, "key")); strings.Contains(string(key), "signing keys") || strings.TrimSpace(home2) == home {
		t.Errorf("the child has Spillway's HOME %s (key file read: %v)", strings.TrimSpace(home2), strings.Contains(string(key), "signing keys"))
	}
}

// --upstream-user runs the child as another user, the one way to keep it
// from Spillway's files (the signing key under --data).
func TestUpstreamUser(t *testing.T) {
	if os.Geteuid() != 0 {
		if err := newServeErr(t, "--upstream-cmd", "cat", "--upstream-user", "nobody"); err == nil {
			t.Log("not root: the child's start fails instead, which the child package tests")
		}
		return
	}
	out := sharedDir(t)
	data := t.TempDir()
	base := startServe(t, data, "--upstream-user", "nobody",
		"--upstream-cmd", `sh -c 'cat "`+data+`/signing.keys" > `+out+`/key 2>&1; id -u > `+out+`/uid; exec cat > /dev/null'`)
	// The child starts with the session; it never answers, nor need it.
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+mcpToken(t, data))
	go func() {
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	uid := ""
	for deadline := time.Now().Add(20 * time.Second); !strings.HasSuffix(uid, "\n"); time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(out, "uid"))
		uid = string(b)
		if time.Now().After(deadline) {
			t.Fatal("the child did not start")
		}
	}
	if uid != "65534\n" {
		t.Errorf("the child ran as uid %q, want nobody's 65534", uid)
	}
	if key, _ := os.ReadFile(filepath.Join(out, "key")); strings.Contains(string(key), "signing keys") {
		t.Error("the child read Spillway's signing key")
	}
}
