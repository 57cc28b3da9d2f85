package spill

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
)

// benchRead measures Read over in, which it spills and releases each time.
func benchRead(b *testing.B, in []byte) { benchReadWith(b, in, Options{MaxBytes: 1 << 30}) }

// benchReadWith is benchRead with o; with a Tap (a Keeper of every
// string) nothing may spill.
func benchReadWith(b *testing.B, in []byte, o Options) {
	s := newSpooler(b, o)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		out, err := s.Read(bytes.NewReader(in), 1<<30)
		if err != nil {
			b.Fatal(err)
		}
		if o.Tap != nil && s.Alive() != 0 {
			b.Fatal("a kept string spilled")
		}
		s.Release(out)
	}
}

// BenchmarkReadString is one 100 MB text item: all of it spills.
func BenchmarkReadString(b *testing.B) {
	var in bytes.Buffer
	in.WriteString(`{"result":{"content":[{"type":"text","text":"`)
	line := bytes.Repeat([]byte("0123456789abcdef "), 6)
	for in.Len() < 100<<20 {
		in.Write(line)
		in.WriteString(`\n`)
	}
	in.WriteString(`"}]},"jsonrpc":"2.0","id":1}`)
	benchRead(b, in.Bytes())
}

// BenchmarkReadBase64 is one 100 MB base64 image item: no escape at all,
// every byte scanned for the string's end.
func BenchmarkReadBase64(b *testing.B) {
	var in bytes.Buffer
	in.WriteString(`{"result":{"content":[{"type":"image","mimeType":"image/png","data":"`)
	// The scanner looks only for the string's end: any letters will do.
	in.WriteString(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("spillway"), 75<<20/8)))
	in.WriteString(`"}]},"jsonrpc":"2.0","id":1}`)
	benchRead(b, in.Bytes())
}

// BenchmarkReadRows is a message with 100 MB of JSON rows in one text
// (the shape of most big text outputs): an escaped quote every few bytes.
func BenchmarkReadRows(b *testing.B) { benchRead(b, rowsInput()) }

// rowsInput is BenchmarkReadRows's message.
func rowsInput() []byte {
	var in bytes.Buffer
	in.WriteString(`{"result":{"content":[{"type":"text","text":"`)
	row := []byte(`{\"id\":12345,\"region\":\"emea\",\"amount\":678,\"note\":\"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijkl\"},\n`)
	for in.Len() < 100<<20 {
		in.Write(row)
	}
	in.WriteString(`"}]},"jsonrpc":"2.0","id":1}`)
	return in.Bytes()
}

// BenchmarkReadRowsKept is BenchmarkReadRows with the text kept by a
// Keeper (as the offloader keeps it): the scanner decodes the string as it
// finds its end, one pass, and writes nothing to the spill file. Set
// beside BenchmarkReadRows plus BenchmarkCanonRows, the two passes it
// took before.
func BenchmarkReadRowsKept(b *testing.B) {
	benchReadWith(b, rowsInput(), Options{Tap: func(string) Tap { return discardKeeper{} }})
}

// discardKeeper keeps every text and forgets it.
type discardKeeper struct{}

func (discardKeeper) Write(p []byte) (int, error)    { return len(p), nil }
func (discardKeeper) End(bool)                       {}
func (discardKeeper) Release()                       {}
func (discardKeeper) Base64() bool                   { return false }
func (discardKeeper) Value([]byte)                   {}
func (discardKeeper) Lost() bool                     { return false }
func (discardKeeper) Handback(io.Writer, Form) error { return nil }
func (discardKeeper) Kept() (io.ReaderAt, bool)      { return bytes.NewReader(nil), true }

// BenchmarkReadArray is 100 MB of small objects: nothing spills, all of it
// stays inline.
func BenchmarkReadArray(b *testing.B) { benchRead(b, arrayInput()) }

// BenchmarkValidArray is encoding/json's Valid over the same input: the
// anchor (jsonrpc.Decode runs it over every message it decodes).
func BenchmarkValidArray(b *testing.B) {
	in := arrayInput()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if !json.Valid(in) {
			b.Fatal("invalid")
		}
	}
}

