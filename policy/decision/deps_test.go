package decision

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps decision a leaf: it may import the standard library
// only (no OPA, nothing else), so a package that builds inputs and reads
// decisions never pulls in the engine. As Tailscale's depaware check,
// it reads what the go command resolves, not the import lines.
func TestDeps(t *testing.T) {
	const pkg = "github.com/spillway-dev/spillway/policy/decision"
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != pkg {
		t.Fatalf("go list -deps did not list %s itself: %q", pkg, deps)
	}
	for _, p := range deps[:len(deps)-1] {
		t.Errorf("%s depends on %s: it must import the standard library only", pkg, p)
	}
}
