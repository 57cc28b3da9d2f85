package child

import (
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	env, err := Env([]string{"PATH=/bin", "AWS_KEY=k", "HOME=/h", "X=1", "LC_CTYPE=C"}, []string{"X", "HOME=/other", "Y=2", "MISSING"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(env, " "), "PATH=/bin HOME=/other LC_CTYPE=C X=1 Y=2"; got != want {
		t.Fatalf("Env = %s; want %s", got, want)
	}
	for _, bad := range []string{"", "=v", " X", "A\x00=1"} {
		if _, err := Env(nil, []string{bad}); err == nil {
			t.Errorf("Env accepted %q", bad)
		}
	}
}
