package spill

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"unicode/utf8"

	"github.com/spillway-dev/spillway/artifact/preview/jsonesc"
)

// textReader decodes the escaped bytes of a JSON string (no quotes) to
// UTF-8, exactly as encoding/json does: an invalid UTF-8 byte becomes
// U+FFFD, a \u escape of a lone surrogate too, a valid pair one rune.
type textReader struct {
	src  io.Reader
	in   []byte // in[i:n] unread
	i, n int
	eof  bool
	err  error // sticky, io.EOF at the end
	rune [utf8.UTFMax]byte
	pend []byte // the part of t.rune not yet handed out
	wide bool   // expect long plain runs (base64): copy them whole
}

// lookahead is the most a step needs to see: a surrogate pair's two
// escapes.
const lookahead = 12

func newTextReader(src io.Reader) *textReader {
	return &textReader{src: src, in: make([]byte, 32<<10)}
}

// more makes at least want bytes unread, if the input has them.
func (t *textReader) more(want int) error {
	for t.n-t.i < want && !t.eof {
		if t.i > 0 {
			t.n = copy(t.in, t.in[t.i:t.n])
			t.i = 0
		}
		k, err := t.src.Read(t.in[t.n:])
		t.n += k
		if err == io.EOF {
			t.eof = true
		} else if err != nil {
			return err
		}
	}
	return nil
}

var errEscape = errors.New("spill: invalid escape in a string")

// Read decodes into p: runs of plain ASCII and one-letter escapes a
// buffer at a time (copyRun), anything else one character at a time
// (decodeUnit).
func (t *textReader) Read(p []byte) (int, error) {
	w := copy(p, t.pend)
	t.pend = t.pend[w:]
	for w < len(p) && t.err == nil {
		if t.n-t.i < lookahead {
			if err := t.more(lookahead); err != nil {
				t.err = err
				break
			}
			if t.i == t.n {
				t.err = io.EOF
				break
			}
		}
		c := t.in[t.i]
		if c < utf8.RuneSelf && c != '\\' || c == '\\' && t.i+1 < t.n && simpleEscape[t.in[t.i+1]] != 0 {
			w = t.copyRun(p, w)
		} else {
			w = t.decodeUnit(p, w)
		}
	}
	if w > 0 && errors.Is(t.err, io.EOF) {
		return w, nil
	}
	if w > 0 || len(p) == 0 {
		return w, nil
	}
	return 0, t.err
}

// copyRun decodes into p[w:] the run of plain ASCII and one-letter
// escapes at in[i], as much as fits, and returns where it stopped in p.
// The rest (\u, UTF-8, an escape cut by the buffer's end) is
// decodeUnit's.
func (t *textReader) copyRun(p []byte, w int) int {
	i, end, in := t.i, t.n, t.in
	for w < len(p) && i < end {
		if t.wide {
			// Base64: up to the next backslash at once, when that run
			// is ASCII.
			lim := min(end, i+len(p)-w)
			if k := bytes.IndexByte(in[i:lim], '\\'); k >= 0 {
				lim = i + k
			}
			if isASCII(in[i:lim]) {
				w += copy(p[w:], in[i:lim])
				i = lim
			}
		}
		// Eight bytes at a time while they fit: all copied, kept up to
		// the first that ends the plain run.
		for w+8 <= len(p) && i+8 <= end {
			v := binary.LittleEndian.Uint64(in[i:])
			binary.LittleEndian.PutUint64(p[w:], v)
			k := plainLen(v)
			i, w = i+k, w+k
			if k < 8 {
				break
			}
		}
		if w == len(p) || i == end {
			break
		}
		switch c := in[i]; {
		case c < utf8.RuneSelf && c != '\\':
			p[w] = c
			i, w = i+1, w+1
		case c == '\\' && i+1 < end && simpleEscape[in[i+1]] != 0:
			p[w] = simpleEscape[in[i+1]]
			i, w = i+2, w+1
		default:
			end = i // decodeUnit takes it
		}
	}
	t.i = i
	return w
}

