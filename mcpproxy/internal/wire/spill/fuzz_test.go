package spill

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// FuzzRead checks Read against encoding/json on any input: valid JSON is
// read (or refused as too large), what stays inline is valid JSON within
// the cap, Expand gives the input back byte for byte (so everything not
// spilled is byte-identical), and each spilled string's Text is what
// encoding/json decodes; invalid JSON is refused and leaves nothing spilled.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		`{"result":{"content":[{"type":"text","text":"hello, world"}]},"jsonrpc":"2.0","id":1}`,
		`{"a":"\ud83d\ude00\u0000\n","b":[1,-2.5e+3,true,false,null],"c":{}}`,
		` [ "\u0000spillway:00112233445566778899aabbccddeeff" , "x\"y" ] `,
		`{"result":{"content":[{"type":"text","text":"row 1"},{"type":"text","text":"row 2"},{"type":"text","text":"a longer row, with a string that spills on its own"},{"type":"text","text":"row 4"}],"structuredContent":{"result":[1,2,3,[4,5,6,7,8,9],10,11,12]}},"id":1}`,
		`"raw \xff bytes \xc3"`, `[[[[[]]]]]`, `{"a" 1}`, `"\q"`, `01`, `  `,
	} {
		f.Add([]byte(seed), uint8(4), uint16(0))
		f.Add([]byte(seed), uint8(0), uint16(40))
	}
	dir := f.TempDir()
	spoolers := map[uint8]*Spooler{}
	// Every spilled value is tapped: its Tap must see its bytes exactly,
	// end complete or not, and be released with its string.
	// With keep, each Tap is a Keeper (lost at its second write with
	// lose): threshold's high bits say.
	var tapped []*recTap
	var keeps []*keepTap
	var keep, lose bool
	tapAll := func(name string) Tap {
		t := &recTap{name: name}
		tapped = append(tapped, t)
		if keep {
			k := &keepTap{recTap: t, lose: lose, b64: name == "a"}
			keeps = append(keeps, k)
			return k
		}
		return t
	}
	f.Add([]byte(`{"a":"QUJDREVGR0hJSktMTU5PUA==","b":"x\"y\u0001\u00e9z"}`), uint8(1|32), uint16(0))
	f.Add([]byte(`{"a":"QUJDREVGR0hJSktMTU5PUA==","b":"x\"y\u0001\u00e9z"}`), uint8(1|32|64), uint16(0))
	f.Add([]byte(`{"a":"QUJDREVGR0hJSktMTU5PUA==","b":"x\"y\u0001\u00e9z"}`), uint8(1|32|64|128), uint16(1))
	f.Add([]byte(`["abc\u00`+strings.Repeat("x", 40)+`", "abc\\\"def"]`), uint8(2|32|128), uint16(0))
	// A kept string not spelt canonically after a read cut an escape (reads of 8 bytes).
	f.Add([]byte(`{"b":"`+strings.Repeat("x", 65)+`\"b\u0041c"}`), uint8(1|32), uint16(587))
	f.Fuzz(func(t *testing.T, in []byte, threshold uint8, maxInline uint16) {
		keep, lose = threshold&32 != 0, threshold&128 != 0
		keeps = keeps[:0]
		threshold %= 32
		s := spoolers[threshold]
		if s == nil {
			var err error
			// Arrays move out whole past a few elements: small ones, so
			// that the seeds' arrays do.
			if s, err = New(Options{Dir: dir, Threshold: int64(threshold) + int64(markerLen),
				ArrayThreshold: 4*int64(threshold) + int64(markerLen), Tap: tapAll}); err != nil {
				t.Fatal(err)
			}
			spoolers[threshold] = s
		}
		tapped = tapped[:0]
		var src io.Reader = bytes.NewReader(in)
		switch maxInline % 4 {
		case 1:
			src = iotest.OneByteReader(src) // every token crosses a refill
		case 3:
			src = &limitedP{src, int(maxInline>>2)%7 + 2} // units cut anywhere, reads of several
		}
		out, err := s.Read(src, int64(maxInline))
		valid := json.Valid(in)
		switch {
		case !valid && err == nil:
			t.Fatalf("invalid JSON %q read as %q", in, out)
		case !valid:
			tooLarge := maxInline > 0 && errors.Is(err, ErrTooLarge) // found before the flaw
			if !errors.Is(err, io.EOF) && !errors.Is(err, jsonrpc.ErrMalformed) && !tooLarge {
				t.Fatalf("invalid JSON: %v", err)
			}
		case err != nil:
			if strings.Contains(err.Error(), "spelt as spill markers") {
				break // valid, but more forged markers than a message may hold
			}
			if maxInline == 0 || !errors.Is(err, ErrTooLarge) {
				t.Fatalf("valid JSON %q refused: %v", in, err)
			}
		default:
			if !json.Valid(out) {
				t.Fatalf("inline %q is not JSON", out)
			}
			if maxInline > 0 && len(out) > int(maxInline) {
				t.Fatalf("inline %d bytes over the cap %d", len(out), maxInline)
			}
			var b bytes.Buffer
			if err := Expand(&b, out); err != nil || !bytes.Equal(b.Bytes(), in) {
				t.Fatalf("Expand = %q, %v; want %q", b.Bytes(), err, in)
			}
			if ExpandedLen(out) != int64(len(in)) {
				t.Fatalf("ExpandedLen = %d, want %d", ExpandedLen(out), len(in))
			}
			for _, sp := range markers(out) {
				checkText(t, out[sp[0]:sp[1]])
				x, _ := Lookup(out[sp[0]:sp[1]])
				if x.Tap() == nil {
					continue
				}
				raw, _ := io.ReadAll(x.Raw())
				if k, ok := x.Tap().(*keepTap); ok && !k.handed {
					// Kept to its end: its value is the string's.
					var want string
					json.Unmarshal([]byte(`"`+string(raw)+`"`), &want)
					if k.b64 {
						b, err := base64.StdEncoding.DecodeString(want)
						if err != nil {
							t.Fatalf("%q kept as base64: %v", raw, err)
						}
						want = string(b)
					}
					if k.val.String() != want {
						t.Fatalf("kept %q, the string is %q", k.val.Bytes(), raw)
					}
					continue
				}
				if got := x.Tap().(interface{ seen() []byte }).seen(); !bytes.Equal(got, raw) {
					t.Fatalf("tap got %q, the string is %q", got, raw)
				}
			}
			s.Release(out)
		}
		for _, tp := range tapped {
			if len(tp.ends) != 1 || tp.rels != map[bool]int{true: 1, false: 0}[tp.ends[0]] {
				t.Fatalf("a tap ended %v and was released %d times", tp.ends, tp.rels)
			}
		}
		if n := s.Alive(); n != 0 {
			t.Fatalf("%d bytes left spilled", n)
		}
	})
}

