package token

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseKeys(t *testing.T) {
	keys, err := ParseKeys("# comment, with a comma\nk2:" + strings.Repeat("A", 44) + ",k1:" + strings.Repeat("B", 44) + "\n")
	if err != nil || len(keys) != 2 || keys[0].ID != "k2" || keys[1].ID != "k1" || len(keys[0].Secret) != 33 {
		t.Fatalf("ParseKeys = %+v, %v", keys, err)
	}
	for _, bad := range []string{"", "# only a comment", "nocolon", "k:not base64!"} {
		if _, err := ParseKeys(bad); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
}

// FormatKeys is ParseKeys' inverse, for the fuzz round trip.
func formatKeys(keys []Key) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k.ID + ":" + base64.StdEncoding.EncodeToString(k.Secret) + "\n")
	}
	return b.String()
}

// The key file is read from disk on every poll: whatever it holds, the
// parser must not panic, and what it accepts must survive a round trip.
func FuzzParseKeys(f *testing.F) {
	f.Add("k1:" + strings.Repeat("A", 44) + "\n")
	f.Add("# c\nk2:" + strings.Repeat("B", 43) + ",k1:" + strings.Repeat("C", 44))
	f.Add("a:b:c")
	f.Add(",,,\n\n#")
	f.Add("k:_-_-")
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseKeys(s)
		if err != nil {
			return
		}
		if len(keys) == 0 {
			t.Fatal("no error and no keys")
		}
		for _, k := range keys {
			if strings.ContainsAny(k.ID, ":,\n") || k.ID != strings.TrimSpace(k.ID) {
				return // an id the file format cannot write back; NewSigner judges it
			}
			if strings.HasPrefix(k.ID, "#") || k.ID == "" && len(keys) > 1 {
				return
			}
		}
		again, err := ParseKeys(formatKeys(keys))
		if err != nil || len(again) != len(keys) {
			t.Fatalf("round trip of %q: %v, %d keys want %d", s, err, len(again), len(keys))
		}
		for i := range keys {
			if again[i].ID != keys[i].ID || !bytes.Equal(again[i].Secret, keys[i].Secret) {
				t.Fatalf("round trip of %q changed key %d", s, i)
			}
		}
	})
}

func writeKeys(t *testing.T, path string, mode os.FileMode, keys ...Key) {
	t.Helper()
	// Replace atomically, as WatchKeyFile asks of operators.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(formatKeys(keys)), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, mode); err != nil { // WriteFile's mode passes the umask
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

var (
	k0 = Key{ID: "k0", Secret: bytes.Repeat([]byte{2}, 32)}
	k1 = Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}
)

// A key file others can read is a leaked key: refused, at start and on
// reload (it was accepted whatever its mode).
func TestKeyFileModeRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, true}, {0o644, false}, {0o604, false}, {0o660, false}, {0o666, false}} {
		path := filepath.Join(dir, "keys-"+tt.mode.String())
		writeKeys(t, path, tt.mode, k1)
		_, err := LoadOrCreateKeyFile(path)
		if tt.ok != (err == nil) {
			t.Errorf("mode %04o: err = %v, want ok=%v", tt.mode, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: error %q does not say what to do", tt.mode, err)
		}
	}
	// Group-readable is only allowed for this process's own group (the
	// Kubernetes fsGroup arrangement); another group is refused.
	path := filepath.Join(dir, "other-group")
	writeKeys(t, path, 0o640, k1)
	if err := os.Chown(path, -1, os.Getegid()+4242); err != nil {
		t.Logf("cannot chgrp without privileges (%v); the foreign-group case is not exercised", err)
		return
	}
	if _, err := LoadKeyFile(path); err == nil {
		t.Error("0640 key file of a foreign group accepted")
	}
}

// projectedFile lays name out as the kubelet does in a secret or projected
// volume: DIR/..TIMESTAMP/name holds the bytes with mode, DIR/..data links
// to that directory, and DIR/name links to ..data/name. It returns
// DIR/name.
func projectedFile(t *testing.T, name string, b []byte, mode os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_11_26_07_00_00.000000001")
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, name), b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ts, name), mode); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// One rule for secret files, fit for Kubernetes secret volumes: a
// projected volume's files (symlinks into ..data, 0644 by default, 0440
// under an fsGroup) are read; a write bit for group or others is refused
// there too; a plain world-readable file, or a symlink to one outside that
// layout, is refused.
func TestSecretFileKubernetesVolume(t *testing.T) {
	content := []byte(formatKeys([]Key{k1}))
	for _, tt := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o644, true}, {0o444, true}, {0o440, true}, {0o400, true}, {0o664, false}, {0o646, false}} {
		path := projectedFile(t, "signing.keys", content, tt.mode)
		if _, err := LoadKeyFile(path); tt.ok != (err == nil) {
			t.Errorf("projected volume, mode %04o: err = %v, want ok=%v", tt.mode, err, tt.ok)
		}
	}
	// A symlink to a world-readable file, not in the kubelet's layout.
	dir := t.TempDir()
	target := filepath.Join(dir, "real")
	writeKeys(t, target, 0o644, k1)
	link := filepath.Join(dir, "signing.keys")
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(link); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("symlink to a 0644 file outside a projected volume: err = %v, want refused", err)
	}
}

