package preview

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// addCorpusSeeds adds the head of every corpus fixture as a seed.
func addCorpusSeeds(f *testing.F, n int, add func(data []byte)) {
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		add(b[:min(len(b), n)])
	}
}

var mimes = []string{"", "application/json", "text/csv", "text/tab-separated-values", "text/plain", "text/markdown", "text/html", "image/png"}

// FuzzBuilder runs the whole engine on any bytes: no panic, the budget
// holds, the text is UTF-8, and writing in two parts gives the same
// preview as one write.
func FuzzBuilder(f *testing.F) {
	for _, s := range []string{"", "{", "[1,2", `{"a":[{"b":1}]}`, "a,b\n1,2\n", "\x89PNG\r\n\x1a\n", "RIFF\x00\x00\x00\x00WAVEfmt ", "# t\n## u\n", "<html><title>x"} {
		f.Add([]byte(s), uint8(0), uint16(100), 3)
	}
	addCorpusSeeds(f, 2048, func(b []byte) { f.Add(b, uint8(1), uint16(300), len(b)/2) })
	f.Fuzz(func(t *testing.T, data []byte, mime uint8, budget uint16, split int) {
		o := Options{MimeType: mimes[int(mime)%len(mimes)], Budget: int(budget), Thumbnail: true, ThumbMax: 64}
		whole := New(o)
		whole.Write(data)
		pv := whole.Preview()
		limit := max(int(budget), 64)
		if budget == 0 {
			limit = DefaultBudget
		}
		if len(pv.Text) > limit {
			t.Fatalf("%d bytes of text for a budget of %d", len(pv.Text), limit)
		}
		if !utf8.ValidString(pv.Text) {
			t.Fatalf("text is not UTF-8: %q", pv.Text)
		}
		if split < 0 || split > len(data) {
			split = len(data) / 2
		}
		parts := New(o)
		parts.Write(data[:split])
		parts.Write(data[split:])
		if got := parts.Preview(); !reflect.DeepEqual(got, pv) {
			t.Fatalf("split at %d: %q, whole: %q", split, got.Text, pv.Text)
		}
	})
}

// FuzzJSONScanner: the incremental scanner accepts what encoding/json
// accepts, agrees on the count of a top-level array, and never panics.
func FuzzJSONScanner(f *testing.F) {
	for _, s := range []string{`[]`, `{}`, `[1,-2.5e3,"x\u00e9\n",true,false,null]`, `{"a":{"b":[{"c":1}]}}`, `"\ud83d\ude00"`, `[[[[[]]]]]`, `{"a":1}{"a":2}`, `[1,]`, `{"a" 1}`, `01`} {
		f.Add([]byte(s))
	}
	addCorpusSeeds(f, 4096, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, data []byte) {
		a := newJSON()
		a.write(data)
		a.finishLex()
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		if a.err != "" {
			t.Fatalf("valid JSON rejected: %s", a.err)
		}
		if arr, ok := v.([]any); ok && a.tops == 1 {
			if tb := a.table(""); tb == nil || tb.rows != int64(len(arr)) {
				t.Fatalf("array of %d, scanner says %v", len(arr), tb)
			}
		}
	})
}

// FuzzJSONWrites: the JSON analyzer gives the same sections and facts
// for data written at once and in writes of 1 to 64 bytes. Its fast
// paths read a token, a row's member, an array of scalars where it lies
// whole in a write; the lexer reads one cut by a write's end.
func FuzzJSONWrites(f *testing.F) {
	for _, doc := range chunkDocs(f) {
		f.Add([]byte(doc), uint8(6))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		n := int(chunk%64) + 1
		wantPV, wantSecs := jsonInWrites(data, len(data))
		pv, secs := jsonInWrites(data, n)
		if !reflect.DeepEqual(pv, wantPV) || !reflect.DeepEqual(secs, wantSecs) {
			t.Fatalf("writes of %d bytes: %+v\n%v\nall at once: %+v\n%v", n, pv.Facts, secs, wantPV.Facts, wantSecs)
		}
	})
}

// FuzzCSV: the reader counts the records encoding/csv reads, when
// encoding/csv reads them strictly, and never panics.
func FuzzCSV(f *testing.F) {
	for _, s := range []string{"a,b\n1,2\n", "a,b\r\n\"x,y\",\"q\"\"q\"\r\n", "a\n\"multi\nline\"\n", "a,b\n1\n", "\"unterminated\n"} {
		f.Add([]byte(s), byte(','))
	}
	addCorpusSeeds(f, 4096, func(b []byte) { f.Add(b, byte('\t')) })
	f.Fuzz(func(t *testing.T, data []byte, d byte) {
		if d == '"' || d == '\n' || d == '\r' || d >= utf8.RuneSelf || d == 0 {
			d = ','
		}
		a := newCSV(d)
		a.write(data)
		pv := Preview{Kind: KindCSV}
		a.finish(&pv)
		r := csv.NewReader(bytes.NewReader(data))
		r.Comma, r.FieldsPerRecord = rune(d), -1
		recs, err := r.ReadAll()
		if err != nil || !utf8.Valid(data) || bytes.Contains(data, []byte("\r")) || len(recs) == 0 {
			return
		}
		if len(recs[0]) > maxFields || utf8.RuneCount(data) != len(data) {
			return
		}
		if pv.Facts.Rows != int64(len(recs)-1) {
			t.Fatalf("%d rows, encoding/csv reads %d", pv.Facts.Rows, len(recs)-1)
		}
	})
}

