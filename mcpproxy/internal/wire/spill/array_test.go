package spill

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fastMCP is a tools/call response in FastMCP's shape: one text item per
// row in content, the rows again in structuredContent.result, no long
// string anywhere; one row's note is long enough to spill on its own.
func fastMCP(rows int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"result":{"content":[`)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		text, _ := json.Marshal(fmt.Sprintf(`{"id":%d,"name":"customer %d"}`, i, i))
		fmt.Fprintf(&b, `{"type":"text","text":%s}`, text)
	}
	b.WriteString(`],"structuredContent":{"result":[`)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		note := "n"
		if i == 3 {
			note = strings.Repeat("long note ", 10000)
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"customer %d","note":%q}`, i, i, note)
	}
	b.WriteString(`]}},"jsonrpc":"2.0","id":7}`)
	return b.Bytes()
}

// A message of many small values moves its big arrays to disk: what stays
// in memory is the envelope and two markers, each array resolves with its
// element count and first elements, and expanding gives the message back
// byte for byte. Before arrays spilled, the whole message stayed inline
// (and past --max-message it was refused).
func TestArraysMoveOutWhole(t *testing.T) {
	s := newSpooler(t, Options{ArrayThreshold: 256 << 10})
	in := fastMCP(100000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := s.Read(bytes.NewReader(in), 8<<20)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > uint64(len(in))/4 {
		t.Errorf("reading %d bytes allocated %d", len(in), n)
	}
	if len(out) > 300 {
		t.Fatalf("%d bytes stay inline: %.300s", len(out), out)
	}
	spans := markers(out)
	if len(spans) != 2 {
		t.Fatalf("want two markers (content, structuredContent.result): %s", out)
	}
	for _, sp := range spans {
		x, ok := Lookup(out[sp[0]:sp[1]])
		if !ok || x.Kind() != "array" || x.Count() != 100000 {
			t.Fatalf("%s: %v %+v", out[sp[0]:sp[1]], ok, x)
		}
		var first []map[string]any
		if err := json.Unmarshal(x.First(), &first); err != nil || len(first) == 0 || len(x.First()) > FirstMax {
			t.Fatalf("First: %v, %d bytes", err, len(x.First()))
		}
	}
	// The long note sits in row 3, within the second array's first
	// elements: First stops before it (it spilled on its own first, then
	// went back into the array on disk).
	x, _ := Lookup(out[spans[1][0]:spans[1][1]])
	if got := bytes.Count(x.First(), []byte(`"id"`)); got != 3 {
		t.Errorf("First of structuredContent.result holds %d rows, want the 3 before the long note", got)
	}
	var b bytes.Buffer
	if err := Expand(&b, out); err != nil || !bytes.Equal(b.Bytes(), in) {
		t.Fatalf("Expand: %v, %d bytes, want the %d read", err, b.Len(), len(in))
	}
	if ExpandedLen(out) != int64(len(in)) {
		t.Errorf("ExpandedLen %d, want %d", ExpandedLen(out), len(in))
	}
	s.Release(out)
	if n := s.Alive(); n != 0 {
		t.Errorf("%d bytes still spilled after Release", n)
	}
}
