package spill

import (
	"bytes"
	"encoding/base64"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// feedCanon gives raw to a Canon in pieces cut where cuts say, checking
// after every step that the value so far, spelt, and what is held are the
// bytes taken. It returns the value, its form and whether all of raw was
// accepted.
func feedCanon(t *testing.T, raw, cuts []byte, b64 bool) ([]byte, Form, bool) {
	t.Helper()
	c := NewCanon(b64)
	var val []byte
	check := func() {
		t.Helper()
		if len(raw) > 4096 && c.Taken() < int64(len(raw)) {
			return // kept linear: checked at the end
		}
		got := append(Spell(nil, val, c.Form()), c.Held()...)
		if !bytes.Equal(got, raw[:c.Taken()]) || c.Given() != int64(len(val)) {
			t.Fatalf("value so far spelt + held = %q, taken %q (given %d, value %d)", got, raw[:c.Taken()], c.Given(), len(val))
		}
	}
	rest := raw
	for i := 0; len(rest) > 0; i++ {
		k := len(rest)
		if i < len(cuts) {
			k = min(int(cuts[i])+1, len(rest))
		}
		var ok bool
		if val, ok = c.Next(val, rest[:k]); !ok {
			check()
			return val, c.Form(), false
		}
		check()
		rest = rest[k:]
	}
	val, ok := c.End(val)
	check()
	return val, c.Form(), ok
}

// canonAgrees checks what a Canon accepted: the general decoders give the
// same value, it spells back to raw, and Spelling reads raw back.
func canonAgrees(t *testing.T, raw, val []byte, form Form) {
	t.Helper()
	var general io.Reader = newTextReader(bytes.NewReader(raw))
	if form == Base64 {
		general = DecodeBase64(bytes.NewReader(raw))
	}
	want, err := io.ReadAll(general)
	if err != nil || !bytes.Equal(val, want) {
		t.Fatalf("Canon decoded %q; the general way %q, %v", val, want, err)
	}
	if got := Spell(nil, val, form); !bytes.Equal(got, raw) {
		t.Fatalf("Spell(%q) = %q, want %q", val, got, raw)
	}
	sp := Spelling(bytes.NewReader(val), int64(len(val)), int64(len(raw)), form)
	for _, step := range []int{1, 3, 7, 64, len(raw) + 1} {
		var got []byte
		buf := make([]byte, step)
		for off := int64(0); ; {
			n, err := sp.ReadAt(buf, off)
			got = append(got, buf[:n]...)
			off += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil || n == 0 {
				t.Fatalf("Spelling.ReadAt at %d: %d, %v", off, n, err)
			}
		}
		if !bytes.Equal(got, raw) {
			t.Fatalf("Spelling read %d at a time = %q, want %q", step, got, raw)
		}
	}
	// From the end backwards: no read goes on from the last (each spells
	// the text from its start: kept short).
	if len(raw) > 0 && len(raw) <= 512 {
		got := make([]byte, len(raw))
		for off := len(raw) - 1; off >= 0; off-- {
			if n, err := sp.ReadAt(got[off:off+1], int64(off)); n != 1 || err != nil && err != io.EOF {
				t.Fatalf("Spelling.ReadAt(1 byte, %d) = %d, %v", off, n, err)
			}
		}
		if !bytes.Equal(got, raw) {
			t.Fatalf("Spelling read backwards = %q, want %q", got, raw)
		}
	}
}

func TestCanon(t *testing.T) {
	long := strings.Repeat(`{\"a\":1,\"b\":\"x\\ty\"}\n`, 100)
	for _, c := range []struct {
		raw  string
		b64  bool
		want bool
	}{
		{``, false, true},
		{`plain`, false, true},
		{`\"q\" \\ \b\f\n\r\t \u0000\u001f\u007f`, false, false}, // \u007f: DEL is spelt as itself
		{`\"q\" \\ \b\f\n\r\t \u0000\u001f`, false, true},
		{`é 世界 😀`, false, true},
		{long, false, true},
		{`a\/b`, false, false},
		{`\u0041`, false, false},
		{`\u001F`, false, false}, // upper-case hex
		{`\u000a`, false, false}, // has a short escape
		{`\u00e9`, false, false},
		{`\ud83d\ude00`, false, false},
		// '<', '>' and '&' as Go's encoding/json spells them by default,
		// or as themselves; not both ways in one string.
		{`a \u003c b \u003e c \u0026 d \"q\"`, false, true},
		{`a < b > c & d`, false, true},
		{strings.Repeat(`x \u0026\u0026 y\n`, 300), false, true},
		{`a < b \u003c`, false, false},
		{`a \u003c b <`, false, false},
		{`a & b \u003e`, false, false},
		{`\u003C`, false, false}, // upper-case hex
		{`\u0027`, false, false}, // not one of the three
		// U+2028 and U+2029 as Go's encoding/json always spells them, or
		// as themselves; not both ways in one string. Either way with
		// '<', '>' and '&' either way.
		{`a \u2028 b \u2029 c \u003c`, false, true},
		{"a \u2028 b \u2029 c < \xe2\x80\xa7 \xe2\x82\xac", false, true},
		{strings.Repeat(`x \u2029\u2028 \u0026 y\n`, 300), false, true},
		{"a \\u2028 b \xe2\x80\xa9", false, false},
		{"a \xe2\x80\xa8 b \\u2029", false, false},
		{`\u2027`, false, false},
		{`\u202a`, false, false},
		{`\u202A`, false, false},
		{"bad \xff byte", false, false},
		{"cut \xe4\xb8", false, false},
		{"\xed\xa0\x80", false, false}, // a surrogate in UTF-8
		{`ends in \`, false, false},
		{`QUJD`, true, true},
		{`QUJDRA==`, true, true},
		{`QUJDREU=`, true, true},
		{strings.Repeat("QUJD", 1000) + "RA==", true, true},
		{`QUJDRB==`, true, false}, // trailing bits set
		{`QUJDRA`, true, false},   // unpadded
		{`QUJDRA==QUJD`, true, false},
		{`QU\/D`, true, false},
		{`QUJ*`, true, false},
		{strings.Repeat("QUJD", 10) + "*" + strings.Repeat("QUJD", 10), true, false},
	} {
		for _, cuts := range [][]byte{nil, {0, 0, 0, 0, 0, 0, 0}, {2, 4, 6, 8, 10, 12, 1, 3, 5}, {6, 6, 6, 6, 6, 6, 6, 6, 6}} {
			val, form, ok := feedCanon(t, []byte(c.raw), cuts, c.b64)
			if ok != c.want {
				t.Errorf("Canon(%q, b64 %v, cuts %v) accepted = %v, want %v", c.raw, c.b64, cuts, ok, c.want)
				continue
			}
			if ok {
				canonAgrees(t, []byte(c.raw), val, form)
			}
		}
	}
}

// FuzzCanon: whatever a Canon accepts decodes as the general way decodes
// it and spells back to the same bytes; whatever Spell writes, a Canon
// accepts, wherever it is cut.
func FuzzCanon(f *testing.F) {
	f.Add([]byte(`a\"b\\c\nd\u0001é`), []byte{1, 2, 3}, false)
	f.Add([]byte(`QUJDREU=`), []byte{0, 5}, true)
	f.Add([]byte(`\ud83d\ude00`), []byte{4}, false)
	f.Add([]byte("\xe4\xb8\x96\xe7\x95\x8c"), []byte{0, 0, 0}, false)
	f.Add([]byte(strings.Repeat("QUJD", 9)+"QQ=="), []byte{7, 9, 3}, true)
	f.Add([]byte(`a \u003c\u003e \u0026\u00`), []byte{3, 5, 0, 1}, false)
	f.Add([]byte(`<b>&amp;</b>`), []byte{2}, false)
	f.Add([]byte(`a \u2028\u2029 \u003c\u20`), []byte{2, 6, 0, 1}, false)
	f.Add([]byte("\xe2\x80\xa8 \xe2\x80\xa9 \xe2\x82\xac"), []byte{0, 1, 2}, false)
	f.Fuzz(func(t *testing.T, raw, cuts []byte, b64 bool) {
		if val, form, ok := feedCanon(t, raw, cuts, b64); ok {
			canonAgrees(t, raw, val, form)
		}
		// raw as a value: its spelling in each form is accepted and gives
		// it back.
		if !b64 && !utf8.Valid(raw) {
			return
		}
		forms := []Form{Text, TextHTML, TextLS, TextHTML | TextLS}
		if b64 {
			forms = []Form{Base64}
		}
		for _, form := range forms {
			sp := Spell(nil, raw, form)
			val, _, ok := feedCanon(t, sp, cuts, b64)
			if !ok || !bytes.Equal(val, raw) {
				t.Fatalf("Canon refused or changed the spelling %q of %q: %q, %v", sp, raw, val, ok)
			}
			canonAgrees(t, sp, val, form)
			// Read as a scanner reads it, with the rest of its message
			// after it: Scan stops at the closing quote.
			if val, n := scanCanon(t, append(sp, `"},"x":"\"<&"}`...), cuts, b64); n != len(sp) || !bytes.Equal(val, raw) {
				t.Fatalf("Scan of %q took %d bytes and %q, want %d and %q", sp, n, val, len(sp), raw)
			}
		}
	})
}

// scanCanon gives in to a Canon's Scan in pieces cut where cuts say, up
// to the quote it reports, then ends it. It returns the value and the
// bytes taken (-1 if refused or no end was found).
func scanCanon(t *testing.T, in, cuts []byte, b64 bool) ([]byte, int) {
	t.Helper()
	c := NewCanon(b64)
	var val []byte
	at := 0
	for i := 0; at < len(in); i++ {
		k := len(in) - at
		if i < len(cuts) {
			k = min(int(cuts[i])+1, k)
		}
		var n int
		var end, ok bool
		if val, n, end, ok = c.Scan(val, in[at:at+k]); !ok {
			return val, -1
		}
		if at += n; end {
			if in[at] != '"' {
				t.Fatalf("Scan ended at %q", in[at:])
			}
			if val, ok = c.End(val); !ok {
				return val, -1
			}
			return val, at
		}
	}
	return val, -1
}

// base64 spelling reads any range.
func TestSpellingBase64Ranges(t *testing.T) {
	val := make([]byte, 1000)
	for i := range val {
		val[i] = byte(i * 7)
	}
	raw := []byte(base64.StdEncoding.EncodeToString(val))
	sp := Spelling(bytes.NewReader(val), int64(len(val)), int64(len(raw)), Base64)
	for off := 0; off < len(raw); off += 37 {
		for _, n := range []int{1, 5, 100} {
			buf := make([]byte, n)
			k, err := sp.ReadAt(buf, int64(off))
			if want := raw[off:min(off+n, len(raw))]; !bytes.Equal(buf[:k], want) || (k < n) != (err == io.EOF) {
				t.Fatalf("ReadAt(%d, %d) = %q, %v; want %q", n, off, buf[:k], err, want)
			}
		}
	}
}

// What a Canon holds is never bytes a JSON string cannot hold as they
// are: a base64 group cut by a chunk's end holds only letters and '=', a
// \u escape cut short only digits that can begin a canonical one: a
// Canon refuses as soon as it can.
func TestCanonHeldValid(t *testing.T) {
	for _, c := range []struct {
		chunks []string
		b64    bool
	}{
		{[]string{"QUJDRE", "\x10"}, true},
		{[]string{"QUJDRE", "\\"}, true},
		{[]string{"QUJDREVGR0hJ", "\"x"}, true},
		{[]string{"ab\\uZ"}, false},
		{[]string{"ab\\u0", "Z"}, false},
		{[]string{"ab\\u00", "4"}, false},
		{[]string{"a<b\\u00", "2"}, false}, // '<' as itself: no \u0026 to come
	} {
		k := NewCanon(c.b64)
		for _, ch := range c.chunks {
			k.Next(nil, []byte(ch))
			for _, h := range k.Held() {
				if h < 0x20 || h == '"' {
					t.Fatalf("%q (base64 %v): holds %q", c.chunks, c.b64, k.Held())
				}
			}
			if h := string(k.Held()); !c.b64 && strings.HasPrefix(h, `\u`) && (strings.ContainsAny(h[2:], "Z4") || strings.Contains(c.chunks[0], "<") && strings.HasPrefix(h, `\u002`)) {
				t.Fatalf("%q: holds %q, no canonical escape's start", c.chunks, h)
			}
		}
	}
}
