package preview

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func previewOf(o Options, data []byte) Preview {
	b := New(o)
	b.Write(data)
	return b.Preview()
}

// TestTopValues: a low-cardinality field lists every value with its
// count, as counted from the fixture by encoding/json.
func TestTopValues(t *testing.T) {
	data := readFixture(t, "db_envelope.json")
	var env struct {
		Data struct {
			Statements []struct{ Rows []map[string]any }
		}
	}
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	pv := previewOf(Options{}, data)
	for _, col := range []string{"status", "region"} {
		counts := map[string]int64{}
		for _, r := range env.Data.Statements[0].Rows {
			counts[r[col].(string)]++
		}
		var c *Column
		for i := range pv.Facts.Columns {
			if pv.Facts.Columns[i].Name == col {
				c = &pv.Facts.Columns[i]
			}
		}
		if c == nil {
			t.Fatalf("no column %s", col)
		}
		if len(c.Top) != len(counts) {
			t.Errorf("%s: %d top values, want %d", col, len(c.Top), len(counts))
		}
		for _, v := range c.Top {
			if counts[v.Value] != v.Count {
				t.Errorf("%s=%s: %d, want %d", col, v.Value, v.Count, counts[v.Value])
			}
			if s := fmt.Sprintf("%q ×%d", v.Value, counts[v.Value]); !strings.Contains(pv.Text, s) {
				t.Errorf("the text does not state %s", s)
			}
		}
	}
}

// TestDistinctCounts: exact up to the bound, then an estimate close to
// the truth (the hash has no seed: the figure is fixed).
func TestDistinctCounts(t *testing.T) {
	for _, n := range []int{10, distinctExact, 5000, 100000} {
		tb := newTable()
		f := tb.field("x")
		for i := range 2 * n {
			f.add(tString, fmt.Sprintf("user-%d", i%n))
			tb.count(tObject)
		}
		c := tb.column(f)
		if n <= distinctExact {
			if !c.DistinctExact || c.Distinct != int64(n) {
				t.Errorf("%d values: %d (exact %v)", n, c.Distinct, c.DistinctExact)
			}
			continue
		}
		if c.DistinctExact {
			t.Errorf("%d values counted as exact", n)
		}
		if off := float64(c.Distinct-int64(n)) / float64(n); off > 0.15 || off < -0.15 {
			t.Errorf("%d distinct values estimated as %d", n, c.Distinct)
		}
	}
}

// TestDistinctEstimateAccuracy: past the exact bound, the estimate of
// values of several shapes (ids, integers, decimals, timestamps, UUIDs,
// emails), from 300 to 40,000 distinct values each given twice, is off
// by 5% or less on average and by 15% at most (the estimator keeps 256
// hashes: its standard error is about 6%). The inputs are fixed, and so
// is the hash: the figures are too.
func TestDistinctEstimateAccuracy(t *testing.T) {
	shapes := []func(i int) string{
		func(i int) string { return fmt.Sprintf("user-%d", i) },
		func(i int) string { return fmt.Sprint(i) },
		func(i int) string { return fmt.Sprintf("%d.%02d", i/100, i%100) },
		func(i int) string {
			return fmt.Sprintf("2025-%02d-%02dT%02d:%02d:%02dZ", 1+i/2419200%12, 1+i/86400%28, i/3600%24, i/60%60, i%60)
		},
		func(i int) string { return fmt.Sprintf("%08x-4a1b-8c2d-9e3f-%012x", uint32(i*2654435761), i) },
		func(i int) string { return fmt.Sprintf("c%d@example.com", i*7) },
	}
	var sum float64
	var sets int
	for s, shape := range shapes {
		for _, n := range []int{300, 700, 1500, 4000, 10000, 40000} {
			tb := newTable()
			f := tb.field("x")
			for i := range 2 * n {
				f.add(tString, shape(s*1000003+i%n))
				tb.count(tObject)
			}
			c := tb.column(f)
			off := math.Abs(float64(c.Distinct-int64(n)) / float64(n))
			if c.DistinctExact || off > 0.15 {
				t.Errorf("shape %d: %d distinct values estimated as %d (exact %v)", s, n, c.Distinct, c.DistinctExact)
			}
			sum += off
			sets++
		}
	}
	if mean := sum / float64(sets); mean > 0.05 {
		t.Errorf("estimates are off by %.1f%% on average, want 5%% at most", 100*mean)
	} else {
		t.Logf("estimates are off by %.1f%% on average", 100*mean)
	}
}

