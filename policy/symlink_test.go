//go:build unix

package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// configMap lays dir out as Kubernetes mounts a ConfigMap volume: the
// files live in a timestamped hidden folder, ..data links to it, and each
// visible name links into ..data. Calling it again swaps ..data
// atomically, as the kubelet does.
func configMap(t *testing.T, dir, version string, files map[string]string) {
	t.Helper()
	ts := filepath.Join(dir, "..2026_11_26_"+version)
	for name, body := range files {
		p := filepath.Join(ts, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		top := strings.Split(name, "/")[0]
		if _, err := os.Lstat(filepath.Join(dir, top)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", top), filepath.Join(dir, top)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// Symlinks that stay inside the policy folder are followed (a ConfigMap
// volume, with a projected sub-folder, reloads when ..data is swapped);
// one that leaves it, or a file that is not a regular file, refuses the
// policy, at start and on reload, and the last good policy serves on.
func TestPolicySymlinks(t *testing.T) {
	dir := t.TempDir()
	configMap(t, dir, "1", map[string]string{
		"p.rego":        policyV("v1"),
		"sub/data.json": `{"answer": 42}`,
		"p_test.rego":   "package spillway_test\nimport data.spillway\ntest_allows if spillway.fetch.allow\n",
	})
	e, err := New(ctx, Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatalf("a ConfigMap volume: %v", err)
	}
	if got := reason(t, e); got != "v1" {
		t.Fatalf("reason %q", got)
	}
	configMap(t, dir, "2", map[string]string{"p.rego": policyV("v2"), "sub/data.json": `{"answer": 43}`, "p_test.rego": "package spillway_test\n"})
	if !e.Reload(ctx) || reason(t, e) != "v2" {
		t.Fatalf("a swapped ConfigMap is not taken: %+v", e.Status())
	}

	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.json"), []byte(`{"password": "hunter2"}`), 0o600)
	os.WriteFile(filepath.Join(outside, "x.rego"), []byte("package spillway\nextra := true\n"), 0o600)
	for _, tc := range []struct {
		name  string
		plant func(p string) error
	}{
		{"absolute link to a data file", func(p string) error { return os.Symlink(filepath.Join(outside, "secret.json"), p+".json") }},
		{"relative link to a module", func(p string) error {
			rel, _ := filepath.Rel(dir, outside)
			return os.Symlink(filepath.Join(rel, "x.rego"), p+".rego")
		}},
		{"link to a folder outside", func(p string) error { return os.Symlink(outside, p) }},
		{"link to its own folder", func(p string) error { return os.Symlink(".", p) }},
		{"a named pipe", func(p string) error { return syscall.Mkfifo(p+".json", 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "planted")
			if err := tc.plant(p); err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, ext := range []string{"", ".json", ".rego"} {
					os.Remove(p + ext)
				}
			}()
			done := make(chan error, 1)
			go func() {
				_, err := New(ctx, Options{Dir: dir, Logger: quiet})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "planted") {
					t.Errorf("New: %v, want a refusal naming the planted file", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("New blocked on the planted file")
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			reloaded := make(chan bool, 1)
			go func() { reloaded <- e.Reload(rctx) }()
			select {
			case swapped := <-reloaded:
				if st := e.Status(); swapped || !strings.Contains(st.LastError, "planted") || reason(t, e) != "v2" {
					t.Errorf("reload: swapped=%v, status %+v", swapped, st)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Reload blocked on the planted file")
			}
		})
	}
}
