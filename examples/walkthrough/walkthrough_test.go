package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// The walkthrough's smoke run, with binaries built fresh for the test:
// the agent gets a few KB with a link, and the sandbox script profiles
// the full result it fetched.
func TestWalkthrough(t *testing.T) {
	root, _ := filepath.Abs("../..")
	var out bytes.Buffer
	if err := run(root, t.TempDir(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"[resource_link]", `"httpUrl"`, `"httpUrlExpiresAt"`, "JSON array of 25000 objects", "25000"} {
		if !strings.Contains(s, want) {
			t.Errorf("walkthrough output lacks %q:\n%s", want, s)
		}
	}
}
