package offload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// spoolRead reads msg through a Spooler spilling strings over 1 KiB,
// tapped by rw when tap is set; the Spooler closes with the test.
func spoolRead(t *testing.T, rw *Rewriter, tap bool, msg string) []byte {
	t.Helper()
	o := spill.Options{Dir: t.TempDir(), Threshold: 1 << 10}
	if tap {
		o.Tap = rw.Tap
	}
	sp, err := spill.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	raw, err := sp.Read(strings.NewReader(msg), 0)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// offloadRead reads msg through a Spooler (tapped by rw when tap is set)
// and offloads its result; it returns the texts the agent gets.
func offloadRead(t *testing.T, rw *Rewriter, tap bool, msg string) (texts []string, taken bool) {
	t.Helper()
	raw := spoolRead(t, rw, tap, msg)
	result := jsonrpc.Path(raw, "result")
	var e *early
	content, _ := jsonrpc.Member(result, "content")
	for _, it := range jsonrpc.Elements(result, content) {
		if x := rw.lit.early(jsonrpc.RawMember(result[it[0]:it[1]], "text")); x != nil {
			e = x
		}
	}
	out, _, err := rw.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, result)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Content {
		if c.Type == "text" {
			// The link and its expiry differ from run to run: the
			// preview is what comes before them.
			texts = append(texts, c.Text[:strings.LastIndex(c.Text, "http://")])
		}
	}
	if e != nil {
		e.mu.Lock()
		// run left a complete text's preview; only take clears it.
		taken = e.complete && !e.released && e.pb == nil
		e.mu.Unlock()
	}
	return texts, taken
}

// A text's preview built while it arrives is the preview built when it
// is stored, whatever the text (JSON rows, CSV, logs, markdown, text
// sniffed as an image), and is the one used.
func TestEarlyPreviewSame(t *testing.T) {
	rows := func(f func(i int) string, n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(f(i))
		}
		return b.String()
	}
	texts := map[string]string{
		"json": "[" + rows(func(i int) string {
			return `{"id":` + strings.Repeat("1", i%7+1) + `,"name":"row \"` + strings.Repeat("x", i%13) + `\"","ok":true,"when":"2026-11-26T10:00:00Z"},`
		}, 3000) + `{"id":0}]`,
		"csv":      "a,b,c\n" + rows(func(i int) string { return strings.Repeat("1", i%5+1) + ",two,3.5\n" }, 4000),
		"log":      rows(func(i int) string { return "2026-11-26 10:00:00 INFO request " + strings.Repeat("y", i%40) + " done\n" }, 4000),
		"markdown": "# Title\n\n" + rows(func(i int) string { return "- item " + strings.Repeat("z", i%20) + "\n" }, 4000),
		"gif":      "GIF89a" + strings.Repeat("\x01", 70000),
	}
	for name, text := range texts {
		lit, _ := json.Marshal(text)
		msg := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + string(lit) + `}]}}`
		rw := New(testService(t, nil), threshold{0}, Options{Spills: Registry{}})
		want, _ := offloadRead(t, rw, false, msg)
		got, taken := offloadRead(t, rw, true, msg)
		if len(want) != 1 || len(got) != 1 || got[0] != want[0] {
			t.Fatalf("%s: preview built early\n%q\nwant\n%q", name, got, want)
		}
		if !taken {
			t.Errorf("%s: the early preview was not the one used", name)
		}
		if n := len(rw.early); n > 2 {
			t.Errorf("%s: %d early previews still counted after their strings went", name, n)
		}
	}
}

