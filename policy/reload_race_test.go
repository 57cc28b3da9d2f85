package policy

import (
	"context"
	"testing"
)

// policyV returns a policy whose fetch decision names its version.
func policyV(v string) string {
	return "package spillway\nfetch := {\"allow\": true, \"reason\": \"" + v + "\"}\noffload := {\"offload\": false}\nmint := {\"allow\": true}\n"
}

func reason(t *testing.T, e *Engine) string {
	t.Helper()
	d, err := e.Fetch(context.Background(), fetchIn("GET", ""))
	if err != nil {
		t.Fatal(err)
	}
	return d.Reason
}

// TestReloadWriteDuringLoad: a change written while the previous one is
// being loaded (after its files were read, before they are compiled) is
// applied by the next poll, not lost.
func TestReloadWriteDuringLoad(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		name := map[bool]string{false: "enforced", true: "candidate"}[dryRun]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writePolicy(t, dir, policyV("v1"))
			o := Options{Dir: dir}
			if dryRun {
				o = Options{Candidate: dir}
			}
			e, err := New(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			writes := 0
			e.o.afterRead = func() {
				if writes == 0 {
					writePolicy(t, dir, policyV("v3"))
				}
				writes++
			}
			writePolicy(t, dir, policyV("v2"))
			e.Reload(ctx) // loads v2; v3 is written while it loads
			e.Reload(ctx) // must see v3
			got := reason(t, e)
			if dryRun {
				got = e.dry.Load().revision
				want, _ := loadPath(dir)
				if got != want.revision {
					t.Errorf("candidate revision %s, the folder's (v3) is %s", got, want.revision)
				}
				return
			}
			if got != "v3" {
				t.Errorf("after a write during load and another poll, the policy in force is %q, want v3 (status %+v)", got, e.Status())
			}
		})
	}
}