func arrayInput() []byte {
	var in bytes.Buffer
	in.WriteString(`{"result":{"structuredContent":[`)
	for i := 0; in.Len() < 100<<20; i++ {
		if i > 0 {
			in.WriteByte(',')
		}
		in.WriteString(`{"id":` + strconv.Itoa(i) + `,"name":"row","score":-12.5e3,"ok":true,"tags":["a","b"],"note":null}`)
	}
	in.WriteString(`]},"jsonrpc":"2.0","id":1}`)
	return in.Bytes()
}

// benchDecode spills the JSON string lit and reads it back with read.
func benchDecode(b *testing.B, lit string, read func(*String) io.Reader) {
	s := newSpooler(b, Options{})
	out, err := s.Read(strings.NewReader(lit), 0)
	if err != nil {
		b.Fatal(err)
	}
	x, _ := Lookup(out)
	b.SetBytes(x.Len())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := io.Copy(io.Discard, read(x)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkText decodes a spilled 10 MB string.
func BenchmarkText(b *testing.B) {
	benchDecode(b, `"`+strings.Repeat(`caf\u00e9 \ud83d\ude00 plain text here\n`, 10<<20/40)+`"`, (*String).Text)
}

// BenchmarkTextRows decodes a spilled 10 MB string holding a JSON
// document, the shape of most big text outputs: an escaped quote every
// few bytes.
func BenchmarkTextRows(b *testing.B) {
	row := `{\"id\":12345,\"name\":\"row\",\"score\":-12.5e3,\"ok\":true,\"tags\":[\"a\",\"b\"],\"note\":null},\n`
	benchDecode(b, `"`+strings.Repeat(row, 10<<20/len(row))+`"`, (*String).Text)
}

// BenchmarkTextBase64 decodes a spilled 10 MB string of base64 (an
// image's data): no escapes at all.
func BenchmarkTextBase64(b *testing.B) {
	benchDecode(b, `"`+strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg", 10<<20/100)+`"`, (*String).Base64)
}

// BenchmarkCanonRows is BenchmarkTextRows's string decoded by a Canon, as
// a Keeper decodes it, in 64 KiB chunks.
func BenchmarkCanonRows(b *testing.B) {
	row := `{\"id\":12345,\"name\":\"row\",\"score\":-12.5e3,\"ok\":true,\"tags\":[\"a\",\"b\"],\"note\":null},\n`
	benchCanon(b, []byte(strings.Repeat(row, 10<<20/len(row))), false)
}

// BenchmarkCanonBase64 is 10 MB of base64 decoded by a Canon.
func BenchmarkCanonBase64(b *testing.B) {
	benchCanon(b, []byte(strings.Repeat("QUJDREVGR0hJSktM", 10<<20/16)), true)
}

func benchCanon(b *testing.B, raw []byte, b64 bool) {
	b.SetBytes(int64(len(raw)))
	dst := make([]byte, 0, 64<<10+16)
	for b.Loop() {
		c := NewCanon(b64)
		for p := raw; len(p) > 0; {
			k := min(len(p), 64<<10)
			var ok bool
			if _, ok = c.Next(dst[:0], p[:k]); !ok {
				b.Fatal("refused")
			}
			p = p[k:]
		}
		if _, ok := c.End(dst[:0]); !ok {
			b.Fatal("refused at the end")
		}
	}
}

// BenchmarkSpellingRows reads BenchmarkCanonRows's string back from its
// value, as a kept string is read when it is needed as sent after all
// (Expand of a value kept inline, say), 64 KiB at a time.
func BenchmarkSpellingRows(b *testing.B) {
	row := `{\"id\":12345,\"name\":\"row\",\"score\":-12.5e3,\"ok\":true,\"tags\":[\"a\",\"b\"],\"note\":null},\n`
	raw := []byte(strings.Repeat(row, 10<<20/len(row)))
	c := NewCanon(false)
	val, _ := c.Next(nil, raw)
	var ok bool
	if val, ok = c.End(val); !ok {
		b.Fatal("refused")
	}
	b.SetBytes(int64(len(raw)))
	buf := make([]byte, 64<<10)
	for b.Loop() {
		sp := Spelling(bytes.NewReader(val), int64(len(val)), int64(len(raw)), Text)
		for off := int64(0); ; {
			n, err := sp.ReadAt(buf, off)
			off += int64(n)
			if err != nil {
				break
			}
		}
	}
}
