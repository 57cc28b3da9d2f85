package spill

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"io"
	"math/bits"
	"sync"
	"unicode/utf8"
)

// A string's value and its escaped bytes: the one way the proxy spells a
// value (Spell), and a decoder (Canon) that accepts exactly what it
// spells. A Tap that stages a string's value decoded can then keep the
// escaped bytes as the value alone, for as long as they are spelt that
// way: what encoders send (standard padded base64; JSON text with only
// the escapes a string needs), so that a string offloaded as it arrives
// is written to disk once, decoded, not also as sent (see Keeper).
//
// Text is spelt with '"', '\\' and the control characters escaped, the
// five that have one as \b \f \n \r \t, the rest as \u00XX in lowercase
// hex; every other byte as it is (Text), or also '<', '>' and '&' as
// \u003c, \u003e and \u0026 (TextHTML: what Go's encoding/json writes by
// default, and so many Go servers); either with U+2028 and U+2029 as
// themselves or as \u2028 and \u2029 (TextLS, which Go's encoder always
// writes). Its value must be valid UTF-8. Base64 is spelt as
// base64.StdEncoding encodes.

// Form is one of the ways a value is spelt (see Spell): Base64, or Text
// with the flags TextHTML and TextLS, alone or together.
type Form uint8

const (
	Text     Form = 0 // JSON text, '<', '>', '&', U+2028 and U+2029 as themselves
	TextHTML Form = 1 // flag: '<', '>' and '&' as \u003c, \u003e, \u0026
	Base64   Form = 2 // standard padded base64
	TextLS   Form = 4 // flag: U+2028 and U+2029 as \u2028, \u2029
)

// Canon decodes a JSON string's escaped bytes (no quotes) chunk by chunk,
// as long as they are spelt canonically: then Spelling gives them back
// from the value alone. Its value is what String.Text (or String.Base64)
// would give for the same bytes. Make one with NewCanon; not safe for
// concurrent use.
type Canon struct {
	b64   bool
	html  int8   // a text's form: unknown until a '<', '>' or '&' tells
	ls    int8   // and until a U+2028 or U+2029 tells
	held  []byte // taken, not yet decoded: a unit cut by a chunk's end
	taken int64  // escaped bytes taken, held ones included
	given int64  // value bytes given
	ended bool
	saved struct { // what Scan restores when it refuses a chunk
		held [16]byte
		n    int
		html int8
		ls   int8
	}
}

// A text's form, as far as its bytes so far tell, for each kind of
// character a form may escape or not ('<', '>' and '&'; U+2028 and U+2029).
const (
	unknown int8 = iota // none yet: either form alike
	asIs                // one as itself
	escaped             // one as a \u escape
)

// NewCanon returns a Canon for text or, with b64, for base64 data. A
// text's form is what the first '<', '>' or '&', and the first U+2028 or
// U+2029, decide (as themselves when there is none): one string spelt
// both ways is not canonical.
func NewCanon(b64 bool) *Canon { return &Canon{b64: b64, held: make([]byte, 0, 16)} }

// Form is the form of the bytes taken so far: Spell and Spelling spell
// their value back with it.
func (c *Canon) Form() Form {
	if c.b64 {
		return Base64
	}
	f := Text
	if c.html == escaped {
		f |= TextHTML
	}
	if c.ls == escaped {
		f |= TextLS
	}
	return f
}

// Taken is the number of escaped bytes accepted so far, Held included.
func (c *Canon) Taken() int64 { return c.taken }

// Given is the number of value bytes appended so far.
func (c *Canon) Given() int64 { return c.given }

// Held returns the escaped bytes accepted but not yet decoded (a unit cut
// by the last chunk's end): the bytes after the spelling of the value so
// far. The caller must not keep it past the next call.
func (c *Canon) Held() []byte { return c.held }

