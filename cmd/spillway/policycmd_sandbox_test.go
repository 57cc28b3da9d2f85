//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// Finding 2, through the CLI and the running server: `spillway policy
// test|check|eval` and `serve --policy` (and --policy-dry-run, and a hot
// reload) never let a policy or its tests out: no connection to the
// listener, no read of a local file, and a clear refusal.
func TestPolicySandboxCLIAndServe(t *testing.T) {
	input := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(input, []byte(`{"request":{"method":"GET"},"token":{"method":"GET"},"artifact":{}}`), 0o644)
	for i, p := range policytest.New(t).Policies(t) {
		t.Run(p.Name, func(t *testing.T) {
			trap := policytest.New(t)
			p := trap.Policies(t)[i]
			for _, args := range [][]string{{"test", p.Dir}, {"check", p.Dir}, {"eval", p.Dir, "--point", "fetch", "--input", input}} {
				var out, errb bytes.Buffer
				code := policyMain(context.Background(), args, &out, &errb)
				if p.MustRefuse && (code == 0 || !strings.Contains(errb.String(), "not available to Spillway policies")) {
					t.Errorf("spillway policy %s: exit %d\n%s%s", args[0], code, out.String(), errb.String())
				}
				trap.Check(t, "spillway policy "+args[0])
			}

			for _, flag := range []string{"--policy", "--policy-dry-run"} {
				ctx, cancel := context.WithCancel(context.Background())
				data := t.TempDir()
				base, done, log := serveRun(t, ctx, data, flag, p.Dir)
				exited, code := waitUp(t, base, done)
				switch {
				case p.MustRefuse && (!exited || code == 0 || !strings.Contains(log.String(), "not available to Spillway policies")):
					t.Errorf("serve %s: exited=%v code=%d\n%s", flag, exited, code, log.String())
				case !exited:
					// The policy compiles: every decision is evaluated.
					f := filepath.Join(t.TempDir(), "a.txt")
					os.WriteFile(f, []byte("hello"), 0o600)
					l := putFile(t, base, data, f, flag, p.Dir)
					fetch(t, l.HTTPURL)
				}
				trap.Check(t, "serve "+flag)
				cancel()
				if !exited {
					<-done
				}
			}
		})
	}
}

// The finding as reported: a hot reload of a folder whose Rego test calls
// http.send (or reads a file through a schema) while `serve` runs.
func TestPolicySandboxServeReload(t *testing.T) {
	trap := policytest.New(t)
	for _, p := range trap.Policies(t) {
		if !strings.HasPrefix(p.Name, "http.send") && !strings.HasPrefix(p.Name, "json.verify_schema file") {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package spillway\n\nfetch := {\"allow\": true}\n\noffload := {\"offload\": false}\n\nmint := {\"allow\": true}\n"), 0o644)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			base, done, log := serveRun(t, ctx, t.TempDir(), "--policy", dir)
			if exited, code := waitUp(t, base, done); exited {
				t.Fatalf("serve exited %d\n%s", code, log.String())
			}
			for n, body := range p.Files {
				os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644)
			}
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "policy refused"); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the reload was not refused within 10 s\n%s", log.String())
				}
			}
			if !strings.Contains(log.String(), "not available to Spillway policies") {
				t.Errorf("refused without the reason:\n%s", log.String())
			}
			trap.Check(t, "hot reload")
			cancel()
			<-done
		})
	}
}
