package offload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Desktop Commander's outputs start with a bracket and are not JSON.
func desktopCommander() (readFile, listDirectory string) {
	var b strings.Builder
	b.WriteString("[Reading 50001 lines from start (total: 50001 lines, 0 remaining)]\n\n")
	for i := 1; i <= 50001; i++ {
		fmt.Fprintf(&b, "line %d of the file\n", i)
	}
	readFile = b.String()
	b.Reset()
	for i := range 400 {
		fmt.Fprintf(&b, "[DIR] .bin%d\n[FILE] package-%d.json\n", i, i)
	}
	return readFile, b.String()
}

// A text is labelled JSON only when it is JSON: whole, or its first
// kilobytes tokenized. Before, anything starting with [ or { was
// application/json (.json), Desktop Commander's read_file and
// list_directory outputs included.
func TestSniffJSON(t *testing.T) {
	readFile, listDir := desktopCommander()
	rows := make([]map[string]any, 500)
	for i := range rows {
		rows[i] = map[string]any{"id": i, "name": fmt.Sprintf("row %d", i), "tags": []string{"a", "b"}}
	}
	compact, _ := json.Marshal(rows)
	pretty, _ := json.MarshalIndent(map[string]any{"rows": rows, "total": 500}, "", "  ")
	var ndjson strings.Builder
	for _, r := range rows {
		b, _ := json.Marshal(r)
		ndjson.Write(append(b, '\n'))
	}
	long := `{"blob":"` + strings.Repeat("x", 3*sniffSize) + `"}`
	for _, c := range []struct{ name, text, want string }{
		{"read_file", readFile, "text/plain; charset=utf-8"},
		{"list_directory", listDir, "text/plain; charset=utf-8"},
		{"short read_file", "[Reading 2 lines]\na\nb\n", "text/plain; charset=utf-8"},
		{"array", string(compact), "application/json"},
		{"pretty object", string(pretty), "application/json"},
		{"leading space", "\n  " + string(pretty), "application/json"},
		{"a string past the head", long, "application/json"},
		{"json lines", ndjson.String(), "application/x-ndjson"},
		{"small object", `{"a":1}`, "application/json"},
		{"small, cut", `{"a":1`, "text/plain; charset=utf-8"},
		{"value then text", `{"a":1} and then words`, "text/plain; charset=utf-8"},
		{"two values on a line", `{"a":1} {"a":2}`, "text/plain; charset=utf-8"},
		{"brackets", "[1, 2] and [3]", "text/plain; charset=utf-8"},
		{"csv", "a,b\n1,2\n3,4\n", "text/csv"},
	} {
		if got := sniffText(strings.NewReader(c.text)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Through the offloader: Desktop Commander's outputs are stored as text
// (.txt), real JSON as JSON.
func TestOffloadLabelsByContent(t *testing.T) {
	svc := testService(t, nil)
	off := New(svc, threshold{0}, Options{TextThreshold: 1000})
	readFile, listDir := desktopCommander()
	arr, _ := json.Marshal(make([]int, 5000))
	in := toolResult(
		map[string]any{"type": "text", "text": readFile},
		map[string]any{"type": "text", "text": listDir},
		map[string]any{"type": "text", "text": string(arr)},
	)
	_, stored, err := off.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "read_file"}, in)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ mime, ext string }{{"text/plain; charset=utf-8", ".txt"}, {"text/plain; charset=utf-8", ".txt"}, {"application/json", ".json"}}
	if len(stored) != len(want) {
		t.Fatalf("stored %d artifacts, want %d", len(stored), len(want))
	}
	for i, a := range stored {
		if a.MimeType != want[i].mime || !strings.HasSuffix(a.Name, want[i].ext) {
			t.Errorf("item %d stored as %s (%s), want %s (%s)", i, a.MimeType, a.Name, want[i].mime, want[i].ext)
		}
	}
}

// A whole text is JSON for jsonValues exactly when encoding/json parses
// it, and a head that is JSON stays JSON so far when cut anywhere.
func FuzzJSONValues(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, `[Reading 5 lines]`, "[DIR] .bin\n[FILE] x", `{"a":1}` + "\n" + `{"a":2}`, `[1] [2]`, `{"a":"\u00e9\n"}`, `[[[[[[`, `{"a" 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := jsonValues(b, true)
		if valid := json.Valid(b); (n == 1) != valid {
			t.Fatalf("jsonValues = %d, json.Valid = %v for %q", n, valid, b)
		}
		if n == 0 {
			return
		}
		for cut := range len(b) {
			if jsonValues(b[:cut], false) == 0 && len(bytes.TrimSpace(b[:cut])) > 0 {
				t.Fatalf("%q is JSON but its first %d bytes do not tokenize", b, cut)
			}
		}
	})
}
