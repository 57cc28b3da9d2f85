package policy

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

var quiet = slog.New(slog.DiscardHandler)

// writeBundle writes files (name → Rego) as a bundle with the given
// manifest revision, signed when sc is set, and returns its path.
func writeBundle(t *testing.T, files map[string]string, revision string, sc *bundle.SigningConfig) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	writeBundleAt(t, p, files, revision, sc)
	return p
}

// writeBundleAt writes the bundle to p, replacing it atomically (as a
// publisher should) and keeping p's modification time if it exists.
func writeBundleAt(t *testing.T, p string, files map[string]string, revision string, sc *bundle.SigningConfig) {
	t.Helper()
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: revision}, Data: map[string]any{}}
	for n, src := range files {
		m, err := ast.ParseModuleWithOpts(n, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatal(err)
		}
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: "/" + n, Path: "/" + n, Raw: []byte(src), Parsed: m})
	}
	if sc != nil {
		if err := b.GenerateSignature(sc, "k", false); err != nil {
			t.Fatal(err)
		}
	}
	old, statErr := os.Stat(p)
	f, err := os.CreateTemp(filepath.Dir(p), "bundle")
	if err != nil {
		t.Fatal(err)
	}
	if err := bundle.NewWriter(f).Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if statErr == nil {
		os.Chtimes(f.Name(), old.ModTime(), old.ModTime())
	}
	if err := os.Rename(f.Name(), p); err != nil {
		t.Fatal(err)
	}
}

func policyFiles(reason string) map[string]string {
	return map[string]string{"p.rego": strings.Replace(denyAll, `"v2"`, `"`+reason+`"`, 1)}
}

func reasonOf(t *testing.T, e *Engine) string {
	t.Helper()
	d, err := e.Fetch(ctx, fetchIn("GET", ""))
	if err != nil {
		t.Fatal(err)
	}
	return d.Reason
}

// A key that cannot be enforced refuses to start: on a folder, on the
// built-in policy, missing or empty.
func TestBundleKeyFailsClosed(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte("bundle-secret-0123456789"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	dir := t.TempDir()
	writePolicy(t, dir, allowAll)
	b := writeBundle(t, policyFiles("v1"), "r1", bundle.NewSigningConfig("bundle-secret-0123456789", "HS256", ""))
	for _, tc := range []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"folder", Options{Dir: dir, BundleKey: key}, "not a bundle"},
		{"built-in", Options{BundleKey: key}, "not a bundle"},
		{"missing key", Options{Bundle: b, BundleKey: filepath.Join(t.TempDir(), "nope"), BundleKeyID: "k", BundleAlg: "HS256"}, "no such file"},
		{"empty key", Options{Bundle: b, BundleKey: empty, BundleKeyID: "k", BundleAlg: "HS256"}, "empty"},
	} {
		tc.o.Logger = quiet
		if _, err := New(ctx, tc.o); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	if _, err := New(ctx, Options{Bundle: b, BundleKey: key, BundleKeyID: "k", BundleAlg: "HS256", Logger: quiet}); err != nil {
		t.Errorf("a good key: %v", err)
	}
}

// A bundle re-published with new content is loaded whatever its revision
// says, even when its size and modification time did not change.
func TestBundleContentChangeReloads(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	writeBundleAt(t, p, policyFiles("v1"), "r1", nil)
	e, err := New(ctx, Options{Bundle: p, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(p)
	writeBundleAt(t, p, policyFiles("v2"), "r1", nil)
	after, _ := os.Stat(p)
	t.Logf("size %d → %d, mtime kept: %v", before.Size(), after.Size(), before.ModTime().Equal(after.ModTime()))
	if !e.Reload(ctx) || reasonOf(t, e) != "v2" || e.Revision() != "r1" {
		t.Fatalf("the new content is not in force: %q, %+v", reasonOf(t, e), e.Status())
	}
	if e.Reload(ctx) {
		t.Error("an unchanged bundle reloaded")
	}
}

// With a bundle key, a signed bundle older than the active one is refused:
// a replay of an earlier one, a revision that was active before, or a
// lower decimal revision. Without a key, a rollback is the operator's.
func TestSignedBundleRollbackRefused(t *testing.T) {
	sc := bundle.NewSigningConfig("bundle-secret-0123456789", "HS256", "")
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte("bundle-secret-0123456789"), 0o600)
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	writeBundleAt(t, p, policyFiles("a"), "r1", sc)
	e, err := New(ctx, Options{Bundle: p, BundleKey: key, BundleKeyID: "k", BundleAlg: "HS256", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		reason, revision string
		wantSwap         bool
		wantErr          string
	}{
		{"b", "r2", true, ""},
		{"a", "r1", false, "replay"},        // the r1 bundle again
		{"c", "r1", false, "active before"}, // r1 re-signed with other content
		{"d", "r2", true, ""},               // same revision, new content
		{"b", "r2", false, "replay"},        // r2's first content again
		{"e", "10", true, ""},
		{"f", "9", false, "older than the active 10"},
		{"g", "11", true, ""},
	}
	for i, s := range steps {
		writeBundleAt(t, p, policyFiles(s.reason), s.revision, sc)
		swapped := e.Reload(ctx)
		st := e.Status()
		if swapped != s.wantSwap || s.wantErr != "" && !strings.Contains(st.LastError, s.wantErr) || s.wantErr == "" && st.LastError != "" {
			t.Fatalf("step %d (%s, content %s): swapped=%v, status %+v", i, s.revision, s.reason, swapped, st)
		}
	}
	if reasonOf(t, e) != "g" || e.Revision() != "11" {
		t.Errorf("in force: %q %q", reasonOf(t, e), e.Revision())
	}

	// Unsigned, the same sequence is the operator's business.
	u := filepath.Join(t.TempDir(), "b.tar.gz")
	writeBundleAt(t, u, policyFiles("a"), "r1", nil)
	e, err = New(ctx, Options{Bundle: u, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	writeBundleAt(t, u, policyFiles("b"), "r2", nil)
	e.Reload(ctx)
	writeBundleAt(t, u, policyFiles("a"), "r1", nil)
	if !e.Reload(ctx) || reasonOf(t, e) != "a" {
		t.Errorf("an unsigned rollback was refused: %+v", e.Status())
	}
}
