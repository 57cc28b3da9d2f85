package offload

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// FuzzStringReader: streaming a JSON string decodes exactly what
// encoding/json decodes, bytes that are not UTF-8 included.
func FuzzStringReader(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\nb\"c\\d\/"`, `"\u00e9\ud83d\ude00\ud800x"`, `"\uDBFF\uDFFF"`, `""`, "\"a\xffb\xc3\"", "\"\xe2\x82\"", "\"\xed\xa0\x80\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		lit = bytes.TrimSpace(lit) // the reader gets exact literals, as skipValue cuts them
		var want string
		if json.Unmarshal(lit, &want) != nil || len(lit) < 2 || lit[0] != '"' {
			return
		}
		// A small buffer exercises escapes split across reads.
		// A byte that is not UTF-8 decodes to three.
		got, err := io.ReadAll(io.LimitReader(struct{ io.Reader }{newStringReader(lit)}, 3*int64(len(lit))))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("decoded %q, want %q", got, want)
		}
		var small bytes.Buffer
		r := newStringReader(lit)
		buf := make([]byte, 3)
		for {
			n, err := r.Read(buf)
			small.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if small.String() != want {
			t.Fatalf("3-byte reads decoded %q, want %q", small.String(), want)
		}
	})
}

// BenchmarkStringReaderText: a 1 MB literal of JSON rows, ASCII and
// mostly not (Cyrillic, Chinese, an emoji), read in 32 KiB reads, as an
// inline text's size and bytes are.
func BenchmarkStringReaderText(b *testing.B) {
	for name, row := range map[string]string{
		"ascii":     `{\"id\":12345,\"note\":\"abcdefghijklmnopqrstuvwxyz0123456789\"},\n`,
		"non-ascii": `{\"id\":12345,\"note\":\"Привет, 世界 😀 abc\"},\n`,
	} {
		b.Run(name, func(b *testing.B) {
			lit := []byte(`"` + strings.Repeat(row, 1<<20/len(row)) + `"`)
			buf := make([]byte, 32<<10)
			b.SetBytes(int64(len(lit)))
			for b.Loop() {
				r := newStringReader(lit)
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
			}
		})
	}
}
