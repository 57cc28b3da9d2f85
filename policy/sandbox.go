package policy

// The sandbox: a policy, its Rego tests and its annotations reach nothing
// outside the process. Every path that compiles Rego (load, reload,
// dry-run, the Rego tests that gate them, `spillway policy test|check|eval`)
// goes through vet and Capabilities.

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"
)

// removedBuiltins are the OPA built-ins a Spillway policy cannot call, and
// why. Every other built-in of OPA v1.22.2 computes on its arguments only
// (checked when OPA is upgraded: TestCapabilitiesPinned lists them all).
var removedBuiltins = map[string]string{
	"http.send":          "it reaches the network",
	"net.lookup_ip_addr": "it reaches the network (DNS)",
	// The set it returns has as many members as the prefix has addresses
	// (2^24 for a /8, 2^64 for an IPv6 /64), and a prefix can come from
	// input: one request could make the process allocate without bound.
	"net.cidr_expand":  "its result grows with the prefix (a /8 is 16 million addresses); ask net.cidr_contains instead",
	"net.cidr_overlap": "it is deprecated; use net.cidr_contains",
	"opa.runtime":      "it reads the process environment and configuration",
	// gojsonschema follows $ref: http(s) refs are fetched (allow_net
	// governs them) and file:// refs are read whatever allow_net says.
	// Schemas can come from input, so no vetting at load time can help.
	"json.verify_schema": "it follows $ref to the network and to local files",
	"json.match_schema":  "it follows $ref to the network and to local files",
}

// pureNet are the net.* built-ins that compute on their arguments only,
// with a result no larger than them: policy authors need them to reason
// about source addresses and link bindings. Any other net.* built-in is
// off, including ones a future OPA adds, until reviewed.
var pureNet = map[string]bool{
	"net.cidr_contains":         true,
	"net.cidr_contains_matches": true,
	"net.cidr_intersects":       true,
	"net.cidr_is_valid":         true,
	"net.cidr_merge":            true,
}

// removedReason says why name is not available, "" when it is.
func removedReason(name string) string {
	if r, ok := removedBuiltins[name]; ok {
		return r
	}
	if strings.HasPrefix(name, "net.") && !pureNet[name] {
		return "of the net.* built-ins only the pure CIDR ones are available (" + strings.Join(slices.Sorted(maps.Keys(pureNet)), ", ") + ")"
	}
	return ""
}

// Capabilities are OPA's, minus every built-in that can reach the network,
// read files or read the environment, and with allow_net empty (not unset:
// unset means any host). Tests, checks and decisions all compile with
// them. Each call returns a fresh value the caller may change.
func Capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	kept := c.Builtins[:0]
	for _, b := range c.Builtins {
		if removedReason(b.Name) == "" {
			kept = append(kept, b)
		}
	}
	c.Builtins = kept
	c.AllowNet = []string{}
	return c
}

// vet refuses modules that call a removed built-in (with the reason, which
// the compiler's "undefined function" would not give) or carry a schema
// annotation that could make the compiler dereference a $ref.
func vet(modules map[string]*ast.Module) error {
	var errs []string
	names := make([]string, 0, len(modules))
	for n := range modules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := modules[n]
		ast.WalkRefs(m, func(r ast.Ref) bool {
			if why := removedReason(r.String()); why != "" {
				errs = append(errs, fmt.Sprintf("%s: %s is not available to Spillway policies: %s", where(n, r[0].Location), r, why))
			}
			return false
		})
		for _, a := range m.Annotations {
			for _, s := range a.Schemas {
				if s.Definition == nil {
					continue
				}
				if bad := externalRef(*s.Definition); bad != "" {
					errs = append(errs, fmt.Sprintf("%s: schema annotation for %s: %s (only local \"#...\" references are allowed)", where(n, a.Location), s.Path, bad))
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sandbox: %s", strings.Join(errs, "; "))
	}
	return nil
}

// where names a place in a module for an error message.
func where(module string, l *ast.Location) string {
	if l == nil {
		return module
	}
	if l.File != "" {
		module = l.File
	}
	return fmt.Sprintf("%s:%d", module, l.Row)
}

// externalRef finds, in a JSON schema, a $ref that leaves the document or
// an id that would rebase one; "" when there is none.
func externalRef(v any) string {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			s, isString := e.(string)
			switch {
			case k == "$ref" && isString && !strings.HasPrefix(s, "#"):
				return fmt.Sprintf("$ref %q", s)
			case (k == "$id" || k == "id") && isString:
				return fmt.Sprintf("%s %q", k, s)
			}
			if bad := externalRef(e); bad != "" {
				return bad
			}
		}
	case []any:
		for _, e := range x {
			if bad := externalRef(e); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// newTestRunner runs Rego tests with the sandbox's capabilities (the
// tester's default is every built-in OPA has).
func newTestRunner(store storage.Store) *tester.Runner {
	c := ast.NewCompiler().WithCapabilities(Capabilities()).WithEnablePrintStatements(true)
	return tester.NewRunner().SetCompiler(c).SetStore(store)
}
