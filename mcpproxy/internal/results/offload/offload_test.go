package offload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/schematest"
	"github.com/spillway-dev/spillway/policy"
)

// threshold is a Decider of our own: offload everything over min bytes.
type threshold struct{ min int64 }

func (d threshold) Offload(_ context.Context, in policy.OffloadInput) (policy.OffloadDecision, error) {
	return policy.OffloadDecision{Offload: in.Size > d.min, TTLSeconds: 600}, nil
}

func testService(t testing.TB, store artifact.Store) *artifact.Service {
	t.Helper()
	if store == nil {
		s, err := fsstore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		store = s
	}
	signer, err := token.NewSigner(token.Key{ID: "k1", Secret: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:1")
	return &artifact.Service{Store: store, Signer: signer, PublicURL: u}
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func toolResult(items ...any) []byte {
	b, _ := json.Marshal(map[string]any{"content": items, "structuredContent": map[string]any{"rows": 3}, "x-unknown": true})
	return b
}

func TestOffloadItems(t *testing.T) {
	svc := testService(t, nil)
	off := New(svc, threshold{0}, Options{TextThreshold: 1000, BinaryThreshold: 500})
	var rows []map[string]any
	for i := range 300 {
		rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("row \"%d\" é\n", i)})
	}
	jsonText, _ := json.MarshalIndent(rows, "", " ")
	csv := "a,b,c\n" + strings.Repeat("1,2,3\n", 500)
	text := strings.Repeat("a line of log output\n", 200)
	png := bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 3}, 200)
	in := toolResult(
		map[string]any{"type": "text", "text": "small stays"},
		map[string]any{"type": "text", "text": string(jsonText)},
		map[string]any{"type": "text", "text": csv},
		map[string]any{"type": "text", "text": text},
		map[string]any{"type": "image", "data": base64.StdEncoding.EncodeToString(png), "mimeType": "image/png"},
		map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///x.bin", "mimeType": "application/pdf", "blob": base64.StdEncoding.EncodeToString(png)}},
	)
	out, stored, err := off.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "q", Tenant: "acme"}, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 5 {
		t.Fatalf("stored %d artifacts, want 5", len(stored))
	}
	var r struct {
		Content           []map[string]any `json:"content"`
		StructuredContent json.RawMessage  `json:"structuredContent"`
		Unknown           *bool            `json:"x-unknown"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if string(r.StructuredContent) != `{"rows":3}` || r.Unknown == nil {
		t.Errorf("fields outside content changed: %s", out)
	}
	if len(r.Content) != 11 || r.Content[0]["text"] != "small stays" {
		t.Fatalf("content: %d items, want 1 + 5×2", len(r.Content))
	}
	originals := [][]byte{jsonText, []byte(csv), []byte(text), png, png}
	previews := []string{"JSON array of 300 objects", "CSV table, 500 rows × 3 columns", "200 lines", "1.6 KiB", "1.6 KiB"}
	for i, orig := range originals {
		preview, link := r.Content[1+2*i], r.Content[2+2*i]
		if link["type"] != "resource_link" || link["httpUrl"] == nil || link["httpUrlExpiresAt"] == nil {
			t.Errorf("item %d: not a resource_link with httpUrl: %v", i, link)
			continue
		}
		p, _ := preview["text"].(string)
		if !strings.Contains(p, previews[i]) || !strings.Contains(p, link["httpUrl"].(string)) {
			t.Errorf("item %d preview lacks %q or the URL:\n%s", i, previews[i], p)
		}
		id, _ := artifact.IDFromURI(link["uri"].(string))
		rc, err := svc.Store.Open(context.Background(), id, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, orig) {
			t.Errorf("item %d: stored %d bytes, want the original %d", i, len(got), len(orig))
		}
		meta := link["_meta"].(map[string]any)
		if meta[artifact.MetaSHA256] != sum(orig) {
			t.Errorf("item %d: sha256 %v, want %s", i, meta[artifact.MetaSHA256], sum(orig))
		}
		// What typed clients keep: _meta, with the link and the original item.
		lm, _ := meta[artifact.MetaLink].(map[string]any)
		wantType, wantURI := []string{"text", "text", "text", "image", "resource"}[i], []string{"", "", "", "", "file:///x.bin"}[i]
		if lm["httpUrl"] != link["httpUrl"] || lm["httpUrlExpiresAt"] != link["httpUrlExpiresAt"] || lm["sha256"] != sum(orig) ||
			lm["size"] != float64(len(orig)) || lm["originalType"] != wantType || (lm["originalUri"] != nil && lm["originalUri"] != wantURI) || (wantURI != "" && lm["originalUri"] != wantURI) {
			t.Errorf("item %d: _meta[%s] = %v", i, artifact.MetaLink, lm)
		}
		if stored[i].Tenant != "acme" {
			t.Errorf("item %d: tenant %q", i, stored[i].Tenant)
		}
	}
	if !strings.Contains(r.Content[1]["text"].(string), `"id":0`) {
		t.Errorf("JSON preview shows no first item:\n%s", r.Content[1]["text"])
	}
}

func TestOffloadObjectPreview(t *testing.T) {
	off := New(testService(t, nil), threshold{0}, Options{TextThreshold: 100})
	obj := fmt.Sprintf(`{"users":[%s],"total":3,"note":"x"}`, strings.Repeat(`{"n":"abcdefgh"},`, 50)+`{}`)
	out, _, err := off.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, toolResult(map[string]any{"type": "text", "text": obj}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"JSON object of 3 keys", "users: array of 51 objects", "total=3"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("preview lacks %q: %s", want, out)
		}
	}
}

func TestOffloadPolicyAndToolSwitch(t *testing.T) {
	big := toolResult(map[string]any{"type": "text", "text": strings.Repeat("x", 5000)})
	off := New(testService(t, nil), threshold{1 << 20}, Options{TextThreshold: 100})
	if out, _, _ := off.Rewrite(context.Background(), Call{Method: "tools/call"}, big); !bytes.Equal(out, big) {
		t.Error("the policy said no, yet the result changed")
	}
	off = New(testService(t, nil), threshold{0}, Options{TextThreshold: 100, Tools: map[string]bool{"secrets_dump": false}})
	if out, _, _ := off.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "secrets_dump"}, big); !bytes.Equal(out, big) {
		t.Error("a tool switched off was offloaded")
	}
}

// deadStore is a Store of our own that fails every write.
type deadStore struct{ artifact.Store }

func (deadStore) Put(context.Context, artifact.Artifact, io.Reader) (artifact.Artifact, error) {
	return artifact.Artifact{}, fmt.Errorf("put: %w", artifact.ErrUnavailable)
}

func TestOffloadStoreDown(t *testing.T) {
	big := toolResult(map[string]any{"type": "text", "text": strings.Repeat("x", 5000)})
	svc := testService(t, deadStore{})
	out, _, err := New(svc, threshold{0}, Options{TextThreshold: 100}).Rewrite(context.Background(), Call{Method: "tools/call"}, big)
	if err != nil || !bytes.Equal(out, big) {
		t.Errorf("store down: the result must pass inline unchanged (%v)", err)
	}
	out, _, err = New(svc, threshold{0}, Options{TextThreshold: 100, FailClosed: true}).Rewrite(context.Background(), Call{Method: "tools/call"}, big)
	if err != nil || !bytes.Contains(out, []byte(`"isError":true`)) {
		t.Errorf("fail closed: got %s, %v", out, err)
	}
}

// An offloaded upstream resources/read item stays a resource-contents
// item (the schema allows nothing else in contents): the preview as text
// for the same uri, the link in _meta. Content blocks (a text item and a
// resource_link) used to end up in contents, which clients reject.
func TestOffloadResourcesReadSchemaValid(t *testing.T) {
	svc := testService(t, nil)
	data := bytes.Repeat([]byte{0xff, 1, 2}, 3000) // not UTF-8: a binary preview
	text := strings.Repeat("a line of a log\n", 2000)
	in, _ := json.Marshal(map[string]any{
		"contents": []any{
			map[string]any{"uri": "x://a", "mimeType": "application/octet-stream", "blob": base64.StdEncoding.EncodeToString(data), "_meta": map[string]any{"keep": 1}},
			map[string]any{"uri": "x://b", "mimeType": "text/plain", "text": text},
			map[string]any{"uri": "x://c", "text": "small stays"},
		},
		"x-unknown": true,
	})
	schematest.Check(t, "2025-11-25", "ReadResourceResult", in)
	out, stored, err := New(svc, threshold{0}, Options{}).Rewrite(context.Background(), Call{Method: "resources/read", URI: "x://a", Tenant: "acme"}, in)
	if err != nil || len(stored) != 2 || stored[0].SHA256 != sum(data) || stored[1].SHA256 != sum([]byte(text)) {
		t.Fatalf("resources/read: %d stored, %v", len(stored), err)
	}
	schematest.Check(t, "2025-11-25", "ReadResourceResult", out)
	var r struct {
		Contents []struct {
			URI, MimeType, Text string
			Blob                *string
			Meta                map[string]json.RawMessage `json:"_meta"`
		}
		Unknown *bool `json:"x-unknown"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Contents) != 3 || r.Unknown == nil {
		t.Fatalf("%s: %v", out, err)
	}
	for i, want := range []struct{ uri, preview string }{{"x://a", "8.8 KiB"}, {"x://b", "2000 lines"}} {
		c := r.Contents[i]
		var link artifact.ResourceLink
		if err := json.Unmarshal(c.Meta[MetaOffloaded], &link); err != nil {
			t.Fatalf("item %d: no link in _meta: %v", i, c.Meta)
		}
		if c.URI != want.uri || c.Blob != nil || c.MimeType != "text/plain" || !strings.Contains(c.Text, want.preview) ||
			!strings.Contains(c.Text, link.HTTPURL) || link.URI != artifact.URI(stored[i].ID) || link.HTTPURLExpiresAt == "" {
			t.Errorf("item %d: %+v, link %+v", i, c, link)
		}
	}
	if string(r.Contents[0].Meta["keep"]) != "1" {
		t.Errorf("the item's own _meta was lost: %v", r.Contents[0].Meta)
	}
	if r.Contents[2].Text != "small stays" {
		t.Errorf("a small item changed: %+v", r.Contents[2])
	}
}

