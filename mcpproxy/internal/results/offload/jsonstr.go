package offload

import (
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// stringReader streams the decoded bytes of a JSON string literal, as
// encoding/json decodes it (bytes that are not UTF-8 as U+FFFD). It
// lets the offloader store a 50 MB text item without first copying it
// into a decoded Go string. lit must be a valid literal, quotes included
// (the message passed json.Valid).
type stringReader struct {
	lit     []byte
	i       int // next byte of lit
	pending [8]byte
	np, pp  int // pending[pp:np] awaits the caller
}

func newStringReader(lit []byte) *stringReader {
	return &stringReader{lit: lit[:len(lit)-1], i: 1}
}

func (r *stringReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if r.pp < r.np {
			c := copy(p[n:], r.pending[r.pp:r.np])
			r.pp += c
			n += c
			continue
		}
		if r.i >= len(r.lit) {
			break
		}
		// Copy the run up to the next escape, or byte that is not
		// UTF-8, in one go: characters whole, so that the next read
		// starts at one.
		j, lim := r.i, min(len(r.lit), r.i+len(p)-n)
		for {
			for j < lim && r.lit[j] != '\\' && r.lit[j] < utf8.RuneSelf {
				j++
			}
			if j == lim || r.lit[j] == '\\' {
				break
			}
			ru, size := utf8.DecodeRune(r.lit[j:])
			if ru == utf8.RuneError && size == 1 || j+size > lim {
				break
			}
			j += size
		}
		if j > r.i {
			n += copy(p[n:], r.lit[r.i:j])
			r.i = j
			continue
		}
		if r.lit[r.i] >= utf8.RuneSelf {
			r.pendRune()
			continue
		}
		r.unescape()
	}
	if n == 0 && r.i >= len(r.lit) && r.pp >= r.np {
		return 0, io.EOF
	}
	return n, nil
}

// pendRune decodes the character at r.i into pending: a byte that is
// not UTF-8 as U+FFFD, as encoding/json and the spilled strings' decoder
// read it, so that a string stores the same bytes whether it was spilled
// or not; or a whole character the caller's buffer had no room left for.
func (r *stringReader) pendRune() {
	ru, size := utf8.DecodeRune(r.lit[r.i:])
	r.pp, r.np = 0, utf8.EncodeRune(r.pending[:], ru)
	r.i += size
}

// unescape decodes the escape at r.i into pending.
func (r *stringReader) unescape() {
	r.pp, r.np = 0, 0
	c := r.lit[r.i+1]
	r.i += 2
	var b byte
	switch c {
	case 'b':
		b = '\b'
	case 'f':
		b = '\f'
	case 'n':
		b = '\n'
	case 'r':
		b = '\r'
	case 't':
		b = '\t'
	case 'u':
		ru := r.hex4()
		if utf16.IsSurrogate(ru) {
			ru2 := utf8.RuneError
			if r.i+6 <= len(r.lit) && r.lit[r.i] == '\\' && r.lit[r.i+1] == 'u' {
				save := r.i
				r.i += 2
				ru2 = r.hex4()
				if d := utf16.DecodeRune(ru, ru2); d != utf8.RuneError {
					ru = d
				} else {
					r.i = save // not a pair: the second escape stands alone
					ru = utf8.RuneError
				}
			} else {
				ru = utf8.RuneError
			}
		}
		r.np = utf8.EncodeRune(r.pending[:], ru)
		return
	default: // '"', '\\', '/'
		b = c
	}
	r.pending[0], r.np = b, 1
}

func (r *stringReader) hex4() rune {
	var v rune
	for _, h := range r.lit[r.i : r.i+4] {
		v <<= 4
		switch {
		case h >= '0' && h <= '9':
			v |= rune(h - '0')
		case h >= 'a' && h <= 'f':
			v |= rune(h-'a') + 10
		case h >= 'A' && h <= 'F':
			v |= rune(h-'A') + 10
		}
	}
	r.i += 4
	return v
}
