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

type fakeSpilled []byte

func (f fakeSpilled) Len() int64      { return int64(len(f) - 2) }
func (f fakeSpilled) Text() io.Reader { return newStringReader(f) }

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

// spilledResult builds a result whose big strings the transport spilled:
// each string of v marked with a "SPILL:" prefix becomes a marker.
func spilledResult(t *testing.T, sp *fakeSpills, v any) (in, expanded []byte) {
	t.Helper()
	expanded, _ = json.Marshal(v)
	var out []byte
	rest := expanded
	for {
		i := bytes.Index(rest, []byte(`"SPILL:`))
		if i < 0 {
			break
		}
		end := i + jsonSkipString(rest[i:])
		lit := append([]byte(`"`), rest[i+len(`"SPILL:`):end]...)
		out = append(append(out, rest[:i]...), sp.marker(lit)...)
		rest = rest[end:]
	}
	return append(out, rest...), bytes.ReplaceAll(expanded, []byte(`"SPILL:`), []byte(`"`))
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
	out, _, err := New(svc, builtInPolicy(t), Options{Spills: sp}).Rewrite(context.Background(),
		Call{Method: "tools/call", Tool: "t", Schema: sch}, in)
	if err != nil {
		t.Fatal(err)
	}
	var r callResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	checkSmall(t, out, r)
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
