package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/spillway-dev/spillway/policy/policytest"
)

// sqlCall is a tools/call of upstream db's run_sql by tenant.
func sqlCall(tenant, query string) CallInput {
	return CallInput{Tenant: tenant, Upstream: "db", Kind: "tool", Name: "run_sql", Arguments: map[string]any{"query": query}}
}

// logged decodes the decision log's lines.
func logged(t *testing.T, e *Engine, buf *policytest.Buffer) []map[string]any {
	t.Helper()
	if err := e.Close(); err != nil { // flushes the queue
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("decision log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// The built-in policy allows every call, with or without the decision log
// (which makes OPA evaluate the Rego instead of builtinCall), and logs it.
func TestCallBuiltinAllows(t *testing.T) {
	var buf policytest.Buffer
	for _, o := range []Options{{Logger: quiet}, {Logger: quiet, DecisionLog: &buf}} {
		e, err := New(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []CallInput{
			sqlCall("acme", "DROP TABLE users"),
			{Upstream: "files", Kind: "tool", Name: "write_file", Listing: true},
			{Tenant: "a", Upstream: "t", Kind: "prompt", Name: "triage"},
			{Tenant: "a", Upstream: "files", Kind: "resource", Name: "file:///etc/passwd"},
		} {
			if d, err := e.Call(ctx, in); err != nil || d != (CallDecision{Allow: true}) {
				t.Errorf("decision log %v, %+v: %+v %v", o.DecisionLog != nil, in, d, err)
			}
		}
		if o.DecisionLog == nil {
			continue
		}
		lines := logged(t, e, &buf)
		if len(lines) != 4 {
			t.Fatalf("%d decision log lines, want 4:\n%s", len(lines), buf.String())
		}
		l := lines[0]
		id, _ := l["decision_id"].(string)
		if l["point"] != "call" || len(id) != 32 || l["revision"] != e.Revision() || !reflect.DeepEqual(l["result"], map[string]any{"allow": true}) {
			t.Errorf("decision log line: %v", l)
		}
		want := map[string]any{"tenant": "acme", "upstream": "db", "kind": "tool", "name": "run_sql", "arguments": map[string]any{"query": "DROP TABLE users"}, "listing": false}
		if !reflect.DeepEqual(l["input"], want) {
			t.Errorf("logged input %v, want %v", l["input"], want)
		}
	}
}

// denyWrites denies a write tool to one tenant with a reason, and reads the
// arguments as the object the client sent.
const denyWrites = allowAll + `

default call := {"allow": true}

call := {"allow": false, "reason": sprintf("tenant %s may not call %s", [input.tenant, input.name])} if {
	input.tenant == "analyst"
	input.name == "write_file"
}

call := {"allow": false, "reason": "no DROP"} if {
	is_object(input.arguments)
	regex.match("(?i)\\bdrop\\b", input.arguments.query)
	input.arguments.options.limit == 10
	input.arguments.tags[1] == "b"
}
`

func TestCallDenies(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, denyWrites)
	var buf policytest.Buffer
	e, err := New(ctx, Options{Dir: dir, Logger: quiet, DecisionLog: &buf})
	if err != nil {
		t.Fatal(err)
	}
	write := CallInput{Tenant: "analyst", Upstream: "files", Kind: "tool", Name: "write_file", Arguments: map[string]any{"path": "/a"}}
	if d, err := e.Call(ctx, write); err != nil || d.Allow || d.Reason != "tenant analyst may not call write_file" {
		t.Errorf("analyst's write_file: %+v %v", d, err)
	}
	write.Listing, write.Arguments = true, nil
	if d, err := e.Call(ctx, write); err != nil || d.Allow {
		t.Errorf("analyst's write_file, listed: %+v %v", d, err)
	}
	write.Tenant = "ops"
	if d, err := e.Call(ctx, write); err != nil || !d.Allow {
		t.Errorf("ops' write_file: %+v %v", d, err)
	}
	// The arguments reach the policy as an object, nested values included.
	args := func(q string) map[string]any {
		return map[string]any{"query": q, "options": map[string]any{"limit": 10}, "tags": []any{"a", "b"}}
	}
	in := CallInput{Tenant: "ops", Upstream: "db", Kind: "tool", Name: "query", Arguments: args("select 1; drop table t")}
	if d, err := e.Call(ctx, in); err != nil || d.Allow || d.Reason != "no DROP" {
		t.Errorf("DROP: %+v %v", d, err)
	}
	in.Arguments = args("select drop_date from t")
	if d, err := e.Call(ctx, in); err != nil || !d.Allow {
		t.Errorf("drop_date: %+v %v", d, err)
	}
	lines := logged(t, e, &buf)
	if len(lines) != 5 {
		t.Fatalf("%d decision log lines, want 5", len(lines))
	}
	if r, _ := lines[0]["result"].(map[string]any); r["allow"] != false || r["reason"] != "tenant analyst may not call write_file" {
		t.Errorf("the denial's log line: %v", lines[0])
	}
	if a, _ := lines[3]["input"].(map[string]any)["arguments"].(map[string]any); a["query"] != "select 1; drop table t" {
		t.Errorf("the logged arguments: %v", lines[3]["input"])
	}
}

// A policy written before the call decision existed (no call rule at all)
// allows every call, on the fast path and when evaluated for the decision
// log; a policy that defines call but leaves it undefined for an input is
// held to it: that call is refused with an error.
func TestCallUndefined(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, denyAll)
	var buf policytest.Buffer
	for _, o := range []Options{{Dir: dir, Logger: quiet}, {Dir: dir, Logger: quiet, DecisionLog: &buf}} {
		e, err := New(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if e.cur.Load().definesCall {
			t.Fatal("denyAll is taken to define call")
		}
		if d, err := e.Call(ctx, sqlCall("a", "DROP TABLE t")); err != nil || !d.Allow {
			t.Errorf("no call rule, decision log %v: %+v %v", o.DecisionLog != nil, d, err)
		}
		if d, err := e.Fetch(ctx, fetchIn("GET", "")); err != nil || d.Allow {
			t.Errorf("the policy's own fetch rule is not in force: %+v %v", d, err)
		}
		if o.DecisionLog != nil {
			if l := logged(t, e, &buf); len(l) != 2 || l[0]["point"] != "call" || !reflect.DeepEqual(l[0]["result"], map[string]any{"allow": true}) {
				t.Errorf("decision log: %v", l)
			}
		}
	}

	writePolicy(t, dir, allowAll+`call := {"allow": true} if input.tenant == "ops"`+"\n")
	e, err := New(ctx, Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := e.Call(ctx, sqlCall("ops", "")); err != nil || !d.Allow {
		t.Errorf("ops: %+v %v", d, err)
	}
	d, err := e.Call(ctx, sqlCall("analyst", ""))
	if d.Allow || !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), "undefined") {
		t.Errorf("a call rule undefined for the input: %+v %v, want a denial with an error", d, err)
	}
}

// Which policies define data.spillway.call.
func TestDefinesCall(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"no call rule", map[string]string{"p.rego": allowAll}, false},
		{"a test that reads call", map[string]string{"p.rego": allowAll, "p_test.rego": "package spillway_test\ntest_call if data.spillway.call.allow\n"}, false},
		{"a call rule elsewhere", map[string]string{"p.rego": allowAll, "q.rego": "package other\ncall := {\"allow\": false}\n"}, false},
		{"default call", map[string]string{"p.rego": allowAll + "default call := {\"allow\": true}\n"}, true},
		{"call.allow", map[string]string{"p.rego": allowAll + "call.allow := true\n"}, true},
		{"package spillway.call", map[string]string{"p.rego": allowAll, "q.rego": "package spillway.call\nallow := true\n"}, true},
		{"data document", map[string]string{"p.rego": allowAll, "data.json": `{"spillway": {"call": {"allow": true}}}`}, true},
		{"other data", map[string]string{"p.rego": allowAll, "data.json": `{"spillway": {"x": 1}}`}, false},
	} {
		dir := t.TempDir()
		for name, body := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, err := load(dir, "", Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.definesCall != tc.want {
			t.Errorf("%s: definesCall %v, want %v", tc.name, s.definesCall, tc.want)
		}
	}
}

// A call rule that fails at evaluation, or yields a decision of the wrong
// shape, or arguments that are not JSON: an error with the zero decision,
// which denies, counted as an evaluation error and logged as one.
func TestCallErrorDenies(t *testing.T) {
	for _, tc := range []struct {
		name, rule string
		in         CallInput
		want       string
	}{
		{"a built-in fails", `call := {"allow": to_number(input.name) > 0}`, sqlCall("a", ""), "to_number"},
		{"two values", "call := {\"allow\": true}\ncall := {\"allow\": false} if input.tenant == \"a\"", sqlCall("a", ""), "conflict"},
		{"not an object", `call := true`, sqlCall("a", ""), "wrong shape"},
		{"allow not a boolean", `call := {"allow": "yes"}`, sqlCall("a", ""), "wrong shape"},
		{"arguments not JSON", `default call := {"allow": true}`, CallInput{Name: "x", Arguments: map[string]any{"c": make(chan int)}}, "arguments"},
	} {
		dir := t.TempDir()
		writePolicy(t, dir, allowAll+tc.rule+"\n")
		var buf policytest.Buffer
		e, err := New(ctx, Options{Dir: dir, Logger: quiet, DecisionLog: &buf})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		d, err := e.Call(ctx, tc.in)
		if d != (CallDecision{}) || !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %+v %v, want the zero decision and an error about %q", tc.name, d, err, tc.want)
		}
		if n := e.Status().EvalErrors; n != 1 {
			t.Errorf("%s: %d evaluation errors counted, want 1", tc.name, n)
		}
		if l := logged(t, e, &buf); len(l) != 1 || l[0]["point"] != "call" || l[0]["error"] == nil || l[0]["result"] != nil {
			t.Errorf("%s: decision log %v", tc.name, l)
		}
	}
}

