package arttools

import (
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

// RunLong keeps a jq answer past MaxAnswer whole, in a file no one else
// can open (unlinked in TempDir), up to MaxJQAnswer; Run still cuts it,
// and a short answer is text either way.
func TestJQRunLong(t *testing.T) {
	dir := t.TempDir()
	r := New(Limits{MaxAnswer: 1000, MaxJQAnswer: 5000, TempDir: dir})
	c, err := Parse(JQ, []byte(`{`+testURI+`,"program":"range(2000)","maxOutputs":2000}`))
	if err != nil {
		t.Fatal(err)
	}
	text, long, err := r.RunLong(ctx, c, source([]byte(`null`)))
	if err != nil || text != "" || long == nil {
		t.Fatalf("%q %v %v", text, long, err)
	}
	defer long.Close()
	var want strings.Builder
	n := 0
	for ; want.Len()+len(strconv.Itoa(n))+1 <= 5000; n++ {
		want.WriteString(strconv.Itoa(n) + "\n")
	}
	body, _ := io.ReadAll(long.Body())
	if string(body) != want.String() || long.Size() != int64(want.Len()) ||
		!strings.HasSuffix(long.Head, ": "+strconv.Itoa(n)+" output(s) (stopped at 5000 bytes of output, the most an answer holds; more follow)") {
		t.Errorf("%d bytes, head %q", len(body), long.Head)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the answer's file is still linked: %v", left)
	}
	if cut, _ := r.Run(ctx, c, source([]byte(`null`))); !strings.HasSuffix(cut, "[answer cut at 1000 bytes: ask for a smaller window or fewer results]") {
		t.Errorf("Run: %q", cut[max(0, len(cut)-100):])
	}
	c.MaxOutputs = 3
	if text, long, err := r.RunLong(ctx, c, source([]byte(`null`))); long != nil || err != nil || !strings.HasSuffix(text, "\n0\n1\n2\n") {
		t.Errorf("a short answer: %q %v %v", text, long, err)
	}
}
