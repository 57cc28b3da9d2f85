package offload

import (
	"io"
	"unicode/utf8"

	"github.com/spillway-dev/spillway/artifact/preview/jsonesc"
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

// unescape decodes the escape at r.i into pending. lit passed
// json.Valid, so the escape is whole; were it not, the reader would
// still move on, keeping the letter after the backslash.
func (r *stringReader) unescape() {
	// A one-letter escape (\" above all, in a text item that holds JSON)
	// is read here, without a call.
	if r.i+1 < len(r.lit) {
		if c := jsonesc.Short(r.lit[r.i+1]); c != 0 {
			r.pending[0], r.pp, r.np = c, 0, 1
			r.i += 2
			return
		}
	}
	ru, size, ok := jsonesc.Decode(r.lit[r.i:])
	if !ok {
		ru, size = rune(r.lit[min(r.i+1, len(r.lit)-1)]), min(2, len(r.lit)-r.i)
	}
	r.i += size
	r.pp, r.np = 0, utf8.EncodeRune(r.pending[:], ru)
}
