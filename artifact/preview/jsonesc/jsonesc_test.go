package jsonesc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"unicode/utf8"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		in     string
		r      rune
		size   int
		wantOK bool
	}{
		{`\"`, '"', 2, true},
		{`\\`, '\\', 2, true},
		{`\/`, '/', 2, true},
		{`\b`, '\b', 2, true},
		{`\f`, '\f', 2, true},
		{`\n rest`, '\n', 2, true},
		{`\r`, '\r', 2, true},
		{`\t`, '\t', 2, true},
		{`\u0041`, 'A', 6, true},
		{`\u00e9x`, 'é', 6, true},
		{`\u00E9`, 'é', 6, true},
		{`\u2028`, '\u2028', 6, true},
		{`\ud83d\ude00`, '😀', 12, true},
		{`\uD83D\uDE00tail`, '😀', 12, true},
		// A surrogate without its other half is U+FFFD, and the escape
		// after it is left for the next call.
		{`\ud83d`, utf8.RuneError, 6, true},
		{`\ud83dx\ude00`, utf8.RuneError, 6, true},
		{`\ude00\ud83d`, utf8.RuneError, 6, true},
		{`\ud83d\u0041`, utf8.RuneError, 6, true},
		{`\ud83d\ud83d`, utf8.RuneError, 6, true},
		{`\ud83d\n`, utf8.RuneError, 6, true},
		{`\ud83d\ude0`, utf8.RuneError, 6, true}, // the pair is cut short
		{`\ud83d\uzzzz`, utf8.RuneError, 6, true},
		// Not an escape.
		{``, 0, 0, false},
		{`\`, 0, 0, false},
		{`\x`, 0, 0, false},
		{`\U0041`, 0, 0, false},
		{`\u`, 0, 0, false},
		{`\u004`, 0, 0, false},
		{`\u004g`, 0, 0, false},
		{`\u 041`, 0, 0, false},
	}
	for _, tt := range tests {
		r, size, ok := Decode([]byte(tt.in))
		if r != tt.r || size != tt.size || ok != tt.wantOK {
			t.Errorf("Decode(%q) = %q, %d, %v; want %q, %d, %v", tt.in, r, size, ok, tt.r, tt.size, tt.wantOK)
		}
	}
}

// TestShortAndHexDigit checks every byte against encoding/json and
// strconv.
func TestShortAndHexDigit(t *testing.T) {
	for i := range 256 {
		c := byte(i)
		var s string
		want := byte(0)
		if c != 'u' && json.Unmarshal([]byte{'"', '\\', c, '"'}, &s) == nil {
			want = s[0]
		}
		if got := Short(c); got != want {
			t.Errorf("Short(%q) = %q, want %q", c, got, want)
		}
		wantHex := rune(-1)
		if v, err := strconv.ParseUint(string(c), 16, 8); err == nil {
			wantHex = rune(v)
		}
		if got := HexDigit(c); got != wantHex {
			t.Errorf("HexDigit(%q) = %d, want %d", c, got, wantHex)
		}
	}
}

func TestStrings(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": [1, 2]}`, `{"a":[1,2]}`},
		{`"a b"`, `"a b"`},
		{` "a \" b" , "c\\" d `, `"a \" b","c\\"d`},
		{`["\\\" x", "y"]`, `["\\\" x","y"]`},
		{`"cut \`, `"cut \`},
	}
	for _, tt := range tests {
		if got := compact([]byte(tt.in)); got != tt.want {
			t.Errorf("compact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var s Strings
	for _, c := range []byte(`"a\"`) {
		s.Step(c)
	}
	if !s.In() {
		t.Error(`In() after "a\" = false, want true`)
	}
	s.Step('"')
	if s.In() {
		t.Error(`In() after "a\"" = true, want false`)
	}
}

// compact drops the spaces outside strings, as json.Compact does for
// valid JSON.
func compact(b []byte) string {
	var s Strings
	var out []byte
	for _, c := range b {
		if !s.Step(c) && (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			continue
		}
		out = append(out, c)
	}
	return string(out)
}

var errRaw = errors.New("a quote or control byte not escaped")

// unquote decodes the inside of a JSON string literal with Decode, and
// bytes that are not UTF-8 as U+FFFD, as encoding/json does.
func unquote(s []byte) (string, error) {
	var out []byte
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\\':
			r, size, ok := Decode(s[i:])
			if !ok {
				return "", errors.New("bad escape")
			}
			out = utf8.AppendRune(out, r)
			i += size
		case c == '"' || c < 0x20:
			return "", errRaw
		default:
			r, size := utf8.DecodeRune(s[i:])
			out = utf8.AppendRune(out, r)
			i += size
		}
	}
	return string(out), nil
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`plain`, `\"\\\/\b\f\n\r\t`, `\u0041\u00e9\u2028`, `\ud83d\ude00`,
		`\ud83d`, `\ude00\ud83d`, `\ud83d\u0041`, `\ud83dx`, `\x`, `\u12`,
		"caf\xc3\xa9 \xff", `\uDBFF\uDFFF`, `\\u0041`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		got, err := unquote(s)
		lit := append(append([]byte{'"'}, s...), '"')
		var want string
		jerr := json.Unmarshal(lit, &want)
		if (err == nil) != (jerr == nil) {
			t.Fatalf("%q: Decode's error %v, encoding/json's %v", s, err, jerr)
		}
		if err == nil && got != want {
			t.Fatalf("%q: Decode reads %q, encoding/json %q", s, got, want)
		}
	})
}

func FuzzStrings(f *testing.F) {
	for _, s := range []string{
		`{"a": [1, 2]}`, ` "a \" b" `, `["\\\" x", "y" ]`, `{"k\\": "v\"}" , "n" : null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, b); err != nil {
			t.Fatal(err)
		}
		if got := compact(b); got != want.String() {
			t.Fatalf("%q: compact %q, json.Compact %q", b, got, want.String())
		}
	})
}