// FailClosed withholds a resources/read result as an error (a tool error
// result would be invalid there); tools/call gets a tool error.
func TestOffloadResourcesReadFailClosed(t *testing.T) {
	svc := testService(t, deadStore{})
	in, _ := json.Marshal(map[string]any{"contents": []any{map[string]any{"uri": "x://a", "text": strings.Repeat("x", 5000)}}})
	f := New(svc, threshold{0}, Options{TextThreshold: 100, FailClosed: true})
	if out, _, err := f.Rewrite(context.Background(), Call{Method: "resources/read", URI: "x://a"}, in); !errors.Is(err, ErrWithheld) || out != nil {
		t.Errorf("resources/read, store down, fail closed: %s, %v", out, err)
	}
	out, _, err := New(svc, threshold{0}, Options{TextThreshold: 100}).Rewrite(context.Background(), Call{Method: "resources/read", URI: "x://a"}, in)
	if err != nil || !bytes.Equal(out, in) {
		t.Errorf("resources/read, store down, fail open: the result must pass unchanged: %v", err)
	}
}

// The 50 MB case: decoding happens on the way to the store, so Rewrite
// allocates far less than the item's size.
func TestOffloadDoesNotCopyTheItem(t *testing.T) {
	text := strings.Repeat("0123456789abcdef\\n", 3<<20) // ~54 MB raw, 51 MB decoded
	in := []byte(`{"content":[{"type":"text","text":"` + text + `"}]}`)
	off := New(testService(t, nil), threshold{0}, Options{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, stored, err := off.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, in)
	runtime.ReadMemStats(&after)
	if err != nil || len(stored) != 1 {
		t.Fatalf("%d stored, %v", len(stored), err)
	}
	if len(out) > 8<<10 {
		t.Errorf("result is %d bytes", len(out))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(in))/4 {
		t.Errorf("Rewrite allocated %d bytes for a %d byte message: the item was copied", alloc, len(in))
	}
}

func BenchmarkOffload50MB(b *testing.B) {
	text := strings.Repeat("0123456789abcdef", 50<<16)
	in := []byte(`{"content":[{"type":"text","text":"` + text + `"}]}`)
	off := New(testService(b, nil), threshold{0}, Options{})
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := off.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, in); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzRewrite: the output is always valid JSON; with nothing over the
// thresholds it is the input itself; otherwise every member outside the
// content array is unchanged, and a resources/read result that was valid
// against the schema stays valid.
func FuzzRewrite(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}],"isError":false}`), false)
	f.Add([]byte(`{"content":[{"type":"image","data":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","mimeType":"image/png"},{"type":"resource","resource":{"uri":"a","text":"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"}}],"_meta":{"k":[1]}}`), false)
	f.Add([]byte(`{"content":"x"}`), false)
	f.Add([]byte(`{"content":[{"type":"text","text":"`+"`"+` + strings.Repeat("x", 90) + `+"`"+`"}],"structuredContent":{"a":"`+"`"+` + strings.Repeat("y", 90) + `+"`"+`","b":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30],"c":{"d":"`+"`"+` + strings.Repeat("z", 90) + `+"`"+`"}},"_meta":{"k":1}}`), false)
	f.Add([]byte(`{"content":[{"type":"text","text":"aaaaaaaaaaaaaaaaaaaaaaa"},{"type":"text","text":"[1,2]"},{"type":"text","text":"{\"a\":1}"},{"type":"image","data":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","mimeType":"image/png"}],"isError":false}`), false)
	f.Add([]byte(`[1]`), false)
	f.Add([]byte(`{"contents":[{"uri":"x://a","text":"aaaaaaaaaaaaaaaaaaaaaaaaaaa","_meta":{"k":1}},{"uri":"x://b","blob":"AAAAAAAAAAAAAAAAAAAAAAAA"}]}`), true)
	f.Add([]byte(`{"contents":[{"uri":1,"text":"aaaaaaaaaaaaaaaaaaaaaaaaaaa","_meta":[]}]}`), true)
	svc := testService(f, nil)
	low := New(svc, threshold{0}, Options{TextThreshold: 8, BinaryThreshold: 8, Budget: 64})
	high := New(svc, threshold{0}, Options{TextThreshold: 1 << 40, BinaryThreshold: 1 << 40, Budget: 1 << 40})
	f.Fuzz(func(t *testing.T, in []byte, read bool) {
		c, key := Call{Method: "tools/call", Tool: "fz"}, "content"
		if read {
			c, key = Call{Method: "resources/read", URI: "x://fz"}, "contents"
		}
		out, _, err := high.Rewrite(context.Background(), c, in)
		if err != nil {
			if json.Valid(in) {
				t.Fatalf("valid input refused: %v", err)
			}
			return
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("nothing over the thresholds, yet %q became %q", in, out)
		}
		out, _, err = low.Rewrite(context.Background(), c, in)
		if err != nil && !errors.Is(err, artifact.ErrIntegrity) {
			t.Fatal(err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON out: %q", out)
		}
		typ := "CallToolResult"
		if read {
			typ = "ReadResourceResult"
		}
		if schematest.Validate("2025-11-25", typ, in) == nil {
			schematest.Check(t, "2025-11-25", typ, out)
		}
		var a, b map[string]json.RawMessage
		if json.Unmarshal(in, &a) != nil {
			return
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Replaced []struct {
				Pointer string `json:"pointer"`
			} `json:"dev.spillway/replaced"`
		}
		json.Unmarshal(b["_meta"], &meta)
		shrunk := false
		for _, r := range meta.Replaced {
			shrunk = shrunk || strings.HasPrefix(r.Pointer, "/structuredContent")
		}
		for k, v := range a {
			switch {
			case k == key:
			case !read && k == "_meta" && meta.Replaced != nil:
				if v[0] == '{' {
					var m map[string]json.RawMessage
					json.Unmarshal(b[k], &m)
					delete(m, MetaReplaced)
					want, _ := json.Marshal(m)
					var orig map[string]json.RawMessage
					json.Unmarshal(v, &orig)
					got, _ := json.Marshal(orig)
					if !bytes.Equal(want, got) {
						t.Fatalf("_meta changed beyond %s: %s → %s", MetaReplaced, v, b[k])
					}
				}
			case !read && k == "structuredContent" && (shrunk || string(b["isError"]) == "true"):
			case !read && k == "isError" && b["structuredContent"] == nil:
			default:
				if !bytes.Equal(v, b[k]) {
					t.Fatalf("member %q changed: %s → %s", k, v, b[k])
				}
			}
		}
	})
}
