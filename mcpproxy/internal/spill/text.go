package spill

import (
	"encoding/base64"
	"errors"
	"io"
	"unicode/utf16"
	"unicode/utf8"
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
			// A run of plain ASCII and one-byte escapes, as much as
			// fits; the rest (\u, UTF-8, an escape cut by the buffer's
			// end) takes the way below.
			i, end, in := t.i, t.n, t.in
			for w < len(p) && i < end {
				switch c := in[i]; {
				case c < utf8.RuneSelf && c != '\\':
					p[w] = c
					i++
				case c == '\\' && i+1 < end && simpleEscape[in[i+1]] != 0:
					p[w] = simpleEscape[in[i+1]]
					i += 2
				default:
					end = i // the slow path takes it
					continue
				}
				w++
			}
			t.i = i
			continue
		}
		var r rune
		if c == '\\' {
			var size int
			var err error
			if r, size, err = unescape(t.in[t.i:t.n]); err != nil {
				t.err = err
				break
			}
			t.i += size
		} else {
			var size int
			r, size = utf8.DecodeRune(t.in[t.i:t.n])
			t.i += size
		}
		k := utf8.EncodeRune(t.rune[:], r)
		c2 := copy(p[w:], t.rune[:k])
		w += c2
		t.pend = t.rune[c2:k] // what did not fit
	}
	if w > 0 && t.err == io.EOF {
		return w, nil
	}
	if w > 0 || len(p) == 0 {
		return w, nil
	}
	return 0, t.err
}

// simpleEscape maps the letter after a backslash to its byte, for the
// escapes other than \u; 0 for the rest.
var simpleEscape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescape decodes the escape at the start of b, with b holding at least
// lookahead bytes unless the input ends sooner.
func unescape(b []byte) (r rune, size int, err error) {
	if len(b) < 2 {
		return 0, 0, errEscape
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		r := hex4(b[2:])
		if r < 0 {
			return 0, 0, errEscape
		}
		if !utf16.IsSurrogate(r) {
			return r, 6, nil
		}
		if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if r2 := hex4(b[8:]); r2 >= 0 {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return d, 12, nil
				}
			}
		}
		return utf8.RuneError, 6, nil
	}
	return 0, 0, errEscape
}

// hex4 decodes four hex digits, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// ErrBase64 is the read error of Base64 for text that is not base64.
var ErrBase64 = errors.New("spill: malformed base64")

// base64Reader strips trailing padding, so that padded and unpadded text
// both decode; '=' anywhere but at the end is malformed.
type base64Reader struct {
	src  io.Reader
	pads int // '=' seen and held back
}

func newBase64Reader(text io.Reader) io.Reader {
	return &errMap{base64.NewDecoder(base64.RawStdEncoding, &base64Reader{src: text})}
}

func (b *base64Reader) Read(p []byte) (int, error) {
	n, err := b.src.Read(p)
	w := 0
	for _, c := range p[:n] {
		switch {
		case c == '=':
			b.pads++
			if b.pads > 2 {
				return 0, ErrBase64
			}
			continue
		case b.pads > 0 && c != '\n' && c != '\r':
			return 0, ErrBase64
		}
		p[w] = c
		w++
	}
	return w, err
}

// errMap makes base64's corruption errors ErrBase64.
type errMap struct{ r io.Reader }

func (e *errMap) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	var ce base64.CorruptInputError
	if errors.As(err, &ce) {
		err = ErrBase64
	}
	return n, err
}
