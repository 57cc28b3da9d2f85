package arttools

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// maxLine caps the bytes of one line an answer shows (a minified JSON
// document is one line); the rest is named, with the byte offset to read
// it from.
const maxLine = 8 << 10

// lineReader reads lines of any length, keeping a bounded prefix of each.
type lineReader struct {
	br  *bufio.Reader
	pos int64 // byte offset of the next line
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// line is one line, without its "\n" or "\r\n".
type line struct {
	text  []byte // at most keep bytes of it
	start int64  // its byte offset
	size  int    // its full length
}

// next returns the next line, keeping at most keep bytes of it, and
// io.EOF after the last one. A last line without "\n" is a line. It
// returns ctx's error once ctx ends (checked every 64 KiB of a line).
func (l *lineReader) next(ctx context.Context, keep int) (line, error) {
	ln := line{start: l.pos}
	var raw int
	nl := false
	var tail [2]byte // the last two bytes read: is there a "\r\n"?
	for {
		if err := ctx.Err(); err != nil {
			return line{}, err
		}
		frag, err := l.br.ReadSlice('\n')
		raw += len(frag)
		for _, b := range frag[max(0, len(frag)-2):] {
			tail[0], tail[1] = tail[1], b
		}
		if room := keep - len(ln.text); room > 0 {
			ln.text = append(ln.text, frag[:min(room, len(frag))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return line{}, err
		}
		if raw == 0 {
			return line{}, io.EOF
		}
		nl = err == nil
		break
	}
	l.pos += int64(raw)
	ln.size = raw
	if nl {
		end := 1
		if raw >= 2 && tail[0] == '\r' {
			end = 2
		}
		ln.size -= end
		ln.text = ln.text[:min(len(ln.text), ln.size)]
	}
	return ln, nil
}

// show returns a line as an answer shows it: valid UTF-8, cut lines
// named with their length and where they start.
func (ln line) show() string {
	s := strings.ToValidUTF8(string(ln.text), "\uFFFD")
	if ln.size > len(ln.text) {
		s += fmt.Sprintf(" … [line cut: %d bytes; read the rest by bytes from byteOffset=%d]", ln.size, ln.start+int64(len(ln.text)))
	}
	return s
}

// readLines answers read by lines: lines Offset to Offset+Limit-1,
// numbered.
func (r *Runner) readLines(ctx context.Context, c Call, src Source) (string, error) {
	rc, err := src.Open(ctx, 0, -1)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	lr := newLineReader(rc)
	n := 0 // lines read
	for ; n+1 < c.Offset; n++ {
		if _, err := lr.next(ctx, 0); err != nil {
			return "", pastEnd(err, c.Offset, n)
		}
	}
	a := answer{max: r.lim.MaxAnswer}
	eof := false
	for got := 0; got < c.Limit && !a.cut; got++ {
		ln, err := lr.next(ctx, maxLine)
		if errors.Is(err, io.EOF) {
			eof = true
			break
		}
		if err != nil {
			return "", err
		}
		n++
		a.add(fmt.Sprintf("%6d\t%s\n", n, ln.show()))
	}
	if !eof {
		_, err := lr.br.Peek(1)
		eof = errors.Is(err, io.EOF)
	}
	switch {
	case n < c.Offset && c.Offset > 1:
		return "", invalid("offset %d is past the last line: the artifact has %d lines", c.Offset, n)
	case n < c.Offset:
		return src.URI + ": the artifact is empty\n", nil
	case eof:
		return fmt.Sprintf("%s lines %d-%d of %d (end)\n", src.URI, c.Offset, n, n) + a.String(), nil
	}
	return fmt.Sprintf("%s lines %d-%d (more follow: offset=%d)\n", src.URI, c.Offset, n, n+1) + a.String(), nil
}

// pastEnd turns the end of the artifact while skipping to offset into
// an out-of-range error.
func pastEnd(err error, offset, lines int) error {
	if errors.Is(err, io.EOF) {
		return invalid("offset %d is past the last line: the artifact has %d lines", offset, lines)
	}
	return err
}

// readBytes answers read by bytes. A text window is moved inwards to
// whole UTF-8 characters (at most 3 bytes at each end) and its exact
// range stated; a window that is not UTF-8 text is sent as base64.
func (r *Runner) readBytes(ctx context.Context, c Call, src Source) (string, error) {
	off := c.ByteOffset
	if off >= src.Size {
		if src.Size == 0 && off == 0 {
			return src.URI + ": the artifact is empty\n", nil
		}
		return "", invalid("byteOffset %d is past the end: the artifact is %d bytes", off, src.Size)
	}
	n := min(c.ByteLength, src.Size-off, int64(r.lim.MaxAnswer))
	rc, err := src.Open(ctx, off, n)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, n))
	if err != nil {
		return "", err
	}
	end := off + int64(len(data))
	next := ""
	if end < src.Size {
		next = fmt.Sprintf("; next: byteOffset=%d", end)
	}
	lo, hi := runeWindow(data, off > 0, end < src.Size)
	if w := data[lo:hi]; utf8.Valid(w) {
		if hi < len(data) {
			next = fmt.Sprintf("; next: byteOffset=%d", off+int64(hi))
		}
		return fmt.Sprintf("%s bytes %d-%d of %d (%d bytes of UTF-8 text%s)\n", src.URI, off+int64(lo), off+int64(hi), src.Size, hi-lo, next) + string(w), nil
	}
	if k := r.lim.MaxAnswer / 4 * 3; len(data) > k { // base64 grows it by a third
		data, end = data[:k], off+int64(k)
		next = fmt.Sprintf("; next: byteOffset=%d", end)
	}
	return fmt.Sprintf("%s bytes %d-%d of %d (%d bytes, not UTF-8 text: base64%s)\n", src.URI, off, end, src.Size, len(data), next) +
		base64.StdEncoding.EncodeToString(data), nil
}

// runeWindow returns the part of data made of whole UTF-8 characters:
// past the continuation bytes it starts with (when it starts inside the
// artifact) and before a character it ends inside (when more follows).
func runeWindow(data []byte, inside, more bool) (lo, hi int) {
	hi = len(data)
	if inside {
		for lo < 3 && lo < hi && !utf8.RuneStart(data[lo]) {
			lo++
		}
	}
	if more {
		for i := hi - 1; i >= max(lo, hi-3); i-- {
			if utf8.RuneStart(data[i]) {
				if !utf8.FullRune(data[i:hi]) {
					hi = i
				}
				break
			}
		}
	}
	return lo, hi
}
