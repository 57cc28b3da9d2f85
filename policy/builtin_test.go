package policy

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestBuiltinFetchMatchesRego decides every combination of the fields the
// built-in fetch rule reads (via, request method, token absent or with each
// method and tenant, artifact tenant) twice: with the built-in engine,
// which decides in Go, and with the same Rego files loaded as a folder,
// which OPA evaluates. The decisions must be equal.
func TestBuiltinFetchMatchesRego(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	builtin, err := New(ctx, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if !builtin.cur.Load().builtin {
		t.Fatal("the built-in policy is not marked built-in")
	}
	dir := t.TempDir()
	err = fs.WalkDir(defaultFS, "default", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := defaultFS.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	rego, err := New(ctx, Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if rego.cur.Load().builtin {
		t.Fatal("a folder is marked built-in")
	}
	tenants := []string{"", "t1", "t2"}
	methods := []string{"GET", "HEAD", "POST", ""}
	n, allowed := 0, 0
	for _, via := range []string{"link", "redirect", "resources/read", "resources/stream"} {
		for _, reqMethod := range methods {
			for _, artTenant := range tenants {
				tokens := []*TokenClaims{nil}
				for _, m := range methods {
					for _, tt := range tenants {
						tokens = append(tokens, &TokenClaims{ID: "tok", KeyID: "k", Method: m, Tenant: tt, NotBefore: 1, Expires: 2})
					}
				}
				for _, tok := range tokens {
					in := FetchInput{
						Via:      via,
						Request:  Request{Method: reqMethod, Path: []string{"a", "x"}, Headers: map[string][]string{"accept": {"*/*"}}, SourceAddress: "127.0.0.1"},
						Token:    tok,
						Artifact: ArtifactInfo{ID: "x", MimeType: "text/plain", Size: 3, Tenant: artTenant},
						Now:      1,
					}
					got, err := builtin.Fetch(ctx, in)
					if err != nil {
						t.Fatal(err)
					}
					want, err := rego.Fetch(ctx, in)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("via %s, request %q, token %+v, artifact tenant %q: Go decides %+v, Rego %+v", via, reqMethod, tok, artTenant, got, want)
					}
					n++
					if got.Allow {
						allowed++
					}
				}
			}
		}
	}
	// Both outcomes must have been reached, or the comparison proved little.
	if allowed == 0 || allowed == n {
		t.Fatalf("%d of %d inputs allowed", allowed, n)
	}
	t.Logf("%d inputs, %d allowed", n, allowed)
}

// TestBuiltinFetchAllocs: the built-in policy's fetch decision, on every
// small cached fetch, allocates next to nothing. Through OPA it was
// about 200 allocations (and 10 KB) per decision, a third of the
// request's CPU.
func TestBuiltinFetchAllocs(t *testing.T) {
	e, err := New(context.Background(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	in := FetchInput{
		Via:      "link",
		Request:  Request{Method: "GET", Path: []string{"a", "x"}, Headers: map[string][]string{"accept": {"*/*"}}, SourceAddress: "127.0.0.1"},
		Token:    &TokenClaims{ID: "tok", KeyID: "k", Method: "GET", Tenant: "t1", NotBefore: 1, Expires: 2},
		Artifact: ArtifactInfo{ID: "x", MimeType: "text/plain", Size: 3, Tenant: "t1"},
		Now:      1,
	}
	allocs := testing.AllocsPerRun(100, func() {
		if d, err := e.Fetch(context.Background(), in); err != nil || !d.Allow {
			t.Fatalf("%+v, %v", d, err)
		}
	})
	if allocs > 2 {
		t.Fatalf("%.0f allocations per built-in fetch decision, want at most 2", allocs)
	}
}

// TestBuiltinFetchLoggedThroughRego: with a decision log, the built-in
// policy's fetch decisions still go through OPA and are logged.
func TestBuiltinFetchLoggedThroughRego(t *testing.T) {
	var buf bytes.Buffer
	e, err := New(context.Background(), Options{Logger: slog.New(slog.DiscardHandler), DecisionLog: &buf})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Fetch(context.Background(), FetchInput{Via: "link", Request: Request{Method: "GET"}, Token: &TokenClaims{Method: "GET"}})
	if err != nil || !d.Allow {
		t.Fatalf("%+v, %v", d, err)
	}
	e.Close() // flushes the decision log
	if !strings.Contains(buf.String(), `"point":"fetch"`) {
		t.Fatalf("no fetch decision logged: %q", buf.String())
	}
}