// Next appends p's decoding to dst. ok is false if p, after what came
// before, is not spelt canonically: then nothing of p is taken (dst is
// returned as it was, and the Canon is as before the call).
func (c *Canon) Next(dst, p []byte) (_ []byte, ok bool) {
	n0, given, taken := len(dst), c.given, c.taken
	dst, _, end, ok := c.Scan(dst, p)
	if ok && end { // a quote is never in a string's bytes
		c.restore()
		c.given, c.taken = given, taken
		return dst[:n0], false
	}
	return dst, ok
}

// Scan is Next for bytes that may run past the string's end, as a JSON
// scanner reads them: it takes p up to the quote that ends the string,
// when p holds it (end is true and p[n] is that quote), else all of p
// (n is len(p)). ok is false when those bytes are not spelt canonically:
// then nothing of p is taken. A string's bytes, once it ended, are
// decoded whole only after End.
func (c *Canon) Scan(dst, p []byte) (_ []byte, n int, end, ok bool) {
	if c.ended {
		return dst, 0, false, false
	}
	n0 := len(dst)
	c.save()
	if c.b64 {
		n = len(p)
		if q := bytes.IndexByte(p, '"'); q >= 0 {
			n, end = q, true
		}
		dst, ok = c.nextBase64(dst, p[:n])
	} else {
		dst, n, end, ok = c.nextText(dst, p)
	}
	if !ok {
		c.restore()
		return dst[:n0], 0, false, false
	}
	c.taken += int64(n)
	c.given += int64(len(dst) - n0)
	return dst, n, end, true
}

// save and restore keep what a refused chunk must not change.
func (c *Canon) save() {
	c.saved.n = copy(c.saved.held[:], c.held)
	c.saved.html, c.saved.ls = c.html, c.ls
}

func (c *Canon) restore() {
	c.held = append(c.held[:0], c.saved.held[:c.saved.n]...)
	c.html, c.ls = c.saved.html, c.saved.ls
}

// End appends the decoding of what is held, once no more bytes come. ok
// is false if the bytes taken do not end as a canonical spelling ends;
// then nothing is appended and Held is as before.
func (c *Canon) End(dst []byte) (_ []byte, ok bool) {
	if c.ended {
		return dst, false
	}
	if !c.b64 {
		if len(c.held) > 0 {
			return dst, false // a string ending inside a UTF-8 sequence or an escape
		}
		c.ended = true
		return dst, true
	}
	var v [16]byte
	k, err := base64.StdEncoding.Strict().Decode(v[:], c.held)
	if err != nil || base64.StdEncoding.EncodedLen(k) != len(c.held) {
		return dst, false
	}
	c.held = c.held[:0]
	c.given += int64(k)
	c.ended = true
	return append(dst, v[:k]...), true
}

// maxTail bounds the bytes of base64 held undecoded: fewer than eight
// letters, or a last group of eight with its padding.
const maxTail = 8

// nextBase64 decodes whole groups of eight letters; the rest, fewer than
// eight bytes or a group that is not eight letters, is held if it can
// still be the end (fewer letters, or padding), else refused.
func (c *Canon) nextBase64(dst, p []byte) ([]byte, bool) {
	if len(c.held) > 0 {
		if len(c.held) < 8 {
			k := min(8-len(c.held), len(p))
			if !lettersOrPad(p[:k]) {
				return dst, false
			}
			c.held = append(c.held, p[:k]...)
			p = p[k:]
			if len(c.held) < 8 {
				return dst, true
			}
			var g [8]byte
			if n, m := decodeBulk(g[:], c.held); m == 8 {
				dst = append(dst, g[:n]...)
				c.held = c.held[:0]
			}
		}
		if len(c.held) > 0 { // a group that is not eight letters: the end, or refused
			if len(c.held)+len(p) > maxTail || !lettersOrPad(c.held) || !lettersOrPad(p) {
				return dst, false
			}
			c.held = append(c.held, p...)
			return dst, true
		}
	}
	dst = grow(dst, len(p)/8*6+8)
	n, m := decodeBulk(dst[len(dst):cap(dst)], p)
	dst = dst[:len(dst)+n]
	p = p[m:]
	if len(p) > maxTail || !lettersOrPad(p) {
		// Stopped at a group that is not letters, with more after it
		// than an end has, or with what no end has. (What is held is
		// always bytes a JSON string may hold as they are.)
		return dst, false
	}
	c.held = append(c.held, p...)
	return dst, true
}