// TestLogFacts counts lines and levels of the application log with
// strings functions and compares.
func TestLogFacts(t *testing.T) {
	data := readFixture(t, "app.log")
	pv := previewOf(Options{MimeType: "text/plain"}, data)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := map[string]int64{}
	var firstErr string
	for i, l := range lines {
		for _, lv := range []string{"INFO", "DEBUG", "WARN", "ERROR"} {
			if strings.Contains(l, " "+lv+" ") {
				want[lv]++
				if lv == "ERROR" && firstErr == "" {
					firstErr = fmt.Sprintf("line %d: %s", i+1, l)
				}
			}
		}
	}
	if pv.Facts.Lines != int64(len(lines)) || pv.Facts.Format != "log" {
		t.Errorf("%d lines, format %q; want %d, log", pv.Facts.Lines, pv.Facts.Format, len(lines))
	}
	for lv, n := range want {
		if pv.Facts.Levels[lv] != n || !strings.Contains(pv.Text, fmt.Sprintf("%s %d", lv, n)) {
			t.Errorf("level %s: %d, want %d", lv, pv.Facts.Levels[lv], n)
		}
	}
	if !strings.Contains(pv.Text, "First errors:\n"+firstErr+"\n") {
		t.Errorf("the text does not start its errors with %q", firstErr)
	}
	if !strings.Contains(pv.Text, "Last lines (of 2504):\n") || !strings.Contains(pv.Text, lines[len(lines)-1]) {
		t.Errorf("the text does not end with the last line %q", lines[len(lines)-1])
	}
}

// TestDocumentFacts: titles and outlines of the Markdown report and the
// HTML page.
func TestDocumentFacts(t *testing.T) {
	md := previewOf(Options{Name: "report.md"}, readFixture(t, "report.md"))
	if md.Kind != KindMarkdown || md.Facts.Title != "Quarterly infrastructure report, Q3 2025" {
		t.Errorf("markdown: %s, title %q", md.Kind, md.Facts.Title)
	}
	if !strings.Contains(md.Text, "## Incidents\n### Incidents: Summary\n") {
		t.Errorf("markdown outline missing:\n%s", md.Text)
	}
	page := previewOf(Options{}, readFixture(t, "page.html"))
	if page.Kind != KindHTML || page.Facts.Title != "Release notes – Acme Cloud 4.2" {
		t.Errorf("html: %s, title %q", page.Kind, page.Facts.Title)
	}
	if strings.Contains(page.Text, "hidden") || strings.Contains(page.Text, "dataLayer") {
		t.Errorf("comments or scripts leak into the text:\n%s", page.Text)
	}
}

// TestAudioFacts reads the WAV fixture's header fields with
// encoding/binary.
func TestAudioFacts(t *testing.T) {
	data := readFixture(t, "tone.wav")
	pv := previewOf(Options{}, data)
	ch := int(binary.LittleEndian.Uint16(data[22:]))
	rate := int(binary.LittleEndian.Uint32(data[24:]))
	secs := float64(binary.LittleEndian.Uint32(data[40:])) / float64(binary.LittleEndian.Uint32(data[28:]))
	if pv.Kind != KindAudio || pv.Facts.Channels != ch || pv.Facts.SampleRate != rate || pv.Facts.Seconds != secs {
		t.Errorf("%s %d ch %d Hz %v s, want %d ch %d Hz %v s", pv.Kind, pv.Facts.Channels, pv.Facts.SampleRate, pv.Facts.Seconds, ch, rate, secs)
	}
	if !strings.Contains(pv.Text, fmt.Sprintf("%.2f s", secs)) {
		t.Errorf("no duration in %q", pv.Text)
	}
}

