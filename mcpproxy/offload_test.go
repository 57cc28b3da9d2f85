package mcpproxy

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
	off := NewOffloader(svc, threshold{0}, OffloadOptions{TextThreshold: 1000, BinaryThreshold: 500})
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
	previews := []string{"JSON array of 300 items", "Table (text/csv) with 500 data rows", "Text, 200 lines", "[image offloaded: image/png", "[resource offloaded: application/pdf"}
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
		if meta := link["_meta"].(map[string]any); meta[artifact.MetaSHA256] != sum(orig) {
			t.Errorf("item %d: sha256 %v, want %s", i, meta[artifact.MetaSHA256], sum(orig))
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
	off := NewOffloader(testService(t, nil), threshold{0}, OffloadOptions{TextThreshold: 100})
	obj := fmt.Sprintf(`{"users":[%s],"total":3,"note":"x"}`, strings.Repeat(`{"n":"abcdefgh"},`, 50)+`{}`)
	out, _, err := off.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, toolResult(map[string]any{"type": "text", "text": obj}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"JSON object with 3 keys", `\"users\"`, `\"total\": 1 bytes`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("preview lacks %q: %s", want, out)
		}
	}
}

func TestOffloadPolicyAndToolSwitch(t *testing.T) {
	big := toolResult(map[string]any{"type": "text", "text": strings.Repeat("x", 5000)})
	off := NewOffloader(testService(t, nil), threshold{1 << 20}, OffloadOptions{TextThreshold: 100})
	if out, _, _ := off.Rewrite(context.Background(), Call{Method: "tools/call"}, big); !bytes.Equal(out, big) {
		t.Error("the policy said no, yet the result changed")
	}
	off = NewOffloader(testService(t, nil), threshold{0}, OffloadOptions{TextThreshold: 100, Tools: map[string]bool{"secrets_dump": false}})
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
	out, _, err := NewOffloader(svc, threshold{0}, OffloadOptions{TextThreshold: 100}).Rewrite(context.Background(), Call{Method: "tools/call"}, big)
	if err != nil || !bytes.Equal(out, big) {
		t.Errorf("store down: the result must pass inline unchanged (%v)", err)
	}
	out, _, err = NewOffloader(svc, threshold{0}, OffloadOptions{TextThreshold: 100, FailClosed: true}).Rewrite(context.Background(), Call{Method: "tools/call"}, big)
	if err != nil || !bytes.Contains(out, []byte(`"isError":true`)) {
		t.Errorf("fail closed: got %s, %v", out, err)
	}
}

func TestOffloadResourcesRead(t *testing.T) {
	svc := testService(t, nil)
	data := bytes.Repeat([]byte{1, 2, 3}, 3000)
	in, _ := json.Marshal(map[string]any{"contents": []any{map[string]any{"uri": "x://a", "mimeType": "application/octet-stream", "blob": base64.StdEncoding.EncodeToString(data)}}})
	out, stored, err := NewOffloader(svc, threshold{0}, OffloadOptions{}).Rewrite(context.Background(), Call{Method: "resources/read", URI: "x://a"}, in)
	if err != nil || len(stored) != 1 || stored[0].SHA256 != sum(data) {
		t.Fatalf("resources/read: %d stored, %v", len(stored), err)
	}
	if !bytes.Contains(out, []byte(`"resource_link"`)) {
		t.Errorf("no resource_link in %s", out)
	}
}

// The 50 MB case: decoding happens on the way to the store, so Rewrite
// allocates far less than the item's size.
func TestOffloadDoesNotCopyTheItem(t *testing.T) {
	text := strings.Repeat("0123456789abcdef\\n", 3<<20) // ~54 MB raw, 51 MB decoded
	in := []byte(`{"content":[{"type":"text","text":"` + text + `"}]}`)
	off := NewOffloader(testService(t, nil), threshold{0}, OffloadOptions{})
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
	off := NewOffloader(testService(b, nil), threshold{0}, OffloadOptions{})
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
// content array is unchanged.
func FuzzRewrite(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}],"isError":false}`))
	f.Add([]byte(`{"content":[{"type":"image","data":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","mimeType":"image/png"},{"type":"resource","resource":{"uri":"a","text":"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"}}],"_meta":{"k":[1]}}`))
	f.Add([]byte(`{"content":"x"}`))
	f.Add([]byte(`[1]`))
	svc := testService(f, nil)
	low := NewOffloader(svc, threshold{0}, OffloadOptions{TextThreshold: 8, BinaryThreshold: 8})
	high := NewOffloader(svc, threshold{0}, OffloadOptions{TextThreshold: 1 << 40, BinaryThreshold: 1 << 40})
	f.Fuzz(func(t *testing.T, in []byte) {
		c := Call{Method: "tools/call", Tool: "fz"}
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
		var a, b map[string]json.RawMessage
		if json.Unmarshal(in, &a) != nil {
			return
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatal(err)
		}
		for k, v := range a {
			if k != "content" && !bytes.Equal(v, b[k]) {
				t.Fatalf("member %q changed: %s → %s", k, v, b[k])
			}
		}
	})
}
