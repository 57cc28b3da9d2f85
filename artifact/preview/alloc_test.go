package preview

import (
	"fmt"
	"strings"
	"testing"
)

// TestLogLinesAllocateNothing: a line like those before it costs no
// allocation, so previewing a 100 MB log does not allocate its size again
// (the offloader's budget for a 50 MB item once saw 75 MB allocated: five
// strings a line).
func TestLogLinesAllocateNothing(t *testing.T) {
	log := []byte(strings.Repeat("2026-11-26T10:00:00Z INFO request 1234 served path=/x status=200\n", 100000))
	allocs := testing.AllocsPerRun(3, func() {
		b := New(Options{MimeType: "text/plain"})
		b.Write(log)
		b.Preview()
	})
	if allocs > 2000 {
		t.Errorf("previewing 100,000 log lines made %.0f allocations, want a bounded few", allocs)
	}
}

// TestJSONRowsAllocateNothing: a row like those before it costs no
// allocation, whatever its values (a "name" member names the row, which
// could be a tree node; its text is a sample).
func TestJSONRowsAllocateNothing(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 100000 {
		if i > 0 {
			sb.WriteString(",\n")
		}
		fmt.Fprintf(&sb, `{"id":%d,"name":"row-%d","score":-12.%d,"ok":true,"tags":["a","b"],"note":null,"ts":"2026-11-26T10:00:00Z","addr":{"city":"c%d"}}`, i, i, i%10, i%7)
	}
	sb.WriteString("]")
	doc := []byte(sb.String())
	allocs := testing.AllocsPerRun(3, func() {
		b := New(Options{})
		b.Write(doc)
		b.Preview()
	})
	if allocs > 3000 {
		t.Errorf("previewing 100,000 JSON rows made %.0f allocations, want a bounded few", allocs)
	}
}
