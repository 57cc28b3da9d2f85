package offload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// fakeSpills stands in for package spill (our own interface): marker
// literals "\u0000spill:N" resolve to literals held here.
type fakeSpills struct {
	lits     [][]byte // each with its quotes
	released map[int]bool
}

func (s *fakeSpills) Release(lit []byte) {
	if n, ok := s.index(lit); ok {
		if s.released == nil {
			s.released = map[int]bool{}
		}
		s.released[n] = true
	}
}

func (s *fakeSpills) marker(lit []byte) string {
	s.lits = append(s.lits, lit)
	return fmt.Sprintf("\"\\u0000spill:%d\"", len(s.lits)-1)
}

func (s *fakeSpills) index(lit []byte) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(string(lit), "\"\\u0000spill:%d\"", &n); err != nil || n < 0 || n >= len(s.lits) ||
		string(lit) != fmt.Sprintf("\"\\u0000spill:%d\"", n) {
		return 0, false
	}
	return n, true
}

// fakeSpilled is a string literal (quotes included) or an array.
type fakeSpilled []byte

func (f fakeSpilled) array() bool { return f[0] == '[' }
func (f fakeSpilled) Len() int64 {
	if f.array() {
		return int64(len(f))
	}
	return int64(len(f) - 2)
}
func (f fakeSpilled) Kind() string {
	if f.array() {
		return "array"
	}
	return "string"
}
func (f fakeSpilled) Text() io.Reader   { return newStringReader(f) }
func (f fakeSpilled) Base64() io.Reader { return base64Decoder(newStringReader(f)) }
func (f fakeSpilled) Raw() io.Reader {
	if f.array() {
		return bytes.NewReader(f)
	}
	return bytes.NewReader(f[1 : len(f)-1])
}

// First is the array's first elements, up to 1 KiB.
func (f fakeSpilled) First() []byte {
	if !f.array() {
		return nil
	}
	out := []byte{'['}
	for _, el := range jsonrpc.Elements(f, [2]int{0, len(f)}) {
		if len(out)+el[1]-el[0] > 1024 {
			break
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, f[el[0]:el[1]]...)
	}
	return append(out, ']')
}

func (s *fakeSpills) Lookup(lit []byte) (Spilled, bool) {
	n, ok := s.index(lit)
	if !ok {
		return nil, false
	}
	return fakeSpilled(s.lits[n]), true
}

func (s *fakeSpills) each(raw []byte, f func(lit []byte)) {
	for i := 0; i < len(raw); {
		j := bytes.Index(raw[i:], []byte("\"\\u0000spill:"))
		if j < 0 {
			f(raw[i:])
			return
		}
		f(raw[i : i+j])
		end := i + j + bytes.IndexByte(raw[i+j+1:], '"') + 2
		f(raw[i+j : end])
		i = end
	}
}

func (s *fakeSpills) Expand(w io.Writer, raw []byte) error {
	var err error
	s.each(raw, func(b []byte) {
		if n, ok := s.index(b); ok {
			b = s.lits[n]
		}
		if err == nil {
			_, err = w.Write(b)
		}
	})
	return err
}

func (s *fakeSpills) ExpandedLen(raw []byte) int64 {
	var n int64
	s.each(raw, func(b []byte) {
		if k, ok := s.index(b); ok {
			b = s.lits[k]
		}
		n += int64(len(b))
	})
	return n
}

// spilledResult builds a result whose big values the transport spilled:
// each string of v marked with a "SPILL:" prefix, and each array whose
// first element is "SPILLARRAY", becomes a marker.
func spilledResult(t *testing.T, sp *fakeSpills, v any) (in, expanded []byte) {
	t.Helper()
	b, _ := json.Marshal(v)
	b = bytes.ReplaceAll(b, []byte(`["SPILLARRAY",`), []byte(`[SPILLARRAY`))
	var out []byte
	for {
		i := bytes.Index(b, []byte(`"SPILL:`))
		j := bytes.Index(b, []byte(`[SPILLARRAY`))
		if i < 0 && j < 0 {
			break
		}
		if i < 0 || (j >= 0 && j < i) {
			rest := append([]byte{'['}, b[j+len(`[SPILLARRAY`):]...)
			end := jsonrpc.SkipValue(rest, 0)
			out = append(append(out, b[:j]...), sp.marker(rest[:end])...)
			expanded = append(append(expanded, b[:j]...), rest[:end]...)
			b = rest[end:]
			continue
		}
		end := i + jsonSkipString(b[i:])
		lit := append([]byte(`"`), b[i+len(`"SPILL:`):end]...)
		out = append(append(out, b[:i]...), sp.marker(lit)...)
		expanded = append(append(expanded, b[:i]...), lit...)
		b = b[end:]
	}
	return append(out, b...), append(expanded, b...)
}

