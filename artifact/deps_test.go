package artifact_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The artifact domain and its stores build policy inputs and read
// decisions through policy/decision only: none of them may pull in the
// OPA engine (about 80 packages), which only the policy package and the
// command wire in.
func TestNoPolicyEngine(t *testing.T) {
	pkgs := []string{"./", "./api", "./fsstore", "./identity", "./s3store", "./token"}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "open-policy-agent") || p == "github.com/spillway-dev/spillway/policy" {
			t.Errorf("an artifact package depends on %s", p)
		}
	}
}
