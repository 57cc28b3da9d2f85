package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// policyDirs are every policy folder in the repository.
func policyDirs(t *testing.T) []string {
	dirs := []string{"../../policy/default", "../../deploy/kubernetes/policy"}
	more, err := filepath.Glob("../../examples/policies/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range more {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) < 2 {
		t.Fatalf("found only %v", dirs)
	}
	return dirs
}

// Every policy folder passes its own tests and a strict check, with
// Spillway's CLI.
func TestPolicyFolders(t *testing.T) {
	for _, dir := range policyDirs(t) {
		for _, cmd := range [][]string{{"test", dir, "--coverage"}, {"check", dir}} {
			var out, errb bytes.Buffer
			if code := policyMain(context.Background(), cmd, &out, &errb); code != 0 {
				t.Errorf("spillway policy %s: exit %d\n%s%s", strings.Join(cmd, " "), code, out.String(), errb.String())
			}
		}
	}
}

// The same folders pass the stock OPA CLI unchanged.
func TestPolicyFoldersWithStockOPA(t *testing.T) {
	opa := os.Getenv("SPILLWAY_OPA")
	if opa == "" {
		opa = "../../.tools/bin/opa"
	}
	if _, err := os.Stat(opa); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no opa CLI at %s (make tools): %v", opa, err)
		}
		t.Skipf("no opa CLI at %s (make tools)", opa)
	}
	for _, dir := range policyDirs(t) {
		for _, args := range [][]string{{"test", dir}, {"check", "--strict", dir}} {
			out, err := exec.Command(opa, args...).CombinedOutput()
			if err != nil {
				t.Errorf("opa %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
}

func TestPolicyEvalAndFailures(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(in, []byte(`{"request":{"method":"GET"},"token":{"method":"GET","tenant":"acme"},"artifact":{"tenant":"globex","mime_type":"text/csv"}}`), 0o644)
	var out, errb bytes.Buffer
	if code := policyMain(context.Background(), []string{"eval", "../../examples/policies/hardened", "--point", "fetch", "--input", in}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), `"allow": false`) || !strings.Contains(out.String(), "another tenant") {
		t.Errorf("eval: exit %d\n%s%s", code, out.String(), errb.String())
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "p.rego"), []byte("package spillway\nfetch := {\"allow\": true, \"r\": http.send({\"method\": \"GET\", \"url\": \"http://127.0.0.1:1\"})}\n"), 0o644)
	out.Reset()
	if code := policyMain(context.Background(), []string{"check", bad}, &out, &errb); code == 0 {
		t.Error("policy check accepted http.send")
	}
	os.WriteFile(filepath.Join(bad, "p.rego"), []byte("package spillway\nfetch := {\"allow\": true}\n"), 0o644)
	os.WriteFile(filepath.Join(bad, "p_test.rego"), []byte("package spillway_test\nimport data.spillway\ntest_denies if {\n\tprint(\"fetch is\", spillway.fetch)\n\tnot spillway.fetch.allow\n}\n"), 0o644)
	if code := policyMain(context.Background(), []string{"test", bad}, &out, &errb); code == 0 || !strings.Contains(out.String(), "FAIL") || !strings.Contains(out.String(), `fetch is {"allow": true}`) {
		t.Errorf("a failing Rego test passed: %s", out.String())
	}
}

// `spillway policy eval --point call` decides a call with the gateway
// example: the argument rule refuses a DROP, and a listing is allowed.
func TestPolicyEvalCall(t *testing.T) {
	dir := t.TempDir()
	for name, in := range map[string]string{
		`"allow": false`: `{"tenant":"ops","upstream":"db","kind":"tool","name":"query","arguments":{"query":"drop table users"},"listing":false}`,
		`"allow": true`:  `{"tenant":"ops","upstream":"db","kind":"tool","name":"query","listing":true}`,
	} {
		file := filepath.Join(dir, "in.json")
		os.WriteFile(file, []byte(in), 0o644)
		var out, errb bytes.Buffer
		if code := policyMain(context.Background(), []string{"eval", "../../examples/policies/gateway", "--point", "call", "--input", file}, &out, &errb); code != 0 || !strings.Contains(out.String(), name) {
			t.Errorf("eval %s: exit %d, want %s\n%s%s", in, code, name, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := policyMain(context.Background(), []string{"eval", "../../examples/policies/gateway", "--point", "nope", "--input", filepath.Join(dir, "in.json")}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "mint or call") {
		t.Errorf("an unknown point: exit %d %s", code, errb.String())
	}
}
