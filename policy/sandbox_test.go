//go:build unix

package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// No policy, test or annotation reaches the network or a local file on
// any path that compiles or evaluates Rego: load, reload, dry-run, a
// bundle, `policy test` and `policy check`, and decisions.
func TestSandboxNoExit(t *testing.T) {
	for i, p := range policytest.New(t).Policies(t) {
		t.Run(p.Name, func(t *testing.T) {
			trap := policytest.New(t) // one per case: nothing carries over
			p := trap.Policies(t)[i]
			refused := func(step string, err error) bool {
				t.Helper()
				if p.MustRefuse && err == nil {
					t.Errorf("%s: accepted", step)
				}
				if p.MustRefuse && err != nil && !strings.Contains(err.Error(), "not available to Spillway policies") {
					t.Errorf("%s: %v, want a clear sandbox error", step, err)
				}
				trap.Check(t, step)
				return err != nil
			}
			decide := func(step string, e *Engine) {
				t.Helper()
				e.Fetch(ctx, fetchIn("GET", ""))
				e.Mint(ctx, MintInput{})
				e.Offload(ctx, OffloadInput{Kind: "text", Size: 1 << 20})
				trap.Check(t, step)
			}

			e, err := New(ctx, Options{Dir: p.Dir, Logger: quiet})
			if !refused("load", err) {
				decide("decision", e)
			}

			dir := t.TempDir()
			writePolicy(t, dir, allowAll)
			e, err = New(ctx, Options{Dir: dir, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			for n, body := range p.Files {
				os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644)
			}
			writePolicy(t, dir, p.Files["p.rego"]) // a new mtime
			if swapped := e.Reload(ctx); p.MustRefuse && (swapped || e.Status().LastError == "") || !p.MustRefuse && e.Status().LastError != "" {
				t.Errorf("reload: swapped=%v, status %+v", swapped, e.Status())
			}
			trap.Check(t, "reload")
			decide("decision after reload", e)

			writePolicy(t, dir, allowAll)
			e, err = New(ctx, Options{Dir: dir, Candidate: p.Dir, Logger: quiet})
			if !refused("dry-run candidate", err) {
				decide("dry-run decision", e)
			}

			e, err = New(ctx, Options{Bundle: writeBundle(t, p.Files, "r1", nil), Logger: quiet})
			if !refused("bundle", err) {
				decide("bundle decision", e)
			}

			rep, err := Test(ctx, p.Dir, true)
			if !refused("policy test", err) && len(rep.Failed()) > 0 && p.MustRefuse {
				t.Errorf("policy test: %v", rep.Failed())
			}
			refused("policy check", Check(p.Dir))
		})
	}
}

func TestCapabilities(t *testing.T) {
	c := Capabilities()
	if c.AllowNet == nil || len(c.AllowNet) != 0 {
		t.Errorf("AllowNet = %#v, want empty and not nil (nil allows every host)", c.AllowNet)
	}
	for _, b := range c.Builtins {
		if removedReason(b.Name) != "" {
			t.Errorf("%s is still available", b.Name)
		}
	}
	c.Builtins = nil
	if len(Capabilities().Builtins) == 0 {
		t.Error("Capabilities returns a shared value")
	}
}

// The built-ins a policy can call are pinned: an OPA upgrade that adds one
// fails here until someone has checked that it reaches nothing outside
// the process (then: go test ./policy -run Pinned -update).
func TestCapabilitiesPinned(t *testing.T) {
	var names []string
	for _, b := range Capabilities().Builtins {
		names = append(names, b.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	got := strings.Join(names, "\n") + "\n"
	golden := filepath.Join("testdata", "builtins.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the available built-ins changed; review the new ones for I/O, then -update")
	}
}

// A schema annotation may only reference its own document: the compiler
// would fetch anything else (file:// whatever allow_net says).
func TestVetAnnotations(t *testing.T) {
	for _, tc := range []struct{ schema, wantErr string }{
		{`{"type": "object", "properties": {"id": {"type": "string"}}, "definitions": {"a": {}}, "allOf": [{"$ref": "#/definitions/a"}]}`, ""},
		{`{"$ref": "file:///etc/passwd"}`, `$ref "file:///etc/passwd"`},
		{`{"properties": {"a": {"$ref": "http://127.0.0.1:1/x"}}}`, `$ref "http://127.0.0.1:1/x"`},
		{`{"allOf": [{"$ref": "other.json"}]}`, `$ref "other.json"`},
		{`{"$id": "http://127.0.0.1:1/", "$ref": "#/x"}`, `$id "http://127.0.0.1:1/"`},
	} {
		src := "# METADATA\n# schemas:\n#   - input: " + tc.schema + "\npackage spillway\n\nfetch := {\"allow\": true}\n"
		m, err := ast.ParseModuleWithOpts("p.rego", src, ast.ParserOptions{ProcessAnnotation: true})
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		err = vet(map[string]*ast.Module{"p.rego": m})
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want %q", tc.schema, err, tc.wantErr)
		}
	}
}

// The pure CIDR built-ins are available: a policy using them loads (its
// Rego tests pass in the sandbox) and decides. net.lookup_ip_addr (DNS)
// and net.cidr_expand (a result as large as the prefix, which input can
// choose) are refused by name.
func TestCIDRBuiltins(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, `package spillway

sandbox := "10.88.0.0/16"

fetch := {"allow": true} if {
	net.cidr_is_valid(sandbox)
	net.cidr_contains(sandbox, input.request.source_address)
	net.cidr_intersects(sandbox, "10.88.4.0/24")
	net.cidr_merge(["10.88.0.0/17", "10.88.128.0/17"]) == {"10.88.0.0/16"}
	count(net.cidr_contains_matches([sandbox], [input.request.source_address])) == 1
} else := {"allow": false, "reason": "outside the sandbox network"}

offload := {"offload": false}

mint := {"allow": true}
`)
	os.WriteFile(filepath.Join(dir, "p_test.rego"), []byte(`package spillway_test

import data.spillway

test_inside if spillway.fetch.allow with input as {"request": {"source_address": "10.88.1.2"}}

test_outside if not spillway.fetch.allow with input as {"request": {"source_address": "192.0.2.1"}}
`), 0o644)
	e, err := New(ctx, Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatalf("a policy using the CIDR built-ins: %v", err)
	}
	for addr, want := range map[string]bool{"10.88.1.2": true, "192.0.2.1": false} {
		in := fetchIn("GET", "")
		in.Request.SourceAddress = addr
		if d, err := e.Fetch(ctx, in); err != nil || d.Allow != want {
			t.Errorf("fetch from %s: %+v %v, want allow=%v", addr, d, err, want)
		}
	}
	if err := Check(dir); err != nil {
		t.Errorf("policy check: %v", err)
	}

	for name, expr := range map[string]string{
		"net.lookup_ip_addr": `net.lookup_ip_addr("localhost")`,
		"net.cidr_expand":    `net.cidr_expand("10.0.0.0/8")`,
	} {
		writePolicy(t, dir, "package spillway\nfetch := {\"allow\": true, \"x\": "+expr+"}\noffload := {\"offload\": false}\nmint := {\"allow\": true}\n")
		_, err := New(ctx, Options{Dir: dir, Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), name+" is not available to Spillway policies") {
			t.Errorf("%s: %v, want it refused by name", name, err)
		}
	}
}