// decodeUnit decodes into p[w:] the character at in[i]: an escape
// (unescape) or UTF-8, invalid UTF-8 as U+FFFD. What does not fit in p
// waits in pend. An invalid escape is t.err.
func (t *textReader) decodeUnit(p []byte, w int) int {
	var r rune
	var size int
	if t.in[t.i] == '\\' {
		var err error
		if r, size, err = unescape(t.in[t.i:t.n]); err != nil {
			t.err = err
			return w
		}
	} else {
		r, size = utf8.DecodeRune(t.in[t.i:t.n])
	}
	t.i += size
	k := utf8.EncodeRune(t.rune[:], r)
	c := copy(p[w:], t.rune[:k])
	t.pend = t.rune[c:k] // what did not fit
	return w + c
}

// plainLen is how many of v's eight bytes (little-endian: from its low
// end) come before the first that ends a plain ASCII run: a backslash or
// a byte over 0x7f; 8 if none does. (The zero-byte test may also flag a
// byte after the first zero, never one before it.)
func plainLen(v uint64) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	b := v ^ (ones * '\\')
	return bits.TrailingZeros64(((b-ones)&^b|v)&highs) / 8
}

// isASCII reports whether b has no byte over 0x7f, eight at a time.
func isASCII(b []byte) bool {
	var or uint64
	for len(b) >= 8 {
		or |= binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	for _, c := range b {
		or |= uint64(c)
	}
	return or&0x8080808080808080 == 0
}

// simpleEscape maps the letter after a backslash to its byte, for the
// escapes other than \u; 0 for the rest.
var simpleEscape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescape decodes the escape at the start of b, with b holding at least
// lookahead bytes unless the input ends sooner.
func unescape(b []byte) (r rune, size int, err error) {
	r, size, ok := jsonesc.Decode(b)
	if !ok {
		return 0, 0, errEscape
	}
	return r, size, nil
}

// ErrBase64 is the read error of Base64 for text that is not base64.
var ErrBase64 = errors.New("spill: malformed base64")

// base64Reader decodes base64 text in chunks: line breaks are ignored,
// trailing padding is stripped (so padded and unpadded text both decode),
// and '=' anywhere but at the end is malformed.
type base64Reader struct {
	src   io.Reader
	in    []byte // in[:n] read, line breaks and padding removed, not decoded
	n     int
	out   []byte // decoded, not yet handed out (in spare)
	spare []byte // what a Read too small for a whole chunk decodes into
	pads  int    // '=' seen
	eof   bool
	err   error // sticky
}

func newBase64Reader(text io.Reader) io.Reader {
	return &base64Reader{src: text, in: make([]byte, 64<<10)}
}

func (b *base64Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.fill()
		// Whole quanta only, until the end: then the tail too.
		q := b.n / 4 * 4
		if b.eof {
			q = b.n
		}
		if q == 0 {
			if b.eof && b.err == nil {
				b.err = io.EOF
			}
			continue
		}
		dst, direct := p, len(p) >= base64.RawStdEncoding.DecodedLen(q)
		if !direct {
			if cap(b.spare) < base64.RawStdEncoding.DecodedLen(q) {
				b.spare = make([]byte, base64.RawStdEncoding.DecodedLen(q))
			}
			dst = b.spare[:cap(b.spare)]
		}
		// The bulk eight letters at a time, the rest (and whatever
		// stopped the bulk: a byte outside the alphabet) the library's way.
		k, m := decodeBulk(dst, b.in[:q])
		k2, err := base64.RawStdEncoding.Decode(dst[k:], b.in[m:q])
		k += k2
		if err != nil {
			b.err = ErrBase64
			return 0, b.err
		}
		b.n = copy(b.in, b.in[q:b.n])
		if direct {
			return k, nil
		}
		b.out = dst[:k]
	}
	k := copy(p, b.out)
	b.out = b.out[k:]
	return k, nil
}

// fill reads more text into b.in, unless the end or an error came.
func (b *base64Reader) fill() {
	if b.eof || b.err != nil {
		return
	}
	k, err := b.src.Read(b.in[b.n:])
	chunk := b.in[b.n : b.n+k]
	if bytes.IndexByte(chunk, '\n') >= 0 || bytes.IndexByte(chunk, '\r') >= 0 || bytes.IndexByte(chunk, '=') >= 0 || b.pads > 0 {
		w := 0
		for _, c := range chunk {
			switch {
			case c == '\n' || c == '\r':
				continue
			case c == '=':
				if b.pads++; b.pads > 2 {
					b.err = ErrBase64
					return
				}
				continue
			case b.pads > 0:
				b.err = ErrBase64
				return
			}
			chunk[w] = c
			w++
		}
		k = w
	}
	b.n += k
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
}