// lettersOrPad reports whether b holds only letters of the standard
// alphabet and '='.
func lettersOrPad(b []byte) bool {
	for _, c := range b {
		if c != '=' && b64Quad[0][c] == ^uint32(0) {
			return false
		}
	}
	return true
}

// grow makes room for n more bytes in b.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), 2*cap(b)+n)
	copy(nb, b)
	return nb
}

// nextText decodes p after what is held, up to the string's end (a
// quote outside any escape) if p holds it: then end is true and p[n] is
// the quote. ok is false at a unit that is not canonical; the caller
// restores what was changed. A text's form is checked on the bytes taken
// alone: '<', '>' and '&' as themselves (a vectorized search per chunk,
// not a test per byte) and as \u003c-style escapes are not both in one
// string.
func (c *Canon) nextText(dst, p []byte) (_ []byte, n int, end, ok bool) {
	t := textUnits{html: c.html != asIs, ls: c.ls != asIs}
	rest := p
	if len(c.held) > 0 {
		// The held unit's rest is in p's first few bytes (a unit is at
		// most six).
		k := min(len(p), 8)
		var buf [16]byte
		b := append(append(buf[:0], c.held...), p[:k]...)
		var m int
		dst, m, ok = t.decode(dst, b)
		switch {
		case !ok && (m < len(c.held) || b[m] != '"'):
			return dst, 0, false, false
		case !ok: // the string ends in p's first bytes
			n = m - len(c.held)
			c.held = c.held[:0]
			return dst, n, true, c.decide(p[:n], &t)
		case m < len(c.held): // p is too short to finish the unit
			c.held = append(c.held, p...)
			return dst, len(p), false, c.decide(p, &t)
		}
		rest = p[m-len(c.held):]
		c.held = c.held[:0]
	}
	dst, m, ok := t.decode(dst, rest)
	n = len(p) - len(rest) + m
	if !ok {
		if rest[m] != '"' {
			return dst, 0, false, false
		}
		return dst, n, true, c.decide(p[:n], &t)
	}
	c.held = append(c.held, rest[m:]...)
	return dst, len(p), false, c.decide(p, &t)
}

// decide notes in c the form that b, the bytes just taken (t decoded
// them), shows. It returns false when b mixes '<', '>' or '&' spelt as
// themselves with one escaped (or U+2028 and U+2029 so), or shows the
// other form than the bytes before it did.
func (c *Canon) decide(b []byte, t *textUnits) bool {
	if c.html != asIs { // else t refused any \u003c-style escape
		raw := bytes.IndexByte(b, '<') >= 0 || bytes.IndexByte(b, '>') >= 0 || bytes.IndexByte(b, '&') >= 0
		if !decideOne(&c.html, raw, t.sawHTML) {
			return false
		}
	}
	return decideOne(&c.ls, t.rawLS, t.sawLS)
}

// decideOne notes in state whether a chunk held a character of one kind
// as itself (raw) or escaped (esc). It returns false when that mixes the
// two, in the chunk or with what state already says.
func decideOne(state *int8, raw, esc bool) bool {
	switch {
	case raw && (esc || *state == escaped), esc && *state == asIs:
		return false
	case raw:
		*state = asIs
	case esc:
		*state = escaped
	}
	return true
}

