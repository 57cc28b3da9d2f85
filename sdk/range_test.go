package sdk

import (
	"strconv"
	"strings"
	"testing"
)

func TestContentRange(t *testing.T) {
	for _, c := range []struct {
		in          string
		start, size int64
		ok          bool
	}{
		{"bytes 0-9/10", 0, 10, true},
		{"bytes 5-5/6", 5, 6, true},
		{"bytes 5-9/5", 0, 0, false},   // end past the size
		{"bytes 9-5/10", 0, 0, false},  // end before start
		{"bytes +5-9/10", 0, 0, false}, // signs are not digits
		{"bytes 0-9/*", 0, 0, false},
		{"bytes 0-9/-1", 0, 0, false},
		{"bytes */10", 0, 0, false},
		{"items 0-9/10", 0, 0, false},
		{"bytes 0-99999999999999999999/1", 0, 0, false},
	} {
		start, size, ok := contentRange(c.in)
		if ok != c.ok || ok && (start != c.start || size != c.size) {
			t.Errorf("%q: %d, %d, %v; want %d, %d, %v", c.in, start, size, ok, c.start, c.size, c.ok)
		}
	}
}

// A server's Content-Range is untrusted input: whatever it says, a
// value accepted is a well-formed range inside the artifact.
func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 5-9/5", "bytes +1-2/3", "bytes 1--2/3", "bytes 0-0/1 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, size, ok := contentRange(s)
		if !ok {
			return
		}
		if start < 0 || size <= start {
			t.Fatalf("%q accepted as start %d of %d", s, start, size)
		}
		// Accepted means the start is the digits right after "bytes ".
		n, err := strconv.ParseInt(strings.SplitN(s[len("bytes "):], "-", 2)[0], 10, 64)
		if err != nil || n != start {
			t.Fatalf("%q accepted as start %d", s, start)
		}
	})
}