// FuzzSniffDelim: no panic, and a found delimiter is one of the four.
func FuzzSniffDelim(f *testing.F) {
	f.Add([]byte("a,b\n1,2\n3,4\n"), true)
	f.Add([]byte("a\tb\n\"1\t\"\t2\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, complete bool) {
		if d := sniffDelim(data, complete, false); d != 0 && !strings.ContainsRune(",\t;|", rune(d)) {
			t.Fatalf("delimiter %q", d)
		}
	})
}

// FuzzWAVHeader: no panic; a duration is finite and not negative. The
// other header readers (FLAC, zip, gzip, WebP, PDF pages) run on the
// same input.
func FuzzWAVHeader(f *testing.F) {
	f.Add([]byte("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00\xb7\x0b\x00\xcf\x07\x00"), int64(100))
	f.Add(readFixtureF(f, "tone.wav")[:64], int64(24044))
	zipData := readFixtureF(f, "bundle.zip")
	f.Add(zipData, int64(len(zipData)))
	f.Add(readFixtureF(f, "export.csv.gz")[:64], int64(64))
	f.Add([]byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x02\x00\x44\xac\x00\x00\x10\xb1\x02\x00\x04\x00\x10\x00data\xff\xff\xff\xff"), int64(1<<20))
	f.Add([]byte("fLaC\x00\x00\x00\x22\x10\x00\x10\x00\x00\x00\x00\x00\x00\x00\x0a\xc4\x42\xf0\x00\x00\xac\x44"), int64(1000))
	f.Fuzz(func(t *testing.T, data []byte, size int64) {
		if w, ok := parseWAV(data); ok {
			if s := w.seconds(size); s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
				t.Fatalf("%v seconds", s)
			}
			_ = w.String(size)
		}
		parseFLAC(data)
		zipFirstName(data)
		if w, h, ok := webpSize(data); ok && (w < 0 || h < 0) {
			t.Fatalf("webp %d×%d", w, h)
		}
		if z, ok := parseZipEnd(data, size); ok {
			_ = z.String()
		}
		gzipName(data)
		var pdf binAn
		pdf.countPages(data)
	})
}

func readFixtureF(f *testing.F, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzHTML: the tag scanner never panics and bounds what it returns.
func FuzzHTML(f *testing.F) {
	f.Add("<html><title>a &amp; b</title><h1>x</h1><body>t</body>")
	f.Add("<!-- unterminated")
	f.Add("<script>if(a<b){}</script><h2>y")
	f.Fuzz(func(t *testing.T, s string) {
		title, heads, text := scanHTML(s)
		if len(title) > 150 || len(heads) > maxHeadings || len(text) > excerptBytes {
			t.Fatalf("unbounded: %d, %d, %d", len(title), len(heads), len(text))
		}
	})
}

// FuzzThumbnail: any decodable image shrinks to fit, whatever its shape.
func FuzzThumbnail(f *testing.F) {
	// Small seeds: the decoders run instrumented, slowly.
	src := image.NewNRGBA(image.Rect(0, 0, 40, 30))
	for i := range src.Pix {
		src.Pix[i] = byte(i * 7)
	}
	var p, j bytes.Buffer
	png.Encode(&p, src)
	jpeg.Encode(&j, src, nil)
	f.Add(p.Bytes(), 16)
	f.Add(j.Bytes(), 7)
	f.Fuzz(func(t *testing.T, data []byte, side int) {
		side = 1 + abs(side)%600
		if len(data) > 64<<10 {
			return
		}
		cfg, format, err := imageConfig(data)
		if err != nil || cfg.Width*cfg.Height > 250_000 {
			return
		}
		th, err := thumbnail(t.Context(), inMemory(data), format, side)
		if err != nil {
			return
		}
		if th.Width > max(side, cfg.Width) && th.Width > side || th.Height > max(side, cfg.Height) && th.Height > side {
			t.Fatalf("%d×%d for side %d", th.Width, th.Height, side)
		}
	})
}

func abs(x int) int {
	if x < 0 {
		if x == math.MinInt {
			return 0
		}
		return -x
	}
	return x
}

var _ io.Writer = (*Builder)(nil)

func imageConfig(data []byte) (image.Config, string, error) {
	return image.DecodeConfig(bytes.NewReader(data))
}

// FuzzNumber: jsonNumber accepts what encoding/json reads as a number and
// nothing else, and parseNumber, and scanNumber for a number, give
// ParseFloat's value, bit for bit.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "01", "1.", ".5", "-12.5e3", "1E+2", "+1", "123456789012345", "1234567890123456", "9007199254740993", "1e400", "-1e400", "1e-400", "-0.0", "0.000000000000001", "999999999999999.9", "12.50", "-", "0x10", "1_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n json.Number
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		isNum := d.Decode(&n) == nil && d.InputOffset() == int64(len(s)) && n.String() == s
		if got := jsonNumber([]byte(s)); got != isNum {
			t.Fatalf("jsonNumber(%q) = %v, encoding/json: %v", s, got, isNum)
		}
		want, err := strconv.ParseFloat(s, 64)
		got, ok := parseNumber(s)
		if ok != (err == nil) || ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseNumber(%q) = %v, %v; ParseFloat: %v, %v", s, got, ok, want, err)
		}
		if isNum, _, got := scanNumber([]byte(s)); isNum && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("scanNumber(%q) = %v; ParseFloat: %v", s, got, want)
		}
	})
}