// textUnits decodes canonical text units; with html, '<', '>' and '&'
// spelt \u003c, \u003e, \u0026 are canonical too (sawHTML tells whether
// there was one), with ls U+2028 and U+2029 spelt \u2028 and \u2029
// (sawLS; rawLS tells whether there was one as itself).
type textUnits struct {
	html, sawHTML    bool
	ls, sawLS, rawLS bool
}

// decode appends the decoding of b's canonical units to dst, stopping
// before one cut by b's end; m is how far it read. ok is false at a unit
// that is not canonical. Plain bytes are copied eight at a time (each
// word stored whole, kept up to its first byte that is not plain), as
// textReader copies them; an escape past that loop is escape's, a UTF-8
// character utf8Unit's.
func (t *textUnits) decode(dst, b []byte) (_ []byte, m int, ok bool) {
	dst = grow(dst, len(b)+8) // the value is never longer than its spelling
	out := dst[:cap(dst)]
	w, i := len(dst), 0
	for i < len(b) {
		for i+8 <= len(b) {
			v := binary.LittleEndian.Uint64(b[i:])
			binary.LittleEndian.PutUint64(out[w:], v)
			m := notPlain(v)
			if m == 0 { // the next word's address does not wait for the test
				i, w = i+8, w+8
				continue
			}
			k := bits.TrailingZeros64(m) / 8
			i, w = i+k, w+k
			// A one-letter escape (\" above all, in a JSON document)
			// is part of the run.
			if b[i] == '\\' && i+1 < len(b) {
				if e := canonEscape[b[i+1]]; e != 0 {
					out[w] = e
					i, w = i+2, w+1
					continue
				}
				// So is '<', '>' or '&' in TextHTML.
				if t.html && i+5 < len(b) && b[i+1] == 'u' {
					if v, ok := htmlEscape(b[i+2 : i+6]); ok {
						out[w] = v
						i, w, t.sawHTML = i+6, w+1, true
						continue
					}
				}
			}
			break
		}
		if i == len(b) {
			break
		}
		more := true
		switch c := b[i]; {
		case c < utf8.RuneSelf && plainByte(c):
			out[w] = c
			i, w = i+1, w+1
		case c == '\\':
			w, i, more, ok = t.escape(out, w, b, i)
		case c >= utf8.RuneSelf:
			w, i, more, ok = t.utf8Unit(out, w, b, i)
		default: // a control character or '"': never in a string's bytes
			more, ok = false, false
		}
		if !more {
			return out[:w], i, ok
		}
	}
	return out[:w], i, true
}

// escape decodes the escape at b[i] into out[w:] if it is canonical
// (Spell writes it, in the forms t takes) and returns where decoding
// goes on in out and b. more is false when decode stops there: at an
// escape cut by b's end (ok: it is held, if it can still be canonical)
// or one that is not canonical (not ok).
func (t *textUnits) escape(out []byte, w int, b []byte, i int) (_, _ int, more, ok bool) {
	if i+1 == len(b) {
		return w, i, false, true
	}
	if e := canonEscape[b[i+1]]; e != 0 {
		out[w] = e
		return w + 1, i + 2, true, true
	}
	if b[i+1] != 'u' {
		return w, i, false, false // \/ is not how a '/' is spelt
	}
	if len(b)-i < 6 {
		// Cut: held, if its digits so far can begin one (what a Canon
		// holds is never invalid JSON).
		return w, i, false, t.canBegin(b[i+2:])
	}
	v, ok := ctlEscape(b[i+2 : i+6])
	if !ok && t.html {
		v, ok = htmlEscape(b[i+2 : i+6])
		t.sawHTML = t.sawHTML || ok
	}
	if !ok && t.ls && isLSEscape(b[i+2:i+6]) {
		w += copy(out[w:], lsRune[:2]) // the last byte below
		v, ok, t.sawLS = lsRune[2]+b[i+5]-'8', true, true
	}
	if !ok {
		return w, i, false, false
	}
	out[w] = v
	return w + 1, i + 6, true, true
}

