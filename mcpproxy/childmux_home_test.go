package mcpproxy_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// childWhoami asks the child behind the proxy at url who it is.
func childWhoami(t *testing.T, url string) (uid int, home, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := statelessPost(ctx, url, 1, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	sseMessages(ctx, resp, func(m map[string]json.RawMessage) {
		var r struct {
			Content []struct{ Text string } `json:"content"`
		}
		if json.Unmarshal(m["result"], &r) == nil && len(r.Content) == 1 {
			text = r.Content[0].Text
		}
	})
	var w struct {
		UID       int
		Home, Key string
	}
	if err := json.Unmarshal([]byte(text), &w); err != nil {
		t.Fatalf("whoami answered %q", text)
	}
	return w.UID, w.Home, w.Key
}

// A --upstream-cmd child does not see Spillway's HOME, where the default
// signing key lives: its HOME is its own and empty.
func TestChildmuxChildHomeIsNotSpillways(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "key"), []byte("signing-key"), 0o600)
	t.Setenv("HOME", home)
	_, url := childProxy(t, "plain", mcpproxy.Options{})
	_, childHome, key := childWhoami(t, url)
	if childHome == home || childHome == "" || key != "" {
		t.Fatalf("the child's HOME is %q (Spillway's %q), it read %q from $HOME/key", childHome, home, key)
	}
}

// With User, the child runs as that user (nobody) and cannot read
// Spillway's 0600 key even when pointed at Spillway's HOME.
func TestChildmuxChildRunsAsUser(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	if os.Geteuid() != 0 {
		t.Skip("running a child as another user needs root")
	}
	// The test binary is the child; nobody must be able to run it.
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "child")
	copyFile(t, self, bin)
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	os.WriteFile(filepath.Join(home, "key"), []byte("signing-key"), 0o600)
	_, args := childCmd("plain")
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: bin, Args: args, Dir: "/",
		User: "nobody", Env: []string{"HOME=" + home}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	uid, childHome, key := childWhoami(t, serve(t, p))
	if strconv.Itoa(uid) != nobody.Uid || childHome != home || key != "" {
		t.Fatalf("the child runs as uid %d (want %s), HOME %q, read %q from Spillway's 0600 key", uid, nobody.Uid, childHome, key)
	}

	if _, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: bin, User: "no-such-user-here"}}); err == nil {
		t.Fatal("New accepted an unknown user")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