// The built-in policy decided in Go (builtinCall) equals its Rego, loaded
// as a folder, and the call decision of a policy without a call rule.
func TestBuiltinCallMatchesRego(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"spillway.rego", "spillway_test.rego"} {
		b, err := defaultFS.ReadFile("default/" + name)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), b, 0o600)
	}
	rego, err := New(ctx, Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	old := t.TempDir()
	writePolicy(t, old, allowAll)
	var buf policytest.Buffer
	none, err := New(ctx, Options{Dir: old, Logger: quiet, DecisionLog: &buf}) // evaluates allowCall
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	for _, in := range []CallInput{{}, sqlCall("t", "DROP TABLE x"), {Tenant: "t", Upstream: "u", Kind: "resource", Name: "file:///x", Listing: true}} {
		for name, e := range map[string]*Engine{"the built-in Rego": rego, "no call rule": none} {
			want, err := e.Call(ctx, in)
			if got := builtinCall(in); err != nil || got != want {
				t.Errorf("%+v: Go decides %+v, %s %+v %v", in, got, name, want, err)
			}
		}
	}
}

// The gateway example: a read-only tenant and the SQL argument rule, as
// Spillway evaluates them (strict built-in errors, its sandbox).
func TestCallGatewayExample(t *testing.T) {
	e, err := New(ctx, Options{Dir: "../examples/policies/gateway", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tool := func(tenant, upstream, name string, args map[string]any) CallInput {
		return CallInput{Tenant: tenant, Upstream: upstream, Kind: "tool", Name: name, Arguments: args}
	}
	for _, tc := range []struct {
		in     CallInput
		allow  bool
		reason string
	}{
		{tool("analyst", "files", "read_text_file", map[string]any{"path": "/a"}), true, ""},
		{tool("analyst", "files", "write_file", map[string]any{"path": "/a"}), false, "read-only"},
		{CallInput{Tenant: "analyst", Upstream: "files", Kind: "tool", Name: "write_file", Listing: true}, false, "read-only"},
		{tool("ops", "files", "write_file", map[string]any{"path": "/a"}), true, ""},
		{tool("ops", "db", "query", map[string]any{"query": "SELECT 1"}), true, ""},
		{tool("ops", "db", "query", map[string]any{"query": "select 1; Drop Table users"}), false, "DROP is not allowed"},
		{tool("ops", "db", "query", map[string]any{"query": 42}), false, "must be a string"}, // no built-in error
		{CallInput{Tenant: "ops", Upstream: "db", Kind: "tool", Name: "query", Listing: true}, true, ""},
	} {
		d, err := e.Call(ctx, tc.in)
		if err != nil || d.Allow != tc.allow || !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("%+v: %+v %v, want allow %v, reason with %q", tc.in, d, err, tc.allow, tc.reason)
		}
	}
}

// A reload that adds a call rule puts it in force; a dry-run candidate
// with a call rule is compared with an enforced policy without one.
func TestCallReloadAndDryRun(t *testing.T) {
	dir, cand := t.TempDir(), t.TempDir()
	writePolicy(t, dir, allowAll)
	writePolicy(t, cand, denyWrites)
	var buf policytest.Buffer
	e, err := New(ctx, Options{Dir: dir, Candidate: cand, Logger: quiet, DecisionLog: &buf})
	if err != nil {
		t.Fatal(err)
	}
	write := CallInput{Tenant: "analyst", Upstream: "files", Kind: "tool", Name: "write_file"}
	if d, err := e.Call(ctx, write); err != nil || !d.Allow {
		t.Errorf("before the reload: %+v %v", d, err)
	}
	writePolicy(t, dir, denyWrites)
	if !e.Reload(ctx) {
		t.Fatal("the policy with a call rule was not swapped in")
	}
	if d, err := e.Call(ctx, write); err != nil || d.Allow {
		t.Errorf("after the reload: %+v %v", d, err)
	}
	l := logged(t, e, &buf)
	if len(l) != 2 || l[0]["dry_run_disagreement"] == nil || l[1]["dry_run_disagreement"] != nil {
		t.Errorf("dry-run comparisons: %v", l)
	}
}

// The arguments come from a client: whatever JSON object it sends, the
// input is what OPA makes of the JSON tags, and the decision log's
// evaluation of it neither fails nor panics.
func FuzzCallArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"query":"DROP TABLE t"}`, `{"a":[1,2.5,-3e300,null,true],"b":{"c":{"d":"é\u0000"}}}`, `{"n":12345678901234567890}`, `{"":""}`} {
		f.Add(s)
	}
	var buf policytest.Buffer
	e, err := New(ctx, Options{Logger: quiet, DecisionLog: &buf, DecisionLogQueue: 1})
	if err != nil {
		f.Fatal(err)
	}
	defer e.Close()
	f.Fuzz(func(t *testing.T, s string) {
		var args map[string]any
		if json.Unmarshal([]byte(s), &args) != nil {
			return
		}
		in := callInput{Tenant: "t", Upstream: "u", Kind: "tool", Name: "n", Arguments: args}
		got, err := in.value()
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		want, err := ast.InterfaceToValue(in)
		if err != nil {
			t.Fatal(err)
		}
		if got.Compare(want) != 0 {
			t.Errorf("%s:\n got %v\nwant %v", s, got, want)
		}
		if d, err := e.Call(ctx, CallInput(in)); err != nil || !d.Allow {
			t.Errorf("%s: %+v %v", s, d, err)
		}
	})
}

// BenchmarkCallDecision is one call decision with the built-in policy
// (decided in Go), the built-in policy evaluated (as with a decision log),
// and the gateway example, on a SQL call with a few arguments.
func BenchmarkCallDecision(b *testing.B) {
	dir := b.TempDir()
	for _, name := range []string{"spillway.rego"} {
		body, _ := defaultFS.ReadFile("default/" + name)
		os.WriteFile(filepath.Join(dir, name), body, 0o600)
	}
	in := CallInput{Tenant: "ops", Upstream: "db", Kind: "tool", Name: "query",
		Arguments: map[string]any{"query": "SELECT id, total FROM orders WHERE day = $1", "params": []any{"2026-11-22"}, "limit": 100.0}}
	for _, bc := range []struct{ name, dir string }{{"builtin", ""}, {"default-rego", dir}, {"gateway", "../examples/policies/gateway"}} {
		b.Run(bc.name, func(b *testing.B) {
			e, err := New(ctx, Options{Dir: bc.dir, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if d, err := e.Call(ctx, in); err != nil || !d.Allow {
					b.Fatalf("%+v %v", d, err)
				}
			}
		})
	}
}
