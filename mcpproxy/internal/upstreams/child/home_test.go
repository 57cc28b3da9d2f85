//go:build unix

package child

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// whoami is a child that reports its uid, its HOME, whether it could
// write there, what it read from $HOME/key, $SECRET and $PUBLIC, then
// echoes.
const whoami = `printf '{"jsonrpc":"2.0","method":"me","params":{"uid":"%s","home":"%s","wrote":"%s","homekey":"%s","secret":"%s","public":"%s"}}\n' ` +
	`"$(id -u)" "$HOME" "$(touch "$HOME/x" && echo yes)" "$(cat "$HOME/key" 2>/dev/null)" "$(cat "$SECRET" 2>/dev/null)" "$(cat "$PUBLIC" 2>/dev/null)"; exec cat`

type report struct{ UID, Home, Wrote, HomeKey, Secret, Public string }

func startWhoami(t *testing.T, c Command) (*Conn, report) {
	t.Helper()
	c.Path, c.Args = "sh", []string{"-c", whoami}
	logs := &policytest.Buffer{}
	conn, err := Start(c, Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := recvWithin(t, conn, 10*time.Second)
	if m == nil {
		t.Fatalf("no report (Err %v); log:\n%s", conn.Err(), logs)
	}
	var r report
	if err := json.Unmarshal(m.Params, &r); err != nil {
		t.Fatal(err)
	}
	return conn, r
}

// Spillway's home holds its signing key: the child's HOME is an empty
// private directory, not Spillway's, removed when the child is gone.
func TestChildHomeIsItsOwn(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "key"), []byte("signing-key"), 0o600)
	t.Setenv("HOME", home)
	c, r := startWhoami(t, Command{})
	if r.Home == home || r.Home == "" || r.HomeKey != "" {
		t.Fatalf("the child's HOME is %q and $HOME/key holds %q; Spillway's HOME is %q", r.Home, r.HomeKey, home)
	}
	if r.Wrote != "yes" {
		t.Errorf("the child cannot write its HOME %s", r.Home)
	}
	st, err := os.Stat(r.Home)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("the child's HOME has mode %v", st.Mode().Perm())
	}
	closeWithin(t, c)
	if _, err := os.Stat(r.Home); !os.IsNotExist(err) {
		t.Errorf("the child's HOME %s outlived it: %v", r.Home, err)
	}

	// Named in the configuration, HOME is passed as asked.
	c, r = startWhoami(t, Command{Env: []string{"HOME"}})
	if r.Home != home || r.HomeKey != "signing-key" {
		t.Errorf("HOME configured by name: the child got %q, want %q", r.Home, home)
	}
	closeWithin(t, c)
	c, r = startWhoami(t, Command{Env: []string{"HOME=/nonexistent/h"}})
	if r.Home != "/nonexistent/h" {
		t.Errorf("HOME=VALUE configured: the child got %q", r.Home)
	}
	closeWithin(t, c)
}

// With User, the child runs as that user (nobody here): its own report
// and the kernel's (/proc) say so, its private HOME is its own, and
// Spillway's 0600 files are closed to it. Without the privilege, Start
// says what is missing.
func TestChildRunsAsUser(t *testing.T) {
	u, err := LookupUser("nobody")
	if err != nil {
		t.Skip("no user nobody:", err)
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // so that only the files' modes stand in the way
	os.Chmod(dir, 0o755)
	secret, public := filepath.Join(dir, "key"), filepath.Join(dir, "public")
	os.WriteFile(secret, []byte("signing-key"), 0o600)
	os.WriteFile(public, []byte("readable"), 0o644)
	cmd := Command{Dir: "/", User: u, Env: []string{"SECRET=" + secret, "PUBLIC=" + public}}
	if os.Geteuid() != 0 {
		cmd.Path, cmd.Args = "sh", []string{"-c", "exec cat"}
		if _, err := Start(cmd, Options{}); err == nil || !strings.Contains(err.Error(), "needs root") {
			t.Fatalf("Start as another user without the privilege: %v", err)
		}
		return
	}
	c, r := startWhoami(t, cmd)
	if r.UID != "65534" || r.UID != fmtUint(u.UID) {
		t.Errorf("the child reports uid %s; want nobody's, %d", r.UID, u.UID)
	}
	status, err := os.ReadFile("/proc/" + fmtUint(uint32(c.Pid())) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:") {
			want := fmtUint(u.UID)
			if f[0] == "Gid:" {
				want = fmtUint(u.GID)
			}
			if f[1] != want || f[2] != want || f[3] != want || f[4] != want {
				t.Errorf("/proc says %s", l)
			}
		}
		if f := strings.Fields(l); len(f) > 0 && f[0] == "Groups:" && len(f) > 1 {
			t.Errorf("the child kept supplementary groups: %s", l)
		}
	}
	if r.Wrote != "yes" {
		t.Errorf("the child cannot write its HOME %s", r.Home)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(r.Home, &st); err != nil || st.Uid != u.UID {
		t.Errorf("the child's HOME %s is owned by %d (%v)", r.Home, st.Uid, err)
	}
	if r.Secret != "" || r.Public != "readable" {
		t.Errorf("the child read %q from Spillway's 0600 file and %q from a 0644 one", r.Secret, r.Public)
	}
	closeWithin(t, c)
}

func fmtUint(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
