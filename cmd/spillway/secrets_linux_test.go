package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// Issue 38, item 8: a secret given on the command line is in
// /proc/PID/cmdline, which every local user reads, so an --upstream-cmd
// child read every tenant's token and the signing keys there whatever
// --upstream-user it ran as. The real binary refuses both flags on the
// command line when it runs a child, saying which forms to use; those
// forms (environment, files) work, and the child finds neither secret in
// Spillway's command line nor in its own environment.
func TestArgvSecretsRefusedWithUpstreamCmd(t *testing.T) {
	bin := spillwayBin(t)
	const tok = "inbound-secret-0123456789"
	const keys = "k1:c2lnbmluZy1rZXktc2VjcmV0LTAxMjM0NTY3ODlhYmNkZWY="
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tt := range []struct {
		args, env []string
		want      []string
	}{
		{[]string{"--auth-tokens", tok + "=team"}, nil, []string{"--auth-tokens is refused on the command line", "--auth-tokens-file, SPILLWAY_AUTH_TOKENS or a --config file of mode 0600"}},
		{[]string{"--signing-keys=" + keys}, nil, []string{"--signing-keys is refused on the command line", "--key-file, SPILLWAY_SIGNING_KEYS or a --config file of mode 0600"}},
		{[]string{"--upstream-env", "SPILLWAY_AUTH_TOKENS"}, []string{"SPILLWAY_AUTH_TOKENS=" + tok + "=team"}, []string{"--upstream-env SPILLWAY_AUTH_TOKENS: the child must not hold Spillway's secrets"}},
	} {
		// A server that does not refuse serves on: stopped after 20 s.
		refuse, stop := context.WithTimeout(ctx, 20*time.Second)
		cmd := exec.CommandContext(refuse, bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--upstream-cmd", "cat"}, tt.args...)...)
		cmd.Env = append(slices.Clone(env), tt.env...)
		out, err := cmd.CombinedOutput()
		stop()
		if code := cmd.ProcessState.ExitCode(); code <= 0 {
			t.Errorf("serve %v: exit %d (%v), want a refusal: %s", tt.args, code, err, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("serve %v said %q, want it to say %q", tt.args, out, w)
			}
		}
	}

	// The environment form: Spillway takes both secrets, its child sees
	// neither.
	out, data := t.TempDir(), t.TempDir()
	child := `sh -c 'tr "\0" " " < /proc/$PPID/cmdline > ` + out + `/cmdline; env > ` + out + `/env.tmp; mv ` + out + `/env.tmp ` + out + `/env; exec cat > /dev/null'`
	addr := rsFreeAddr(t)
	startBin(t, ctx, append(slices.Clone(env), "SPILLWAY_AUTH_TOKENS="+tok+"=team", "SPILLWAY_SIGNING_KEYS="+keys),
		"serve", "--listen", addr, "--data", data, "--log-level", "warn", "--upstream-cmd", child)
	base := "http://" + addr
	authenticates(t, base, tok)
	// The child starts with the first session; it never answers, nor need it.
	go func() {
		resp := mcpPostCtx(ctx, base, tok)
		if resp != nil {
			resp.Body.Close()
		}
	}()
	var childEnv []byte
	for deadline := time.Now().Add(30 * time.Second); childEnv == nil; time.Sleep(50 * time.Millisecond) {
		childEnv, _ = os.ReadFile(filepath.Join(out, "env"))
		if time.Now().After(deadline) {
			t.Fatal("the child did not start")
		}
	}
	cmdline, _ := os.ReadFile(filepath.Join(out, "cmdline"))
	if !strings.Contains(string(cmdline), "serve") {
		t.Fatalf("the child read no command line of Spillway: %q", cmdline)
	}
	for _, secret := range []string{tok, keys[3:], "SPILLWAY_"} {
		if strings.Contains(string(cmdline), secret) || strings.Contains(string(childEnv), secret) {
			t.Errorf("the child read %q: cmdline %q, environment:\n%s", secret, cmdline, childEnv)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "signing.keys")); err == nil {
		t.Error("SPILLWAY_SIGNING_KEYS was not used: a key file was made")
	}

	// The file forms.
	tokFile, keyFile := filepath.Join(t.TempDir(), "tokens"), filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(tokFile, []byte(tok+"=team\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(keys+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr = rsFreeAddr(t)
	startBin(t, ctx, env, "serve", "--listen", addr, "--data", t.TempDir(), "--log-level", "warn",
		"--upstream-cmd", "cat", "--auth-tokens-file", tokFile, "--key-file", keyFile)
	authenticates(t, "http://"+addr, tok)
}

// startBin starts the spillway binary with args and env, and stops it with
// SIGTERM when the test ends, logging its stderr if the test failed.
func startBin(t *testing.T, ctx context.Context, env []string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, spillwayBin(t), args...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("spillway %v stderr:\n%s", args, stderr.String())
		}
	})
}

// authenticates waits for the server at base and asserts that /mcp
// admits tok and refuses another token.
func authenticates(t *testing.T, base, tok string) {
	t.Helper()
	status := func(bearer string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for deadline := time.Now().Add(30 * time.Second); status(tok) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("serve did not answer")
		}
	}
	// Without a session a GET is refused with 400: after authentication.
	if got := status(tok); got != http.StatusBadRequest {
		t.Errorf("GET /mcp with the configured token = %d, want 400 (authenticated, no session)", got)
	}
	if got := status("another-token-0123456789"); got != http.StatusUnauthorized {
		t.Errorf("GET /mcp with another token = %d, want 401", got)
	}
}

// mcpPostCtx posts an initialize to /mcp with tok; nil if it failed.
func mcpPostCtx(ctx context.Context, base, tok string) *http.Response {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	return resp
}
