package spill

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
)

// benchRead measures Read over in, which it spills and releases each time.
func benchRead(b *testing.B, in []byte) {
	s := newSpooler(b, Options{MaxBytes: 1 << 30})
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		out, err := s.Read(bytes.NewReader(in), 1<<30)
		if err != nil {
			b.Fatal(err)
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

// BenchmarkText decodes a spilled 10 MB string.
func BenchmarkText(b *testing.B) {
	s := newSpooler(b, Options{})
	in := []byte(`"` + string(bytes.Repeat([]byte(`caf\u00e9 \ud83d\ude00 plain text here\n`), 10<<20/40)) + `"`)
	out, err := s.Read(bytes.NewReader(in), 0)
	if err != nil {
		b.Fatal(err)
	}
	x, _ := Lookup(out)
	b.SetBytes(x.Len())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := io.Copy(io.Discard, x.Text()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTextRows decodes a spilled 10 MB string holding a JSON
// document, the shape of most big text outputs: an escaped quote every
// few bytes.
func BenchmarkTextRows(b *testing.B) {
	s := newSpooler(b, Options{})
	row := `{\"id\":12345,\"name\":\"row\",\"score\":-12.5e3,\"ok\":true,\"tags\":[\"a\",\"b\"],\"note\":null},\n`
	in := []byte(`"` + strings.Repeat(row, 10<<20/len(row)) + `"`)
	out, err := s.Read(bytes.NewReader(in), 0)
	if err != nil {
		b.Fatal(err)
	}
	x, _ := Lookup(out)
	b.SetBytes(x.Len())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := io.Copy(io.Discard, x.Text()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTextBase64 decodes a spilled 10 MB string of base64 (an
// image's data): no escapes at all.
func BenchmarkTextBase64(b *testing.B) {
	s := newSpooler(b, Options{})
	in := []byte(`"` + strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg", 10<<20/100) + `"`)
	out, err := s.Read(bytes.NewReader(in), 0)
	if err != nil {
		b.Fatal(err)
	}
	x, _ := Lookup(out)
	b.SetBytes(x.Len())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := io.Copy(io.Discard, x.Base64()); err != nil {
			b.Fatal(err)
		}
	}
}