// utf8Unit copies the UTF-8 character at b[i] to out[w:] and returns
// where decoding goes on in out and b, noting a U+2028 or U+2029 as
// itself. more is false when decode stops there: at a character cut by
// b's end (ok) or invalid UTF-8 (not ok).
func (t *textUnits) utf8Unit(out []byte, w int, b []byte, i int) (_, _ int, more, ok bool) {
	if !utf8.FullRune(b[i:]) {
		return w, i, false, true
	}
	r, size := utf8.DecodeRune(b[i:])
	if r == utf8.RuneError && size == 1 {
		return w, i, false, false
	}
	t.rawLS = t.rawLS || r == '\u2028' || r == '\u2029'
	return w + copy(out[w:], b[i:i+size]), i + size, true, true
}

// notPlain flags the bytes of v (little-endian: from its low end) that
// are not plain ASCII spelt as themselves: under 0x20, '"', '\\' or over
// 0x7f; the high bit of each, 0 if none is. The lowest flag is the first
// such byte (the zero-byte tests may also flag one after it, never one
// before it).
func notPlain(v uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, b := v^(ones*'"'), v^(ones*'\\')
	return ((v-ones*0x20)&^v | (q-ones)&^q | (b-ones)&^b | v) & highs
}

// canonEscape maps the letter after a backslash to its byte, for the
// escapes Spell writes other than \u.
var canonEscape = [256]byte{'"': '"', '\\': '\\', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// shortEscape is canonEscape the other way: a byte's one-letter escape.
var shortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

const lowerHex = "0123456789abcdef"

// ctlEscape decodes the four hex digits of a \u escape if they are how
// Spell writes a control character: 00 then two lowercase digits, for one
// without a short escape.
func ctlEscape(h []byte) (byte, bool) {
	if h[0] != '0' || h[1] != '0' || (h[2] != '0' && h[2] != '1') {
		return 0, false
	}
	lo := h[3]
	var d byte
	switch {
	case '0' <= lo && lo <= '9':
		d = lo - '0'
	case 'a' <= lo && lo <= 'f':
		d = lo - 'a' + 10
	default:
		return 0, false
	}
	v := (h[2]-'0')<<4 | d
	if shortEscape[v] != 0 {
		return 0, false
	}
	return v, true
}

// lsRune is U+2028 in UTF-8; U+2029 differs in its last byte (0xa9).
var lsRune = [3]byte{0xe2, 0x80, 0xa8}

// isLSEscape reports whether the four hex digits of a \u escape are how
// TextLS spells U+2028 or U+2029.
func isLSEscape(h []byte) bool {
	return h[0] == '2' && h[1] == '0' && h[2] == '2' && (h[3] == '8' || h[3] == '9')
}

// isLS reports whether b starts with U+2028 or U+2029 in UTF-8.
func isLS(b []byte) bool {
	return len(b) >= 3 && b[0] == 0xe2 && b[1] == 0x80 && (b[2] == 0xa8 || b[2] == 0xa9)
}

// canBegin reports whether d, the hex digits of a \u escape cut by a
// chunk's end, can begin an escape t takes: a control character's
// (00 then 0 or 1), '<', '>' or '&' with html (003c, 003e, 0026), U+2028
// or U+2029 with ls.
func (t *textUnits) canBegin(d []byte) bool {
	prefix := func(of string) bool { return len(d) <= len(of) && string(d) == of[:len(d)] }
	return prefix("000") || prefix("001") || t.html && (prefix("003") || prefix("002")) || t.ls && prefix("202")
}

// htmlEscape decodes the four hex digits of a \u escape if they are how
// TextHTML spells '<', '>' or '&'.
func htmlEscape(h []byte) (byte, bool) {
	if h[0] != '0' || h[1] != '0' {
		return 0, false
	}
	switch h[2] {
	case '3':
		switch h[3] {
		case 'c':
			return '<', true
		case 'e':
			return '>', true
		}
	case '2':
		if h[3] == '6' {
			return '&', true
		}
	}
	return 0, false
}

// Spell appends the canonical spelling of value, in form, to dst. A
// value spelt in pieces must be cut between characters when form has
// TextLS: a U+2028 cut in two is spelt as itself.
func Spell(dst, value []byte, form Form) []byte {
	if form == Base64 {
		return base64.StdEncoding.AppendEncode(dst, value)
	}
	plain := plainIn(form)
	for i := 0; i < len(value); {
		j := i
		for j < len(value) && plain[value[j]] {
			j++
		}
		dst = append(dst, value[i:j]...)
		if j == len(value) {
			break
		}
		var n int
		dst, n = appendUnit(dst, value[j:])
		i = j + n
	}
	return dst
}

// appendUnit appends the spelling of the unit at the start of v, whose
// first byte is not plain in its form, and returns the value bytes it
// took: a byte escaped, U+2028 or U+2029 escaped (TextLS, whose first
// byte 0xe2 is not plain), or 0xe2 starting any other character, as
// itself.
func appendUnit(dst, v []byte) ([]byte, int) {
	switch c := v[0]; {
	case c != lsRune[0]:
		return appendEscape(dst, c), 1
	case isLS(v):
		return append(dst, '\\', 'u', '2', '0', '2', '8'+v[2]-lsRune[2]), 3
	default:
		return append(dst, c), 1
	}
}

func appendEscape(dst []byte, c byte) []byte {
	if e := shortEscape[c]; e != 0 {
		return append(dst, '\\', e)
	}
	return append(dst, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&15])
}

