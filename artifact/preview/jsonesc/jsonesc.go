// Package jsonesc reads the escapes of JSON strings for the scanners that
// read JSON text byte by byte instead of through encoding/json: the
// preview's analyser, the offloader's string reader and the spilled
// strings' text reader. It decodes one escape as encoding/json does, and
// tells which bytes of a text lie inside a string.
//
// Everything here is a pure function of its arguments or of a value the
// caller owns; nothing allocates.
package jsonesc

import (
	"unicode/utf16"
	"unicode/utf8"
)

// short maps the letter after a backslash to the byte it stands for.
var short = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// Short returns the byte that the one-letter escape with letter c stands
// for (c is the byte after the backslash: one of " \ / b f n r t), or 0
// if c makes no one-letter escape ('u' included).
func Short(c byte) byte { return short[c] }

// hexVal maps a hex digit (either case) to its value, and every other
// byte to -1.
var hexVal = func() (t [256]int8) {
	for c := range t {
		t[c] = -1
	}
	for i, c := range []byte("0123456789abcdef") {
		t[c] = int8(i)
	}
	for i, c := range []byte("ABCDEF") {
		t[c] = int8(10 + i)
	}
	return t
}()

// HexDigit returns the value of the hex digit c (either case), or -1 if
// c is not one.
func HexDigit(c byte) rune { return rune(hexVal[c]) }

// hex4 decodes the four hex digits at the start of b, or returns -1 if b
// does not start with four. It reads them without a branch per digit.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	d0, d1, d2, d3 := hexVal[b[0]], hexVal[b[1]], hexVal[b[2]], hexVal[b[3]]
	if d0|d1|d2|d3 < 0 {
		return -1
	}
	return rune(d0)<<12 | rune(d1)<<8 | rune(d2)<<4 | rune(d3)
}

// Decode decodes the escape at the start of b, whose first byte is the
// backslash, as encoding/json decodes it. It returns the rune, the
// number of bytes of b it read, and ok.
//
// A one-letter escape reads 2 bytes and a \uXXXX escape 6. A high
// surrogate followed by a \u escape of a low one is one rune and reads
// 12 bytes. A surrogate without its other half is U+FFFD and reads 6
// bytes: the escape after it, if any, is read by the next call. So that
// a pair is found, b should hold 12 bytes when the text has them.
//
// ok is false, with r and size 0, if b does not start with a whole valid
// escape: a letter that makes no escape, a \u without four hex digits,
// or b cut short.
func Decode(b []byte) (r rune, size int, ok bool) {
	if len(b) < 2 {
		return 0, 0, false
	}
	if c := short[b[1]]; c != 0 {
		return rune(c), 2, true
	}
	if b[1] != 'u' {
		return 0, 0, false
	}
	r = hex4(b[2:])
	if r < 0 {
		return 0, 0, false
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, true
	}
	if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
		if r2 := hex4(b[8:]); r2 >= 0 {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12, true
			}
		}
	}
	return utf8.RuneError, 6, true
}

// Strings follows JSON text one byte at a time and tells which bytes lie
// inside a string literal, so that a scanner can find the structure
// (brackets, commas, spaces) around strings without decoding them. It
// reads escapes only far enough to know that an escaped quote does not
// end a string, and does not check that the text is valid.
//
// The zero value is outside any string. A Strings is not safe for
// concurrent use.
type Strings struct {
	in, esc bool
}

// Step reads the next byte c of the text and reports whether c is part
// of a string literal: its opening and closing quotes and every byte
// between them.
func (s *Strings) Step(c byte) bool {
	switch {
	case s.esc:
		s.esc = false
	case !s.in:
		s.in = c == '"'
		return s.in
	case c == '\\':
		s.esc = true
	case c == '"':
		s.in = false
	}
	return true
}

// In reports whether the bytes read so far end inside a string, that is,
// whether a string is open.
func (s *Strings) In() bool { return s.in }