// Past maxEarly previews under way, a text is not tapped (its preview is
// built when it is stored); each slot comes back when its string goes.
func TestEarlyBounded(t *testing.T) {
	dir := t.TempDir()
	fs, err := fsstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	rw := New(testService(t, fs), threshold{0}, Options{})
	if rw.Tap("name") != nil || rw.Tap("") != nil {
		t.Fatal("a member that is neither text nor base64 data was tapped")
	}
	var taps []spill.Tap
	for range maxEarly {
		tp := rw.Tap("text")
		if tp == nil {
			t.Fatal("a tap refused under the bound")
		}
		taps = append(taps, tp)
	}
	if rw.Tap("text") != nil || rw.Tap("data") != nil || rw.Tap("blob") != nil {
		t.Fatal("a tap past the bound, or of another member")
	}
	taps[0].Write(bytes.Repeat([]byte("a"), 100))
	taps[0].End(false) // its message failed: the slot comes back
	taps[1].End(true)
	taps[1].Release()
	for range 2 {
		tp := rw.Tap("text")
		if tp == nil {
			t.Fatal("a slot did not come back")
		}
		taps = append(taps, tp)
	}
	for _, tp := range taps[2:] {
		tp.End(false)
	}
	for _, tp := range taps {
		<-tp.(*early).done // its staging is gone before the store's folder
	}
	// Each message failed (the upstream died mid-string) or its string
	// went: nothing of theirs stays staged.
	if n := rw.stage.used.Load(); n != 0 {
		t.Fatalf("%d bytes still staged", n)
	}
	if es, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(es) != 0 {
		t.Fatalf("%d staging files left in the store's folder", len(es))
	}
}

// A result too small to hold anything over a threshold costs nothing:
// no copy, no store timer (it ran for every small call before).
func TestSmallResultAllocs(t *testing.T) {
	rw := New(testService(t, nil), threshold{0}, Options{Spills: Registry{}})
	small := []byte(`{"content":[{"type":"text","text":"sunny"}],"isError":false}`)
	ctx := context.Background()
	// Under -race sync.Pool drops what is put at random, so json.Valid
	// sometimes allocates its scanner: up to 2 is that, the timer was 5.
	if n := testing.AllocsPerRun(100, func() { rw.Rewrite(ctx, Call{Method: "tools/call", Tool: "t"}, small) }); n > 2 {
		t.Fatalf("%v allocations to rewrite a small result", n)
	}
}

// stagedMsg is a tools/call answer with a long text (escapes, non-ASCII),
// an image and an embedded resource's blob, and the bytes each decodes to.
func stagedMsg() (msg string, want [][]byte) {
	var b strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&b, "{\"id\":%d,\"name\":\"é row \\\"%d\\\"\tx\"}\n", i, i*7)
	}
	text := []byte(b.String())
	img := make([]byte, 150_000)
	for i := range img {
		img[i] = byte(i*31 + i>>8)
	}
	blob := bytes.Repeat([]byte("%PDF-1.7 blob "), 9000)
	items, _ := json.Marshal([]any{
		map[string]any{"type": "text", "text": string(text)},
		map[string]any{"type": "image", "mimeType": "image/x-raw", "data": base64.StdEncoding.EncodeToString(img)},
		map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///r.pdf", "mimeType": "application/pdf",
			"blob": base64.StdEncoding.EncodeToString(blob)}},
	})
	return `{"jsonrpc":"2.0","id":1,"result":{"content":` + string(items) + `}}`, [][]byte{text, img, blob}
}

// A spilled text and base64 data tapped as they arrive are staged
// decoded: the store copies the staged bytes (the spill is not decoded a
// second time), the artifacts hold exactly the values, and the staging
// space is given back once the strings go. Past StageMax nothing is
// staged and the values are stored all the same.
func TestEarlyStaged(t *testing.T) {
	msg, want := stagedMsg()
	var total int64
	for _, w := range want {
		total += int64(len(w))
	}
	fs, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The local-directory store stages in its own folder (and takes a
	// staging as it is); a store without a staging of its own gets a
	// file in StageDir, read when stored.
	stores := []artifact.Store{fs, struct{ artifact.Store }{fs}}
	for i, max := range []int64{0, 0, total - 1} {
		rw := New(testService(t, stores[i%2]), threshold{0}, Options{Spills: Registry{}, StageDir: t.TempDir(), StageMax: max})
		raw := spoolRead(t, rw, true, msg)
		result := jsonrpc.Path(raw, "result")
		content, _ := jsonrpc.Member(result, "content")
		var lits [][]byte
		for _, it := range jsonrpc.Elements(result, content) {
			item := result[it[0]:it[1]]
			lit := jsonrpc.RawMember(item, "text")
			if lit == nil {
				lit = jsonrpc.RawMember(item, "data")
			}
			if lit == nil {
				lit = jsonrpc.RawMember(jsonrpc.RawMember(item, "resource"), "blob")
			}
			lits = append(lits, lit)
		}
		staged := 0
		for i, lit := range lits {
			r := rw.lit.open(lit)
			if i > 0 {
				r = rw.lit.binary(lit)
			}
			if _, ok := artifact.StagingOf(r); ok {
				staged++
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, want[i]) {
				t.Fatalf("StageMax %d: value %d read back wrong (%d bytes, %v)", max, i, len(got), err)
			}
		}
		used := rw.stage.used.Load()
		if max == 0 && (staged != 3 || used != total) {
			t.Fatalf("%d of 3 values staged, %d bytes; want all, %d", staged, used, total)
		}
		if max != 0 && used >= max {
			t.Fatalf("%d bytes staged past StageMax %d", used, max)
		}
		_, stored, err := rw.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, result)
		if err != nil || len(stored) != 3 {
			t.Fatalf("stored %d, %v", len(stored), err)
		}
		for i, a := range stored {
			if a.SHA256 != sum(want[i]) {
				t.Fatalf("StageMax %d: artifact %d holds other bytes than the value", max, i)
			}
		}
		spill.Release(raw)
		if n := rw.stage.used.Load(); n != 0 {
			t.Fatalf("%d bytes still staged after the strings went", n)
		}
	}
}