func jsonSkipString(b []byte) int {
	for i := 1; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// rewriteSpilled rewrites in with sp resolving its markers and checks the
// result with checkSmall.
func rewriteSpilled(t *testing.T, svc *artifact.Service, sp *fakeSpills, c Call, in []byte) (out []byte, r callResult, stored []artifact.Artifact) {
	t.Helper()
	out, stored, err := New(svc, builtInPolicy(t), Options{Spills: sp}).Rewrite(context.Background(), c, in)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(`\u0000spill`)) {
		t.Fatalf("a marker is left in the result: %s", out)
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	checkSmall(t, out, r)
	return out, r, stored
}

// Strings the transport spilled to disk are stored from there: a text
// item, an image's data, and a structuredContent member repeating the
// text (one artifact for both); the result is small and carries no
// marker. Before Options.Spills, the offloader saw a 30-byte string and
// passed the marker on.
func TestOffloadSpilledStrings(t *testing.T) {
	svc := testService(t, nil)
	_, sch := presented(t, fsTextSchema)
	sp := &fakeSpills{}
	log := strings.Repeat("2026-11-26T10:00:00Z INFO \"quoted\" ünï\n", 30000)
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 9, 8, 7}, 20000)
	in, _ := spilledResult(t, sp, map[string]any{
		"content": []any{
			map[string]any{"type": "text", "text": "SPILL:" + log},
			map[string]any{"type": "image", "mimeType": "image/png", "data": "SPILL:" + base64.StdEncoding.EncodeToString(img)},
		},
		"structuredContent": map[string]any{"content": "SPILL:" + log},
	})
	if len(in) > 1000 {
		t.Fatalf("the spilled result is %d bytes", len(in))
	}
	out, stored, err := New(svc, builtInPolicy(t), Options{Spills: sp}).Rewrite(context.Background(),
		Call{Method: "tools/call", Tool: "t", Schema: sch}, in)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(`\u0000spill`)) {
		t.Fatalf("a marker is left in the result: %s", out)
	}
	var r callResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	checkSmall(t, out, r)
	if len(stored) != 2 {
		t.Fatalf("stored %d artifacts, want 2 (the text once, the image)", len(stored))
	}
	got := map[string][]byte{}
	for _, a := range stored {
		got[a.MimeType] = fetchArtifact(t, svc, artifact.URI(a.ID))
	}
	if !bytes.Equal(got["text/plain; charset=utf-8"], []byte(log)) || !bytes.Equal(got["image/png"], img) {
		t.Errorf("stored: %d text bytes (want %d), %d image bytes (want %d)", len(got["text/plain; charset=utf-8"]), len(log), len(got["image/png"]), len(img))
	}
	if len(r.Meta.Replaced) != 3 || r.Meta.Replaced[2].Pointer != "/structuredContent/content" || r.Meta.Replaced[2].URI != r.Meta.Replaced[0].URI {
		t.Errorf("replaced: %+v", r.Meta.Replaced)
	}
	if err := sch.Validate(mustJSON(r.StructuredContent)); err != nil {
		t.Errorf("structuredContent does not validate: %v", err)
	}
}

// A structuredContent no small value fits: its artifact is the value as
// the server sent it, spilled strings included, not their previews.
func TestOffloadSpilledNoFit(t *testing.T) {
	svc := testService(t, nil)
	_, sch := presented(t, `{"type":"object","properties":{"blob":{"type":"string","pattern":"^x+$"}},"required":["blob"]}`)
	sp := &fakeSpills{}
	in, whole := spilledResult(t, sp, map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": "one blob"}},
		"structuredContent": map[string]any{"blob": "SPILL:" + strings.Repeat("x", 300000)},
	})
	out, r, _ := rewriteSpilled(t, svc, sp, Call{Method: "tools/call", Tool: "t", Schema: sch}, in)
	if !r.IsError || len(r.Meta.Replaced) != 1 || r.Meta.Replaced[0].Pointer != "/structuredContent" {
		t.Fatalf("want a tool error with the whole value a link: %s", out)
	}
	want := jsonrawPath(t, whole, "structuredContent")
	if got := fetchArtifact(t, svc, r.Meta.Replaced[0].URI); !bytes.Equal(got, want) {
		t.Errorf("the artifact holds %d bytes (%.60q…), want the value as sent (%d)", len(got), got, len(want))
	}
}