// checkText compares a spilled string's Text with encoding/json's
// decoding; for an array, its First and Count with encoding/json's.
func checkText(t *testing.T, marker []byte) {
	t.Helper()
	x, ok := Lookup(marker)
	if !ok {
		t.Fatalf("marker %s does not resolve", marker)
	}
	raw, err := io.ReadAll(x.Raw())
	if err != nil {
		t.Fatal(err)
	}
	if x.Kind() == "array" {
		var all, first []json.RawMessage
		if err := json.Unmarshal(raw, &all); err != nil {
			t.Fatalf("spilled %q is no JSON array: %v", raw, err)
		}
		if err := json.Unmarshal(x.First(), &first); err != nil || len(first) > len(all) || len(x.First()) > FirstMax {
			t.Fatalf("First %q of %q: %v", x.First(), raw, err)
		}
		for k := range first {
			if !bytes.Equal(first[k], all[k]) {
				t.Fatalf("First %q is not the start of %q", x.First(), raw)
			}
		}
		if x.Count() != int64(len(all)) {
			t.Fatalf("Count %d, %q holds %d", x.Count(), raw, len(all))
		}
		return
	}
	var want string
	if err := json.Unmarshal([]byte(`"`+string(raw)+`"`), &want); err != nil {
		t.Fatalf("spilled %q is no JSON string: %v", raw, err)
	}
	got, err := io.ReadAll(x.Text())
	if err != nil || string(got) != want {
		t.Fatalf("Text of %q = %q, %v; want %q", raw, got, err, want)
	}
}