// spelled is Spelling's reader.
type spelled struct {
	value io.ReaderAt
	n     int64 // the value's length
	size  int64 // the spelling's
	b64   bool
	plain *[256]bool // a text's bytes spelt as themselves

	mu  sync.Mutex
	cur [4]spot // where the last reads ended, for reading on from there
	at  int     // the next of cur to replace
}

// spot is a place in a text's spelling: value byte v starts at escaped
// byte e.
type spot struct{ e, v int64 }

// Spelling returns a reader of the canonical spelling in form (size
// bytes) of a value read from value (n bytes): a Canon's input given back
// from what it decoded. It is safe for concurrent use; a text is read
// best in order (each read goes on from where one of the last few ended,
// or spells the text from its start).
func Spelling(value io.ReaderAt, n, size int64, form Form) io.ReaderAt {
	return &spelled{value: value, n: n, size: size, b64: form == Base64, plain: plainIn(form)}
}

func (s *spelled) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if off >= s.size {
		return 0, io.EOF
	}
	want := len(p)
	p = p[:min(int64(len(p)), s.size-off)]
	var err error
	if s.b64 {
		err = s.readBase64(p, off)
	} else {
		err = s.readText(p, off)
	}
	if err != nil {
		return 0, err
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

var spellBufs = sync.Pool{New: func() any { b := make([]byte, 48<<10+64<<10); return &b }}

// readBase64 fills p from the spelling at off: whole quanta, each four
// letters of three value bytes.
func (s *spelled) readBase64(p []byte, off int64) error {
	bp := spellBufs.Get().(*[]byte)
	defer spellBufs.Put(bp)
	val, enc := (*bp)[:48<<10], (*bp)[48<<10:]
	for len(p) > 0 {
		q := off / 4
		v0 := q * 3
		k := min(int64(len(val)), s.n-v0, (int64(len(p))+off-q*4+3)/4*3)
		if k <= 0 {
			return io.ErrUnexpectedEOF // the value is shorter than its spelling says
		}
		buf := val[:k]
		if got, err := s.value.ReadAt(buf, v0); got < len(buf) {
			return cmp.Or(err, io.ErrUnexpectedEOF)
		}
		e := base64.StdEncoding.AppendEncode(enc[:0], buf)
		c := copy(p, e[off-q*4:])
		p, off = p[c:], off+int64(c)
	}
	return nil
}

// readText fills p from the spelling at off, spelling the value from the
// nearest known spot at or before off.
func (s *spelled) readText(p []byte, off int64) error {
	from := s.nearest(off)
	bp := spellBufs.Get().(*[]byte)
	defer spellBufs.Put(bp)
	var esc [6]byte
	e, v := from.e, from.v // value byte v is spelt from escaped byte e
	filled := 0
	for filled < len(p) {
		// Each value byte is spelt with one escaped byte or more: no
		// more are needed than escaped bytes are left to spell (and the
		// three of a character TextLS may escape).
		buf, err := s.readValue(*bp, v, max(off+int64(len(p))-e, 3))
		if err != nil {
			return err
		}
		for i := 0; i < len(buf) && filled < len(p); {
			// A unit: a run of bytes spelt as they are, or one byte
			// escaped, or U+2028 or U+2029 escaped.
			var sp []byte
			run := 1
			if c := buf[i]; s.plain[c] {
				for run < len(buf)-i && s.plain[buf[i+run]] {
					run++
				}
				sp = buf[i : i+run]
			} else {
				if c == lsRune[0] && len(buf)-i < 3 && v+3 <= s.n {
					break // a character cut by buf's end: read from it
				}
				sp, run = appendUnit(esc[:0], buf[i:])
			}
			at := off + int64(filled)
			if skip := at - e; skip < int64(len(sp)) {
				filled += copy(p[filled:], sp[max(skip, 0):])
				if filled == len(p) && e+int64(len(sp)) > off+int64(len(p)) {
					// Cut: a run's rest, or an escape's, is the next
					// read's. Runs may end anywhere; an escape starts it.
					if !s.plain[buf[i]] {
						break
					}
					n := off + int64(len(p)) - e
					e, v = e+n, v+n
					break
				}
			}
			e, v, i = e+int64(len(sp)), v+int64(run), i+run
		}
	}
	s.remember(spot{e, v})
	return nil
}

// nearest is the spot where one of the last reads ended that is the
// nearest at or before off; the text's start if none is.
func (s *spelled) nearest(off int64) spot {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := spot{}
	for _, c := range s.cur {
		if c.e <= off && c.e > from.e {
			from = c
		}
	}
	return from
}

// remember notes where a read ended, at the start of a unit, for a read
// that goes on from there.
func (s *spelled) remember(at spot) {
	s.mu.Lock()
	s.cur[s.at] = at
	s.at = (s.at + 1) % len(s.cur)
	s.mu.Unlock()
}

// readValue reads the value from byte v into buf: up to want bytes, as
// many as buf holds and the value has.
func (s *spelled) readValue(buf []byte, v, want int64) ([]byte, error) {
	k := min(int64(len(buf)), s.n-v, want)
	if k <= 0 {
		return nil, io.ErrUnexpectedEOF // the value is shorter than its spelling says
	}
	buf = buf[:k]
	if got, err := s.value.ReadAt(buf, v); got < len(buf) {
		return nil, cmp.Or(err, io.ErrUnexpectedEOF)
	}
	return buf, nil
}

// plainByte reports whether c is spelt as itself in Text.
func plainByte(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }

// plainForm says which bytes are spelt as themselves in each text form,
// by its flags; with TextLS, 0xe2 is not (it starts U+2028 and U+2029, and
// appendUnit tells).
var plainForm = func() (f [TextHTML | TextLS + 1][256]bool) {
	for form := range f {
		for c := range 256 {
			f[form][c] = plainByte(byte(c)) &&
				!(Form(form)&TextHTML != 0 && (c == '<' || c == '>' || c == '&')) &&
				!(Form(form)&TextLS != 0 && c == int(lsRune[0]))
		}
	}
	return
}()

func plainIn(form Form) *[256]bool { return &plainForm[form&(TextHTML|TextLS)] }