// Spent frees what the rewrite stored (marker 1, the text), not what
// the result still holds (marker 0, a member of _meta the offloader does
// not move; json.Marshal writes _meta first): before it, every spilled string waited for its TTL on disk.
func TestSpentReleasesStored(t *testing.T) {
	svc := testService(t, nil)
	sp := &fakeSpills{}
	in, _ := spilledResult(t, sp, map[string]any{
		"content": []any{map[string]any{"type": "text", "text": "SPILL:" + strings.Repeat("log line\n", 20000)}},
		"_meta":   map[string]any{"x-trace": "SPILL:" + strings.Repeat("t", 70000)},
	})
	f := New(svc, builtInPolicy(t), Options{Spills: sp})
	out, _, err := f.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, in)
	if err != nil {
		t.Fatal(err)
	}
	f.Spent(in, out)
	if !sp.released[1] || sp.released[0] || len(sp.released) != 1 {
		t.Errorf("released %v, want marker 1 alone", sp.released)
	}
}

// FastMCP's shape for 5,000 rows, with both arrays moved out whole by the
// transport (one text item per row in content, the rows in
// structuredContent.result): content becomes one preview and one link to
// the rows as a JSON array, structuredContent keeps its first rows and
// validates, and each artifact holds the data as sent. Before, an array
// marker was an opaque string: content passed whole.
func TestOffloadSpilledArrays(t *testing.T) {
	svc := testService(t, nil)
	_, sch := presented(t, `{"type":"object","properties":{"result":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id","name"]}}},"required":["result"]}`)
	sp := &fakeSpills{}
	rows := []any{"SPILLARRAY"}
	items := []any{"SPILLARRAY"}
	var rowsJSON [][]byte
	for i := range 5000 {
		row := map[string]any{"id": i, "name": fmt.Sprintf("customer %d", i)}
		b, _ := json.Marshal(row)
		rowsJSON = append(rowsJSON, b)
		rows = append(rows, row)
		items = append(items, map[string]any{"type": "text", "text": string(b)})
	}
	in, whole := spilledResult(t, sp, map[string]any{"content": items, "structuredContent": map[string]any{"result": rows}})
	if len(in) > 500 {
		t.Fatalf("the spilled result is %d bytes", len(in))
	}
	_, r, _ := rewriteSpilled(t, svc, sp, Call{Method: "tools/call", Tool: "t", Schema: sch}, in)
	if len(r.Content) < 2 || r.Content[1]["type"] != "resource_link" {
		t.Fatalf("content: %v", r.Content)
	}
	if len(r.Meta.Replaced) != 2 || r.Meta.Replaced[0].Pointer != "/content" || r.Meta.Replaced[0].Count != 5000 ||
		r.Meta.Replaced[1].Pointer != "/structuredContent/result" {
		t.Fatalf("replaced: %+v", r.Meta.Replaced)
	}
	wantRows := append(append([]byte{'['}, bytes.Join(rowsJSON, []byte(","))...), ']')
	if got := fetchArtifact(t, svc, r.Meta.Replaced[0].URI); !bytes.Equal(got, wantRows) {
		t.Errorf("content's artifact: %d bytes, want the rows as a JSON array (%d)", len(got), len(wantRows))
	}
	if got := fetchArtifact(t, svc, r.Meta.Replaced[1].URI); !bytes.Equal(got, jsonrawPath(t, whole, "structuredContent", "result")) {
		t.Errorf("structuredContent.result's artifact is not the array as sent (%d bytes)", len(got))
	}
	var kept []json.RawMessage
	if json.Unmarshal(r.StructuredContent["result"], &kept) != nil || len(kept) == 0 || len(kept) >= 5000 {
		t.Errorf("structuredContent.result keeps %d rows", len(kept))
	}
	if err := sch.Validate(mustJSON(r.StructuredContent)); err != nil {
		t.Errorf("structuredContent does not validate: %v", err)
	}
}

// A moved-out content that is not all text (an image among the items) is
// stored as the items themselves.
func TestOffloadSpilledMixedContent(t *testing.T) {
	svc := testService(t, nil)
	sp := &fakeSpills{}
	items := []any{"SPILLARRAY", map[string]any{"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}}
	for i := range 3000 {
		items = append(items, map[string]any{"type": "text", "text": fmt.Sprintf("line %d", i)})
	}
	in, whole := spilledResult(t, sp, map[string]any{"content": items})
	_, r, _ := rewriteSpilled(t, svc, sp, Call{Method: "tools/call", Tool: "t"}, in)
	if len(r.Meta.Replaced) != 1 || r.Meta.Replaced[0].MimeType != "application/json" {
		t.Fatalf("replaced: %+v", r.Meta.Replaced)
	}
	if got := fetchArtifact(t, svc, r.Meta.Replaced[0].URI); !bytes.Equal(got, jsonrawPath(t, whole, "content")) {
		t.Errorf("the artifact is not the items as sent")
	}
}
