package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// Finding 7: a bundle key that cannot be enforced refuses to start instead
// of being ignored.
func TestServeRefusesUnenforceableBundleKey(t *testing.T) {
	key := filepath.Join(t.TempDir(), "pub.pem")
	os.WriteFile(key, []byte("bundle-secret-0123456789"), 0o600)
	src := "package spillway\n\nfetch := {\"allow\": true}\n\noffload := {\"offload\": false}\n\nmint := {\"allow\": true}\n"
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: "r1"}, Data: map[string]any{},
		Modules: []bundle.ModuleFile{{URL: "/p.rego", Path: "/p.rego", Raw: []byte(src), Parsed: ast.MustParseModule(src)}}}
	if err := b.GenerateSignature(bundle.NewSigningConfig("bundle-secret-0123456789", "HS256", ""), "default", false); err != nil {
		t.Fatal(err)
	}
	// A bundle file whose name does not end in .tar.gz is still a bundle.
	bf := filepath.Join(t.TempDir(), "policy.bundle")
	f, _ := os.Create(bf)
	if err := bundle.NewWriter(f).Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()

	serveMustRefuse(t, "not a bundle", "--policy", "../../examples/policies/hardened", "--policy-bundle-key", key)
	serveMustRefuse(t, "not a bundle", "--policy-bundle-key", key)
	serveMustRefuse(t, "no such file", "--policy", bf, "--policy-bundle-key", filepath.Join(t.TempDir(), "missing.pem"), "--policy-bundle-alg", "HS256")
	other := filepath.Join(t.TempDir(), "other.pem")
	os.WriteFile(other, []byte("another-secret-000000000"), 0o600)
	serveMustRefuse(t, "verify", "--policy", bf, "--policy-bundle-key", other, "--policy-bundle-alg", "HS256")
	// The same bundle and the right key serve.
	ctx, cancel := context.WithCancel(context.Background())
	base, done, log := serveRun(t, ctx, t.TempDir(), "--policy", bf, "--policy-bundle-key", key, "--policy-bundle-alg", "HS256")
	if exited, code := waitUp(t, base, done); exited {
		t.Fatalf("a signed bundle with its key: exit %d\n%s", code, log.String())
	}
	cancel()
	<-done
}