// b64Quad[j][c] is letter c's six bits placed for position j of a
// four-letter quantum (bits 18, 12, 6, 0), or all ones for a byte outside
// the standard alphabet: a quantum is the OR of four lookups, and any
// bit above the 24th says it held a non-letter.
var b64Quad = func() (t [4][256]uint32) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for j := range t {
		for c := range t[j] {
			t[j][c] = ^uint32(0)
		}
		for v, c := range []byte(alphabet) {
			t[j][c] = uint32(v) << (18 - 6*j)
		}
	}
	return t
}()

// decodeBulk decodes src eight letters (six bytes) at a time, while dst
// has eight bytes of room (each step stores a whole word), and stops
// before eight that hold a byte outside the standard alphabet. It returns
// the bytes written and the letters read: a multiple of eight, so the
// rest starts on a quantum. It is what base64.RawStdEncoding.Decode does
// for such input, at about 1.6 times its pace.
func decodeBulk(dst, src []byte) (n, m int) {
	t0, t1, t2, t3 := &b64Quad[0], &b64Quad[1], &b64Quad[2], &b64Quad[3]
	for len(src)-m >= 8 && len(dst)-n >= 8 {
		s := src[m : m+8]
		a := t0[s[0]] | t1[s[1]] | t2[s[2]] | t3[s[3]]
		b := t0[s[4]] | t1[s[5]] | t2[s[6]] | t3[s[7]]
		if (a|b)>>24 != 0 {
			break
		}
		binary.BigEndian.PutUint64(dst[n:], uint64(a)<<40|uint64(b)<<16)
		n += 6
		m += 8
	}
	return n, m
}

// letters decodes the escaped bytes of a JSON string of base64 straight
// from its source, eight letters at a time, while they are letters of the
// standard alphabet: an encoder's usual output, which needs no unescaping.
// At the first eight that are not (an escape, a line break, padding,
// anything else) the rest, from that quantum on, goes the general way
// (decodeBase64Escaped); so does a last group of fewer than eight.
type letters struct {
	src  io.Reader
	in   []byte // in[i:n] read, not decoded
	i, n int
	eof  bool
	err  error     // the source's, sticky
	rest io.Reader // the general decoder, once the letters stopped
}

func (l *letters) Read(p []byte) (int, error) {
	for l.rest == nil {
		if l.err != nil {
			return 0, l.err
		}
		if k, m := decodeBulk(p, l.in[l.i:l.n]); k > 0 {
			l.i += m
			return k, nil
		}
		if l.eof && len(p) >= 8 {
			if k, ok := decodeTail(p, l.in[l.i:l.n]); ok {
				l.i, l.err = l.n, io.EOF
				if k == 0 {
					return 0, io.EOF
				}
				return k, nil
			}
		}
		if l.n-l.i >= 8 || l.eof || len(p) < 8 {
			// Not eight letters, or the last few, or no room for a
			// group's word: the general way from here.
			l.rest = decodeBase64Escaped(io.MultiReader(bytes.NewReader(l.in[l.i:l.n]), l.src))
			break
		}
		l.n = copy(l.in, l.in[l.i:l.n])
		l.i = 0
		k, err := l.src.Read(l.in[l.n:])
		l.n += k
		if err == io.EOF {
			l.eof = true
		} else if err != nil {
			l.err = err
		}
	}
	return l.rest.Read(p)
}

// decodeTail decodes the last few letters of base64, fewer than eight,
// with up to two '=' of padding after them, into dst (room for six
// bytes): what the general way gives for them, without setting it up (two
// buffers, 96 KiB, for every string's end). ok is false for anything
// else, which the general way takes and judges.
func decodeTail(dst, src []byte) (int, bool) {
	for k := 0; k < 2 && len(src) > 0 && src[len(src)-1] == '='; k++ {
		src = src[:len(src)-1]
	}
	if len(src) >= 8 {
		return 0, false
	}
	for _, c := range src {
		if b64Quad[0][c] == ^uint32(0) {
			return 0, false
		}
	}
	k, err := base64.RawStdEncoding.Decode(dst, src)
	return k, err == nil
}
