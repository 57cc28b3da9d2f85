package policy

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

var quiet = slog.New(slog.DiscardHandler)

// writeBundle writes files (name → Rego) as a bundle with the given
// manifest revision, signed when sc is set, and returns its path.
func writeBundle(t *testing.T, files map[string]string, revision string, sc *bundle.SigningConfig) string {
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
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := bundle.NewWriter(f).Write(b); err != nil {
		t.Fatal(err)
	}
	return p
}