// Base64 data that does not decode is not staged: storing it fails as it
// did without the tap (the store's own decoding says why).
func TestEarlyStagedMalformed(t *testing.T) {
	bad := strings.Repeat("QUJD", 3000) + "*" + strings.Repeat("QUJD", 3000)
	msg := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"image","mimeType":"image/png","data":"` + bad + `"}]}}`
	for _, tap := range []bool{false, true} {
		rw := New(testService(t, nil), threshold{0}, Options{Spills: Registry{}, StageDir: t.TempDir()})
		raw := spoolRead(t, rw, tap, msg)
		_, stored, err := rw.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, jsonrpc.Path(raw, "result"))
		if err != nil || len(stored) != 0 || rw.stage.used.Load() != 0 {
			t.Fatalf("tap %v: malformed data stored (%d, %v) or staged (%d bytes)", tap, len(stored), err, rw.stage.used.Load())
		}
		spill.Release(raw)
	}
}

// failingStager is a store whose staging always fails (a full disk).
type failingStager struct{ artifact.Store }

func (failingStager) Stage() (artifact.Staging, error) { return nil, errors.New("no space left") }

// countingStager is a store whose stagings count their writes.
type countingStager struct {
	artifact.Store
	writes *atomic.Int64
}

func (c countingStager) Stage() (artifact.Staging, error) {
	st, err := c.Store.(artifact.Stager).Stage()
	return countingStaging{st, c.writes}, err
}

type countingStaging struct {
	artifact.Staging
	writes *atomic.Int64
}

func (c countingStaging) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Staging.Write(p)
}

// A value is staged in big writes, each a system call: it was staged 2 KiB
// at a time (a fifth of the proxy's CPU on a 1 GiB text), 213 writes here.
func TestEarlyStagedWrites(t *testing.T) {
	msg, want := stagedMsg()
	fs, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	rw := New(testService(t, countingStager{fs, &writes}), threshold{0}, Options{Spills: Registry{}, StageDir: t.TempDir()})
	raw := spoolRead(t, rw, true, msg)
	defer spill.Release(raw)
	_, stored, err := rw.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, jsonrpc.Path(raw, "result"))
	if err != nil || len(stored) != 3 {
		t.Fatalf("stored %d, %v", len(stored), err)
	}
	var total int64
	for _, w := range want {
		total += int64(len(w))
	}
	// Each value in writes of up to 64 KiB, the text's first cut
	// after its sniffed head.
	if n, most := writes.Load(), total/(64<<10)+6; n > most {
		t.Fatalf("%d bytes staged in %d writes; want at most %d", total, n, most)
	}
}

// Strings of many messages at once, of two tenants, are staged and stored
// each as its own artifact, the tenant's; when staging fails they are
// stored all the same, decoded from their spill. Nothing stays staged.
func TestEarlyStagedConcurrent(t *testing.T) {
	msg, want := stagedMsg()
	dir := t.TempDir()
	fs, err := fsstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range []artifact.Store{fs, failingStager{fs}} {
		rw := New(testService(t, store), threshold{0}, Options{Spills: Registry{}, StageDir: t.TempDir()})
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for g := range 6 {
			tenant := []string{"acme", "globex"}[g%2]
			wg.Go(func() {
				raw := spoolRead(t, rw, true, msg)
				defer spill.Release(raw)
				_, stored, err := rw.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t", Tenant: tenant}, jsonrpc.Path(raw, "result"))
				if err != nil || len(stored) != 3 {
					errs <- fmt.Errorf("%s: stored %d, %w", tenant, len(stored), err)
					return
				}
				for i, a := range stored {
					if a.SHA256 != sum(want[i]) || a.Tenant != tenant {
						errs <- fmt.Errorf("%s: artifact %d holds other bytes, or is %q's", tenant, i, a.Tenant)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := rw.stage.used.Load(); n != 0 {
			t.Errorf("%d bytes still staged", n)
		}
		if es, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(es) != 0 {
			t.Errorf("%d staging files left in the store's folder", len(es))
		}
	}
}

// An aside whose writer is behind, given chunks of varying sizes, keeps
// its few buffers: it allocated 1.6 MiB here before (buffers regrown and
// dropped), 93 MB beside the preview of a 1 GiB text. (MemStats, not
// AllocsPerRun, which runs on one thread: the writer would never lag.)
func TestAsideAllocs(t *testing.T) {
	h := sha256.New() // slower than the copy into the aside
	a := newAside(h)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 512 {
		a.Write(chunk[:(i*7919)%len(chunk)+1]) // a decoder's chunks vary
	}
	a.Close()
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > (asideChunks+2)*asideChunk {
		t.Fatalf("%d KiB allocated for 512 chunks of up to 64 KiB", n>>10)
	}
}

// A string tapped as it arrives is kept as its staged value while it is
// spelt as encoders spell it (spill.Canon): none of it goes to the spill
// file. From the first bytes spelt otherwise (an escaped '/', a \u escape
// of a letter, bytes that are not UTF-8, base64 without its padding) or
// once the staging is out of room, its bytes are handed back to the spill
// file, spelt from the staged value up to there. Either way the message
// expands byte for byte, and the stored artifact holds the value.
func TestEarlyKept(t *testing.T) {
	text := strings.Repeat(`{\"row\":1,\"v\":\"a\\tb é\"}\n`, 12000)
	goHTML := strings.Repeat(`{\"row\":1,\"v\":\"\u003cb\u003ea \u0026 b\u003c/b\u003e\"}\n`, 9000)
	goLS := strings.Repeat(`{\"row\":1,\"v\":\"a\u2028b \u0026 c\u2029\"}\n`, 9000)
	img := make([]byte, 300001)
	for i := range img {
		img[i] = byte(i*7 + i>>9)
	}
	b64 := base64.StdEncoding.EncodeToString(img)
	slash := strings.Index(b64[len(b64)/2:], "/") + len(b64)/2
	cases := []struct {
		name     string
		value    string // escaped, as sent
		image    bool
		kept     bool
		stageMax int64
	}{
		{"text", text, false, true, 0},
		{"text with \\/ in the middle", text[:150000] + `\/` + text[150000:], false, false, 0},
		{"text with \\u0041 near its end", text + `\u0041bc`, false, false, 0},
		{"text with a byte that is not UTF-8", text[:200000] + "\xff" + text[200000:], false, false, 0},
		{"text, staging out of room", text, false, false, 200000},
		// '<', '>' and '&' as Go's json.Marshal spells them: kept; spelt
		// both ways in one string: handed back from the second way on,
		// exactly as sent.
		{"text with \\u003c \\u003e \\u0026", goHTML, false, true, 0},
		{"text with \\u0026, then & as itself", goHTML + `a & b`, false, false, 0},
		{"text with <, then \\u003c", strings.Replace(goHTML, `\u003c`, `<`, 1) + `\u003c`, false, false, 0},
		{"text with \\u003c, staging out of room", goHTML, false, false, 200000},
		// U+2028 and U+2029 likewise (Go's json.Marshal always escapes
		// them).
		{"text with \\u2028 \\u2029", goLS, false, true, 0},
		{"text with \\u2028, then U+2029 as itself", goLS + "a \u2029 b", false, false, 0},
		{"text with U+2028 and U+2029 as themselves", strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(goLS), false, true, 0},
		{"base64", b64, true, true, 0},
		{"base64 with \\/", b64[:slash] + `\` + b64[slash:], true, false, 0},
		{"base64 without padding", strings.TrimRight(base64.StdEncoding.EncodeToString(img[:len(img)-2]), "="), true, false, 0},
		{"base64, staging out of room", b64, true, false, 100000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			item := `{"type":"text","text":"` + c.value + `"}`
			if c.image {
				item = `{"type":"image","mimeType":"image/x-raw","data":"` + c.value + `"}`
			}
			msg := `{"jsonrpc":"2.0","id":1,"result":{"content":[` + item + `]}}`
			var m struct {
				Result struct{ Content []struct{ Text, Data string } }
			}
			if err := json.Unmarshal([]byte(msg), &m); err != nil {
				t.Fatal(err)
			}
			want := []byte(m.Result.Content[0].Text)
			if c.image {
				var err error
				if want, err = base64.StdEncoding.DecodeString(m.Result.Content[0].Data); err != nil {
					want, _ = base64.RawStdEncoding.DecodeString(m.Result.Content[0].Data)
				}
			}
			rw := New(testService(t, nil), threshold{0}, Options{Spills: Registry{}, StageDir: t.TempDir(), StageMax: c.stageMax})
			sp, err := spill.New(spill.Options{Dir: t.TempDir(), Threshold: 1 << 10, Tap: rw.Tap})
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Close()
			raw, err := sp.Read(strings.NewReader(msg), 0)
			if err != nil {
				t.Fatal(err)
			}
			if alive := sp.Alive(); c.kept != (alive == 0) || !c.kept && alive != int64(len(c.value)) {
				t.Fatalf("%d bytes in spill files (kept %v, the string is %d)", alive, c.kept, len(c.value))
			}
			var out bytes.Buffer
			if err := spill.Expand(&out, raw); err != nil || out.String() != msg {
				t.Fatalf("expanded (%v) to %d bytes, not the message's %d (first difference at %d)", err, out.Len(), len(msg), firstDiff(out.Bytes(), []byte(msg)))
			}
			_, stored, err := rw.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, jsonrpc.Path(raw, "result"))
			if err != nil || len(stored) != 1 || stored[0].SHA256 != sum(want) {
				t.Fatalf("stored %v, %v; want the value's %d bytes", stored, err, len(want))
			}
			spill.Release(raw)
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A message that fails to read, inside a kept string or after one (lost
// or not), leaves nothing behind: no early work, nothing staged.
func TestEarlyKeptMessageFails(t *testing.T) {
	text := strings.Repeat(`abc\n`, 100000)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + text,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + text + `\/` + text,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + text + `"}]} x`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + text + `\u0041"}, {"type":"text","text":"` + text + `"}]}]`,
		// Lost past the spill space: the hand-back itself fails.
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + text + text + text + `\/"}]}}`,
	} {
		rw := New(testService(t, nil), threshold{0}, Options{Spills: Registry{}, StageDir: t.TempDir()})
		sp, err := spill.New(spill.Options{Dir: t.TempDir(), Threshold: 1 << 10, Tap: rw.Tap, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sp.Read(strings.NewReader(msg), 0); err == nil {
			t.Fatal("a broken message read")
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(rw.early) != 0 || rw.stage.used.Load() != 0 || sp.Alive() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("after a failed read: %d early works, %d bytes staged, %d spilled", len(rw.early), rw.stage.used.Load(), sp.Alive())
			}
			time.Sleep(10 * time.Millisecond)
		}
		sp.Close()
	}
}