// A failed first write left an empty key file, which then refused every
// restart ("no keys"). The file must appear complete or not at all.
func TestKeyFileFailedFirstWriteLeavesNothing(t *testing.T) {
	if path := os.Getenv("SPILLWAY_KEYFILE_CHILD"); path != "" {
		// Child: file size limit 0, so creating succeeds and writing fails.
		signal.Ignore(syscall.SIGXFSZ)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: 0}); err != nil {
			t.Skip(err)
		}
		if _, err := LoadOrCreateKeyFile(path); err == nil {
			t.Fatal("write under a zero size limit succeeded")
		}
		return
	}
	path := filepath.Join(t.TempDir(), "sub", "signing.keys")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeyFileFailedFirstWriteLeavesNothing$", "-test.v")
	cmd.Env = append(os.Environ(), "SPILLWAY_KEYFILE_CHILD="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed write left %s behind: %v", path, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 0 {
		t.Fatalf("temporary files left: %v", entries)
	}
	keys, err := LoadOrCreateKeyFile(path) // the next start
	if err != nil || len(keys) != 1 {
		t.Fatalf("restart after a failed write: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("created with mode %04o", fi.Mode().Perm())
	}
	again, err := LoadOrCreateKeyFile(path)
	if err != nil || again[0].ID != keys[0].ID {
		t.Fatalf("second start got another key: %v", err)
	}
}

func TestSetKeysRetires(t *testing.T) {
	s, err := NewSigner(k1, k0)
	if err != nil {
		t.Fatal(err)
	}
	id, now := testID(), time.Now()
	old, _ := mustSigner(t, k0).Mint(Claims{Artifact: id, Method: MethodGet, NotBefore: now, Expires: now.Add(time.Minute)})
	if _, err := s.Verify(old, id, now); err != nil {
		t.Fatal(err)
	}
	if err := s.SetKeys(Key{ID: "bad", Secret: []byte("short")}); err == nil {
		t.Fatal("short secret accepted")
	}
	if _, err := s.Verify(old, id, now); err != nil {
		t.Fatalf("a refused SetKeys changed the keys: %v", err)
	}
	if err := s.SetKeys(k1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(old, id, now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("retired key still verifies: %v", err)
	}
}

func mustSigner(t *testing.T, k Key, more ...Key) *Signer {
	t.Helper()
	s, err := NewSigner(k, more...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Retiring a key in the file kills its links within the poll interval,
// without a restart; a broken or too-open file keeps the keys in use.
func TestWatchKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "signing.keys")
	writeKeys(t, path, 0o600, k1, k0)
	keys, err := LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := mustSigner(t, keys[0], keys[1:]...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const every = 20 * time.Millisecond
	go WatchKeyFile(ctx, path, s, every, slog.New(slog.DiscardHandler))

	id, now := testID(), time.Now()
	byK0, _ := mustSigner(t, k0).Mint(Claims{Artifact: id, Method: MethodGet, NotBefore: now, Expires: now.Add(time.Hour)})
	byK1, _ := s.Mint(Claims{Artifact: id, Method: MethodGet, NotBefore: now, Expires: now.Add(time.Hour)})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(every + time.Second); !cond(); time.Sleep(every / 4) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, every+time.Second)
			}
		}
	}
	verifies := func(tok string) bool { _, err := s.Verify(tok, id, time.Now()); return err == nil }

	writeKeys(t, path, 0o600, k1)
	waitFor("retired key k0 refused", func() bool { return !verifies(byK0) })
	if !verifies(byK1) {
		t.Fatal("k1 token refused after k0 was retired")
	}
	// Broken and too-open files change nothing.
	os.WriteFile(path, []byte("garbage"), 0o600)
	time.Sleep(5 * every)
	writeKeys(t, path, 0o644, k0)
	time.Sleep(5 * every)
	if !verifies(byK1) || verifies(byK0) {
		t.Fatal("a broken or too-open key file changed the keys")
	}
	// Rotation: the new key signs, the old still verifies.
	k2 := Key{ID: "k2", Secret: bytes.Repeat([]byte{3}, 32)}
	writeKeys(t, path, 0o600, k2, k1)
	waitFor("new signing key", func() bool { return s.SigningKeyID() == "k2" })
	if !verifies(byK1) {
		t.Fatal("rotation dropped the verifying key")
	}
}