// TestMalformedJSON: a cut or broken document still gets its figures,
// and the text says where it broke.
func TestMalformedJSON(t *testing.T) {
	pv := previewOf(Options{}, []byte(`[{"a":1},{"a":2},{"a":`))
	if pv.Kind != KindJSON || pv.Facts.Rows != 2 || !strings.HasPrefix(pv.Text, "Malformed JSON at byte 22: the input ends inside a value") {
		t.Errorf("cut array: %s, %d rows:\n%s", pv.Kind, pv.Facts.Rows, pv.Text)
	}
	// Broken after the sniffed head: still JSON, marked malformed.
	big := bytes.Repeat([]byte(`{"a":1},`), sniffSize/8+10)
	big = append(append([]byte("["), big...), "oops]"...)
	pv = previewOf(Options{}, big)
	if pv.Kind != KindJSON || pv.Facts.Malformed == "" || !strings.Contains(pv.Text, "Malformed JSON") {
		t.Errorf("broken after the head: %s %q", pv.Kind, pv.Facts.Malformed)
	}
	// Broken inside the head: not JSON at all.
	if pv := previewOf(Options{}, []byte("[INFO] starting\n[INFO] ready\n")); pv.Kind != KindText {
		t.Errorf("bracketed log read as %s", pv.Kind)
	}
}

// TestTreeArray: an array of root nodes names the roots (a, a1, a2, b,
// b1, b11: 6 nodes; a1, a2 with no children and b11 are the 3 leaves).
func TestTreeArray(t *testing.T) {
	pv := previewOf(Options{}, []byte(`[{"name":"a","children":[{"name":"a1"},{"name":"a2","children":[]}]},{"name":"b","children":[{"name":"b1","children":[{"name":"b11"}]}]}]`))
	tr := pv.Facts.Tree
	if tr == nil || tr.Nodes != 6 || tr.Leaves != 3 || tr.Depth != 2 || !slices.Equal(tr.TopNames, []string{"a", "b"}) {
		t.Fatalf("tree %+v\n%s", tr, pv.Text)
	}
}