// chunked reads at most n bytes at a time.
type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// FuzzEarlyKept: a string kept as it arrives, however it is spelt, cut
// and staged (kept whole, handed back when it stops being canonical or
// the staging is out of room), expands to the message byte for byte and
// stores its value as the general decoding gives it (nothing when that
// says the data is not base64); nothing
// stays staged or spilled once it is released.
func FuzzEarlyKept(f *testing.F) {
	row := `{\"row\":1,\"v\":\"a\\tb é \u003c\"}\n`
	b64 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("any carnal pleasure.", 20)))
	for _, seed := range []struct {
		value string
		image bool
	}{
		{strings.Repeat(row, 20), false},
		{strings.Repeat(row, 10) + `\/` + strings.Repeat(row, 10), false},
		{strings.Repeat(row, 10) + `\u0041` + "\xff", false},
		{strings.Repeat("<&>", 40) + `\u003c`, false},
		{strings.Repeat(`a\u2028b \u2029`, 40) + "\u2029", false},
		{b64, true},
		{b64[:200] + `\/` + b64[200:], true},
		{strings.TrimRight(b64, "="), true},
		{b64[:201] + "=" + b64[202:], true},
	} {
		f.Add(seed.value, seed.image, uint8(7), uint8(0))
		f.Add(seed.value, seed.image, uint8(200), uint8(3))
	}
	f.Fuzz(func(t *testing.T, value string, image bool, size, stage uint8) {
		item := `{"type":"text","text":"` + value + `"}`
		if image {
			item = `{"type":"image","mimeType":"image/x-raw","data":"` + value + `"}`
		}
		msg := `{"jsonrpc":"2.0","id":1,"result":{"content":[` + item + `]}}`
		if !json.Valid([]byte(msg)) {
			return
		}
		// The value as the store decodes a string that was not kept.
		dec := spill.DecodeText(strings.NewReader(value))
		if image {
			dec = spill.DecodeBase64(strings.NewReader(value))
		}
		want, err := io.ReadAll(dec)
		decodes := err == nil
		rw := New(testService(t, nil), threshold{0}, Options{Spills: Registry{}, StageDir: t.TempDir(), StageMax: int64(stage) * 64, TextThreshold: 8, BinaryThreshold: 8})
		sp, err := spill.New(spill.Options{Dir: t.TempDir(), Threshold: 64, Tap: rw.Tap})
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		raw, err := sp.Read(&chunked{strings.NewReader(msg), int(size) + 1}, 0)
		if err != nil {
			t.Fatalf("%q: %v", msg, err)
		}
		var out bytes.Buffer
		if err := spill.Expand(&out, raw); err != nil || out.String() != msg {
			t.Fatalf("%q expanded (%v) to %q", msg, err, out.Bytes())
		}
		_, stored, err := rw.Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, jsonrpc.Path(raw, "result"))
		switch {
		case err != nil:
			t.Fatalf("%q: %v", msg, err)
		case decodes && (len(stored) > 1 || len(stored) == 1 && stored[0].SHA256 != sum(want)):
			t.Fatalf("%q: stored %v, want the value's %d bytes", msg, stored, len(want))
		case decodes && len(stored) == 0 && len(want) >= 64: // over the thresholds
			t.Fatalf("%q: nothing stored", msg)
		case !decodes && len(stored) != 0:
			t.Fatalf("%q: stored %v from data that is not base64", msg, stored)
		}
		spill.Release(raw)
		deadline := time.Now().Add(10 * time.Second)
		for rw.stage.used.Load() != 0 || sp.Alive() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%q: %d bytes staged, %d spilled after the release", msg, rw.stage.used.Load(), sp.Alive())
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// A value handed back is spelt from its staged copy in reads of 48 KiB;
// in TextLS a U+2028 that one read cuts is still spelt \u2028, not as
// itself (the spill file got 3 bytes fewer than it was owed).
func TestHandBackWholeCharacters(t *testing.T) {
	st := &stager{svc: testService(t, nil), dir: t.TempDir(), max: 1 << 30}
	for _, at := range []int{48<<10 - 1, 48<<10 - 2, 48<<10 - 3, 48 << 10} {
		value := []byte(strings.Repeat("a", at) + "\u2028b\u2029" + strings.Repeat("c", 50<<10))
		stg := st.create()
		if !stg.add(value) {
			t.Fatal("staging failed")
		}
		var got bytes.Buffer
		e := &early{}
		err := e.handTo(handback{&got, spill.TextLS}, &earlySink{text: true, stg: stg}, int64(len(value)), nil, nil)
		stg.drop()
		if want := spill.Spell(nil, value, spill.TextLS); err != nil || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("U+2028 at %d: handed back %d bytes, %v; want %d (first difference at %d)", at, got.Len(), err, len(want), firstDiff(got.Bytes(), want))
		}
	}
}
