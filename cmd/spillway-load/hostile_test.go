package main

import (
	"os"
	"strings"
	"testing"
)

// TestHeldOpen runs the held-open run small on both of Spillway's faces:
// four hostile results at once (two images whose decoding would hold
// 318 MiB, two structuredContents under a 2^20-path outputSchema) must
// all be answered, the images with a link and no thumbnail, the schemas
// as tool errors with a link, and the process must stay within 256 MB of
// its idle size. Before the bounds of issue 38 the schemas were never
// answered and two such images took Spillway past 600 MB.
func TestHeldOpen(t *testing.T) {
	buildBins(t)
	*hostileN, *hostileRounds, *hostileKinds = 4, 1, "both"
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up := []string{self, "-upstream-stdio"}
	stdio, err := newStdioFace(up)
	if err != nil {
		t.Fatal(err)
	}
	defer stdio.close()
	a := startSpillway("--upstream-cmd", strings.Join(up, " "))
	defer stopChild(a)
	for _, r := range []hostileResult{
		heldOpen("stdio", stdio),
		heldOpen("http", newHTTPFace("http://"+a+"/mcp", pid(a))),
	} {
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
			continue
		}
		if r.answered != 4 || r.isError != 2 || r.linked != 4 || r.thumbnails != 0 {
			t.Errorf("%s: %d answered, %d tool errors, %d links, %d thumbnails; want 4, 2, 4, 0", r.name, r.answered, r.isError, r.linked, r.thumbnails)
		}
		if grew := r.peak - r.idle; grew > 256<<20 {
			t.Errorf("%s: peak RSS %d MiB above idle, more than 256", r.name, grew>>20)
		}
	}
}