// FuzzText checks the streaming decoder against encoding/json on any
// escaped string, read in pieces of any size.
func FuzzText(f *testing.F) {
	for _, seed := range []string{`plain`, `a long plain run of ascii, then \n an escape and more plain bytes \u00e9 after`, `\ud83d\ude00`, `\ud83d\u0041`, `\ude00`, "\xff\xc3(", `\u00E9\/\b`, `\`, `\u12`} {
		f.Add(seed, uint8(1))
		f.Add(seed, uint8(5))
	}
	// Runs and escapes around eight-byte words, read in pieces that fit
	// a word or two.
	f.Add(`{\"id\":12345,\"note\":\"abcdefghijklmnopq\"}\n01234567\\é89abcdef\u00e9x`, uint8(15))
	f.Add("abcdefg\xffabcdefgh\\\"12345678", uint8(9))
	f.Fuzz(func(t *testing.T, in string, size uint8) {
		got, err := io.ReadAll(&limitedP{newTextReader(strings.NewReader(in)), int(size%16) + 1})
		var want string
		if json.Unmarshal([]byte(`"`+in+`"`), &want) != nil {
			return // quotes and control characters are Read's to refuse
		}
		if err != nil || string(got) != want {
			t.Fatalf("Text(%q) = %q, %v; want %q", in, got, err, want)
		}
		// The source's reads cut escapes anywhere too.
		got, err = io.ReadAll(&limitedP{newTextReader(iotest.OneByteReader(strings.NewReader(in))), int(size%16) + 1})
		if err != nil || string(got) != want {
			t.Fatalf("Text(%q) read a byte at a time = %q, %v; want %q", in, got, err, want)
		}
		// Base64's reader of the text copies eight bytes at a time.
		wide := newTextReader(strings.NewReader(in))
		wide.wide = true
		got, err = io.ReadAll(&limitedP{wide, int(size%16) + 1})
		if err != nil || string(got) != want {
			t.Fatalf("Text(%q) read wide = %q, %v; want %q", in, got, err, want)
		}
	})
}

// FuzzBase64 checks the tolerant base64 decoder against encoding/base64:
// what the padded or the unpadded standard encoding decodes (line breaks
// ignored), it decodes to the same bytes, read in pieces of any size.
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="

func FuzzBase64(f *testing.F) {
	for _, seed := range []string{"", "QQ==", "QQ", "QUJD", "QU\nJD\r\n", "Q===", "QQ=Q", "*", "QUJDRA==",
		// Eight letters and more: the bulk decoding, and a non-letter
		// stopping it anywhere.
		"QUJDREVGR0hJSktMTU5PUA==", "QUJDREVGR0hJSk*MTU5PUA==", "QUJDREVG-0hJSktM", "QUJDREVGR0hJSktMTU5PUFFSU1RV\nVldYWVo="} {
		f.Add(seed, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in string, size uint8) {
		got, err := io.ReadAll(&limitedP{newBase64Reader(strings.NewReader(in)), int(size%16) + 1})
		plain := strings.NewReplacer("\r", "", "\n", "").Replace(in)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			if want, werr := enc.DecodeString(plain); werr == nil && (err != nil || !bytes.Equal(got, want)) {
				t.Fatalf("Base64(%q) = %q, %v; want %q", in, got, err, want)
			}
		}
		if strings.ContainsFunc(plain, func(r rune) bool { return !strings.ContainsRune(alphabet, r) }) && err == nil {
			t.Fatalf("Base64(%q) = %q, no error", in, got)
		}
		// The source's reads cut quanta and padding anywhere too.
		again, err2 := io.ReadAll(&limitedP{newBase64Reader(iotest.OneByteReader(strings.NewReader(in))), int(size%16) + 1})
		if (err == nil) != (err2 == nil) || !bytes.Equal(got, again) && err == nil {
			t.Fatalf("Base64(%q) = %q, %v; read a byte at a time %q, %v", in, got, err, again, err2)
		}
	})
}

// FuzzDecodeBase64 holds the letters' way of DecodeBase64 (eight plain
// letters at a time, straight from the escaped bytes) to the general way
// (unescape, then decode): the same bytes and the same failure, whatever
// the pieces the source and the caller read in, wherever an escape, a line
// break or padding comes. (What each hands out before it fails may differ:
// the letters' way decodes what came before the fault.)
func FuzzDecodeBase64(f *testing.F) {
	long := base64.StdEncoding.EncodeToString([]byte("the quick brown fox jumps over the lazy dog, twice over"))
	for _, seed := range []string{"", "QQ==", "QUJD", long, long[:40] + `\/` + long[43:], long[:17] + `\n` + long[17:],
		long[:24] + "\r\n" + long[24:], long[:9] + "=" + long[10:], long[:30] + "\u0041" + long[31:], long[:33] + "*" + long[34:],
		strings.TrimRight(long, "="), long[:len(long)-1], long[:len(long)-2] + "A=", long + "=", long[:len(long)-3] + "*=="} {
		f.Add(seed, uint8(7), uint8(64))
	}
	f.Fuzz(func(t *testing.T, in string, size, src uint8) {
		want, werr := io.ReadAll(decodeBase64Escaped(strings.NewReader(in)))
		got, err := io.ReadAll(&limitedP{DecodeBase64(&limitedP{strings.NewReader(in), int(src%80) + 1}), int(size%16) + 1})
		if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(got, want) {
			t.Fatalf("DecodeBase64(%q) = %q, %v; the general way %q, %v", in, got, err, want, werr)
		}
	})
}