// pngHeader is a PNG signature and an IHDR for w×h, enough for
// DecodeConfig.
func pngHeader(w, h uint32, depth byte) []byte {
	ihdr := binary.BigEndian.AppendUint32([]byte("IHDR"), w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, depth, 6, 0, 0, 0)
	b := append([]byte("\x89PNG\r\n\x1a\n"), 0, 0, 0, 13)
	b = append(b, ihdr...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
}

// TestImageBounds: too many pixels gives dimensions and no thumbnail; a
// transparent image is thumbnailed over white.
func TestImageBounds(t *testing.T) {
	pv := previewOf(Options{Thumbnail: true}, pngHeader(10000, 10000, 8))
	if pv.Facts.Width != 10000 || pv.Thumbnail != nil || !strings.Contains(pv.Text, "10000×10000") || !strings.Contains(pv.Text, "Too many pixels") {
		t.Errorf("huge image: %+v %q", pv.Facts, pv.Text)
	}
	// What counts is the decoded size: 3000×3000 is 36 MB of 8-bit RGBA
	// (decoded: this header has no pixels, so no thumbnail either) but
	// 72 MB of 16-bit.
	if pv := previewOf(Options{Thumbnail: true}, pngHeader(3000, 3000, 8)); strings.Contains(pv.Text, "Too many") {
		t.Errorf("8-bit 3000×3000 refused: %q", pv.Text)
	}
	if pv := previewOf(Options{Thumbnail: true}, pngHeader(3000, 3000, 16)); !strings.Contains(pv.Text, "Too many pixels") {
		t.Errorf("16-bit 3000×3000 not refused: %q", pv.Text)
	}
	img := image.NewNRGBA(image.Rect(0, 0, 1200, 600))
	for y := range 600 {
		for x := range 600 {
			img.SetNRGBA(x, y, color.NRGBA{200, 0, 0, 255}) // left half red, right transparent
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	pv = previewOf(Options{Thumbnail: true, ThumbMax: 100}, buf.Bytes())
	if pv.Thumbnail == nil {
		t.Fatalf("no thumbnail: %q", pv.Text)
	}
	th, _, err := image.Decode(bytes.NewReader(pv.Thumbnail.Data))
	if err != nil || th.Bounds().Dx() != 100 || th.Bounds().Dy() != 50 {
		t.Fatalf("thumbnail %v %v", th.Bounds(), err)
	}
	if r, g, b, _ := th.At(90, 25).RGBA(); r>>8 != 255 || g>>8 != 255 || b>>8 != 255 {
		t.Errorf("transparent area is %d,%d,%d, want white", r>>8, g>>8, b>>8)
	}
	if r, g, _, _ := th.At(10, 25).RGBA(); r>>8 != 200 || g>>8 != 0 {
		t.Errorf("red area is %d,%d, want 200,0", r>>8, g>>8)
	}
}

// TestBudgetDropsDetailFirst: a small budget keeps the head line and the
// field statistics before sample rows.
func TestBudgetDropsDetailFirst(t *testing.T) {
	data := readFixture(t, "db_envelope.json")
	pv := previewOf(Options{Budget: 1000}, data)
	if len(pv.Text) > 1000 {
		t.Fatalf("%d bytes", len(pv.Text))
	}
	if !strings.HasPrefix(pv.Text, "JSON object of 2 keys") || !strings.Contains(pv.Text, "- amount: number") {
		t.Errorf("head or fields dropped:\n%s", pv.Text)
	}
	if strings.Contains(pv.Text, "Last row") {
		t.Errorf("sample rows kept before fields:\n%s", pv.Text)
	}
}

// TestContentOverDeclaredType: CSV declared as JSON is still a table;
// JSON declared as CSV is still JSON; bytes declared as text are binary.
func TestContentOverDeclaredType(t *testing.T) {
	csvData := readFixture(t, "orders.csv")
	if pv := previewOf(Options{MimeType: "application/json"}, csvData); pv.Kind != KindCSV {
		t.Errorf("CSV declared JSON: %s", pv.Kind)
	}
	if pv := previewOf(Options{MimeType: "text/csv"}, []byte(`[{"a":1}]`)); pv.Kind != KindJSON {
		t.Errorf("JSON declared CSV: %s", pv.Kind)
	}
	if pv := previewOf(Options{MimeType: "text/plain"}, readFixture(t, "random.bin")); pv.Kind != KindBinary {
		t.Errorf("random bytes declared text: %s", pv.Kind)
	}
	if pv := previewOf(Options{}, nil); pv.Kind != KindEmpty || pv.Text == "" {
		t.Errorf("empty: %s %q", pv.Kind, pv.Text)
	}
}

// TestWriteAfterPreview: a finished Builder refuses bytes and gives the
// same preview again without computing it again.
func TestWriteAfterPreview(t *testing.T) {
	b := New(Options{Thumbnail: true})
	b.Write(readFixture(t, "screenshot.png"))
	first := b.Preview()
	if _, err := b.Write([]byte("y")); !errors.Is(err, ErrFinished) {
		t.Errorf("err %v, want ErrFinished", err)
	}
	again := b.Preview()
	if !reflect.DeepEqual(again, first) {
		t.Errorf("a second Preview differs:\n%s\nfirst:\n%s", render(again), render(first))
	}
	// Not computed again: the same thumbnail, not a second encoding.
	if &again.Thumbnail.Data[0] != &first.Thumbnail.Data[0] {
		t.Error("the second Preview decoded and encoded the image again")
	}
}

// TestByteOrderMark: a BOM does not break JSON, nor stick to the first
// CSV column's name.
func TestByteOrderMark(t *testing.T) {
	pv := previewOf(Options{}, []byte("\xef\xbb\xbf[{\"a\":1},{\"a\":2}]"))
	if pv.Kind != KindJSON || pv.Facts.Rows != 2 || pv.Facts.Malformed != "" {
		t.Errorf("JSON with a BOM: %s, %d rows, %q", pv.Kind, pv.Facts.Rows, pv.Facts.Malformed)
	}
	pv = previewOf(Options{}, []byte("\xef\xbb\xbfid,name\n1,a\n2,b\n3,c\n"))
	if pv.Kind != KindCSV || len(pv.Facts.Columns) != 2 || pv.Facts.Columns[0].Name != "id" {
		t.Errorf("CSV with a BOM: %s, %+v", pv.Kind, pv.Facts.Columns)
	}
}

// webpHeader builds the first bytes of a WebP of the given chunk kind.
func webpHeader(kind string, w, h int) []byte {
	b := []byte("RIFF\x00\x00\x00\x00WEBP" + kind + "\x0a\x00\x00\x00")
	switch kind {
	case "VP8X":
		b = append(b, 0, 0, 0, 0, byte(w-1), byte((w-1)>>8), byte((w-1)>>16), byte(h-1), byte((h-1)>>8), byte((h-1)>>16))
	case "VP8L":
		b = binary.LittleEndian.AppendUint32(append(b, 0x2f), uint32(w-1)|uint32(h-1)<<14)
		b = append(b, 0)
	case "VP8 ":
		b = append(b, 0, 0, 0, 0x9d, 0x01, 0x2a)
		b = binary.LittleEndian.AppendUint16(b, uint16(w))
		b = binary.LittleEndian.AppendUint16(b, uint16(h))
	}
	return append(b, make([]byte, 16)...)
}

// TestWebPSize: with no WebP decoder in the standard library, the size
// comes from the header, for each of the three chunk kinds.
func TestWebPSize(t *testing.T) {
	for _, c := range []struct {
		kind string
		w, h int
	}{{"VP8X", 3000, 2000}, {"VP8X", 256, 1}, {"VP8L", 100, 50}, {"VP8 ", 1920, 1080}} {
		pv := previewOf(Options{Thumbnail: true}, webpHeader(c.kind, c.w, c.h))
		if pv.Kind != KindImage || pv.Facts.Width != c.w || pv.Facts.Height != c.h || !strings.Contains(pv.Text, fmt.Sprintf("%d×%d px", c.w, c.h)) {
			t.Errorf("%s %d×%d: %s %d×%d %q", c.kind, c.w, c.h, pv.Kind, pv.Facts.Width, pv.Facts.Height, pv.Text)
		}
	}
}

// TestRootMap: an object of thousands of objects keyed by id lists a few
// keys, then describes its values as rows.
func TestRootMap(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("{")
	for i := range 3000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"user-%d":{"id":%d,"plan":%q}`, i, i, []string{"free", "pro"}[i%2])
	}
	b.WriteString("}")
	pv := previewOf(Options{}, b.Bytes())
	if len(pv.Text) > DefaultBudget || pv.Facts.Rows != 3000 || pv.Facts.Path != "" || len(pv.Facts.Columns) != 2 {
		t.Fatalf("%d rows at %q, %d columns:\n%s", pv.Facts.Rows, pv.Facts.Path, len(pv.Facts.Columns), pv.Text)
	}
	for _, s := range []string{"JSON object of 3000 keys", "more keys", "- id: int, 0..2999", `- plan: string, values "free" ×1500, "pro" ×1500`, "First entries:\n" + `"user-0":{"id":0,"plan":"free"}`} {
		if !strings.Contains(pv.Text, s) {
			t.Errorf("no %q in:\n%s", s, pv.Text)
		}
	}
}

// TestArchiveFacts reads the zip fixture with archive/zip and the gzip
// one with compress/gzip, and holds the previews to them.
func TestArchiveFacts(t *testing.T) {
	data := readFixture(t, "bundle.zip")
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var size uint64
	for _, f := range zr.File {
		names = append(names, f.Name)
		size += f.UncompressedSize64
	}
	pv := previewChunks(Options{}, data, 100)
	want := fmt.Sprintf("%d entries, %s uncompressed: %s.", len(names), humanSize(int64(size)), strings.Join(names, ", "))
	if !strings.HasSuffix(pv.Text, want) {
		t.Errorf("zip: %q, want it to end %q", pv.Text, want)
	}

	data = readFixture(t, "export.csv.gz")
	gr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, gr)
	if err != nil {
		t.Fatal(err)
	}
	pv = previewChunks(Options{}, data, 100)
	want = fmt.Sprintf("of %q, %s uncompressed.\n", gr.Name, humanSize(n))
	if first, _, _ := strings.Cut(pv.Text, "\n"); !strings.HasSuffix(first+"\n", want) {
		t.Errorf("gzip: %q, want its first line to end %q", pv.Text, want)
	}
}

// TestPDFPages counts page objects across write boundaries, and not the
// /Pages tree nodes.
func TestPDFPages(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n1 0 obj << /Type /Pages /Count 3 >> endobj\n")
	for i := range 3 {
		fmt.Fprintf(&b, "%d 0 obj << /Type%s/Page /Parent 1 0 R >> endobj\n", i+2, strings.Repeat(" ", i*7))
	}
	for _, chunk := range []int{1, 5, 1 << 20} {
		if pv := previewChunks(Options{}, b.Bytes(), chunk); pv.Facts.Format != "pdf" || !strings.Contains(pv.Text, "3 pages") {
			t.Errorf("writes of %d: %q", chunk, pv.Text)
		}
	}
}
