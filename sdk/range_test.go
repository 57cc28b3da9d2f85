package sdk

import (
	"strconv"
	"strings"
	"testing"
)

func TestContentRange(t *testing.T) {
	for _, c := range []struct {
		in               string
		start, end, size int64
		ok               bool
	}{
		{"bytes 0-9/10", 0, 9, 10, true},
		{"bytes 5-5/6", 5, 5, 6, true},
		{"bytes 3-7/10", 3, 7, 10, true},
		{"bytes 5-9/5", 0, 0, 0, false},   // end past the size
		{"bytes 9-5/10", 0, 0, 0, false},  // end before start
		{"bytes +5-9/10", 0, 0, 0, false}, // signs are not digits
		{"bytes 5-+9/10", 0, 0, 0, false},
		{"bytes 0-9/*", 0, 0, 0, false},
		{"bytes 0-9/-1", 0, 0, 0, false},
		{"bytes */10", 0, 0, 0, false},
		{"items 0-9/10", 0, 0, 0, false},
		{"bytes 0-99999999999999999999/1", 0, 0, 0, false},
	} {
		start, end, size, ok := contentRange(c.in)
		if ok != c.ok || ok && (start != c.start || end != c.end || size != c.size) {
			t.Errorf("%q: %d-%d/%d, %v; want %d-%d/%d, %v", c.in, start, end, size, ok, c.start, c.end, c.size, c.ok)
		}
	}
}

// A server's Content-Range is untrusted input: whatever it says, a
// value accepted is a well-formed range inside the artifact.
func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 5-9/5", "bytes +1-2/3", "bytes 1--2/3", "bytes 0-0/1 ",
		"bytes 300-599/1000", "bytes 3-2/10", "bytes 0-9/9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, end, size, ok := contentRange(s)
		if !ok {
			return
		}
		if start < 0 || end < start || size <= end {
			t.Fatalf("%q accepted as %d-%d of %d", s, start, end, size)
		}
		// Accepted means the start is the digits right after "bytes ".
		n, err := strconv.ParseInt(strings.SplitN(s[len("bytes "):], "-", 2)[0], 10, 64)
		if err != nil || n != start {
			t.Fatalf("%q accepted as start %d", s, start)
		}
	})
}
