// Package ndjson is the stdio transport of MCP: newline-delimited JSON-RPC
// over a byte stream, used for a child process's stdin/stdout and for
// Spillway's own stdio face.
//
// A Reader yields one message per line under a size cap: a longer line is
// discarded as it streams past, never held, and reported as a
// *TooLargeError carrying its first and last bytes, so the request waiting
// for it can still be answered. A Reader given a spill.Spooler (for an
// upstream peer) never holds a line whole: its long strings go to disk as
// they arrive, and the cap applies only to what stays in memory. A Writer
// writes each message as exactly one line (in one Write, unless it expands
// spill markers for a client), from a goroutine of its own, so a peer that
// never reads blocks neither the caller past its context nor Close. Conn
// joins the two into the connection contract the upstream clients share.
package ndjson

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// DefaultMaxMessage is the cap on one message when none is given: the
// same as for an HTTP upstream's JSON bodies.
const DefaultMaxMessage = 1 << 30

const (
	bufSize = 64 << 10
	// headSize and tailSize are what a too-large message keeps of itself:
	// room for an envelope's id at either end, and for a log line.
	headSize = 4 << 10
	tailSize = 256
	// firstBlock and maxBlock bound the blocks a long line is gathered in.
	firstBlock = 256 << 10
	maxBlock   = 1 << 20
)

// TooLargeError reports a line longer than the Reader's cap (with a
// Spooler: a line whose part kept in memory is longer), or one its Spooler
// had no room for. The line was discarded; reading goes on with the next
// one.
type TooLargeError struct {
	Limit int64  // the cap
	Size  int64  // the line's length, without its terminator
	Head  []byte // its first bytes
	Tail  []byte // its last bytes
	// Err says why the Spooler could not keep the line's long strings
	// (spill.ErrFull, or a spill file error); nil when the line passed the
	// cap.
	Err error
}

func (e *TooLargeError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("wire: message of %d bytes dropped: %v", e.Size, e.Err)
	}
	return fmt.Sprintf("wire: message of %d bytes exceeds the %d byte limit", e.Size, e.Limit)
}

func (e *TooLargeError) Unwrap() error { return e.Err }

// MalformedError reports a line that is not one JSON-RPC message (invalid
// JSON, a batch, pretty-printed JSON split over lines). The line was
// discarded; reading goes on with the next one.
type MalformedError struct {
	Line []byte // the line's first bytes, for the log
	Size int    // the line's length
	Err  error  // what the decoder said
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("wire: malformed message (%d bytes): %v", e.Size, e.Err)
}

func (e *MalformedError) Unwrap() error { return e.Err }

// Code is the JSON-RPC error that answers the line: -32700 (parse error)
// when it is not JSON, -32600 (invalid request) when it is JSON but not
// one message.
func (e *MalformedError) Code() int {
	if errors.Is(e.Err, jsonrpc.ErrMalformed) {
		return jsonrpc.CodeParseError
	}
	return jsonrpc.CodeInvalidRequest
}

// Reader reads newline-delimited JSON-RPC messages. Lines may end in
// "\r\n"; blank lines are skipped; a last line without a newline counts.
// A line within the cap is kept in about its own size, however long: it is
// gathered in blocks (up to 1 MiB each) and joined once, never grown in a
// doubling buffer; only while it is joined are blocks and copy both alive.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	br    *bufio.Reader
	max   int64
	spool *spill.Spooler // nil: lines are held in memory
	err   error          // sticky: the underlying reader's error
}

// NewReader reads from r with a cap of max bytes per message (≤ 0:
// DefaultMaxMessage).
func NewReader(r io.Reader, max int64) *Reader {
	return newReaderSize(r, max, bufSize)
}

// NewSpoolingReader reads from r as NewReader does, but reads each line
// through s (see spill.Spooler.Read): strings past its threshold go to
// disk as they arrive and come back as markers, and max caps only what
// stays in memory. A line s has no room for is a *TooLargeError whose Err
// is spill.ErrFull. Use it only for an upstream peer: the markers it makes
// are expanded by whatever writes the message to a client.
func NewSpoolingReader(r io.Reader, max int64, s *spill.Spooler) *Reader {
	rd := newReaderSize(r, max, bufSize)
	rd.spool = s
	return rd
}

// newReaderSize lets tests use a small buffer, to cross its edges often.
func newReaderSize(r io.Reader, max int64, size int) *Reader {
	if max <= 0 {
		max = DefaultMaxMessage
	}
	return &Reader{br: bufio.NewReaderSize(r, size), max: max}
}

// Read returns the next message. A *TooLargeError or a *MalformedError
// reports one line skipped, and the next Read goes on after it; io.EOF
// reports the end of input; any other error is the underlying reader's,
// and every later Read returns it again.
func (r *Reader) Read() (*jsonrpc.Message, error) {
	for {
		line, err := r.next()
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			return nil, &MalformedError{Line: bytes.Clone(line[:min(len(line), tailSize)]), Size: len(line), Err: err}
		}
		return m, nil
	}
}

// next reads the next line, held or spooled.
func (r *Reader) next() ([]byte, error) {
	if r.spool != nil {
		return r.spooled()
	}
	return r.line()
}

// spooled reads one line through the Spooler: what stays of it in memory,
// without "\r\n".
func (r *Reader) spooled() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.shortLine() {
		return r.line()
	}
	lr := &lineReader{br: r.br}
	out, err := r.spool.Read(lr, r.max+1) // +1: a "\r" before the "\n" is not the message's
	if lr.err != nil {
		r.err = lr.err // for the next call
		if !errors.Is(lr.err, io.EOF) {
			return nil, lr.err // the line is cut: dropped (and its spill freed)
		}
	}
	switch {
	case err == nil:
		line := bytes.TrimSuffix(out, []byte("\r"))
		if int64(len(line)) > r.max {
			return nil, lr.tooLarge(r.max, nil)
		}
		return line, nil
	case errors.Is(err, io.EOF): // a blank line
		if lr.err != nil && lr.size == 0 {
			return nil, lr.err
		}
		return r.blank(lr)
	}
	io.Copy(io.Discard, lr) // the rest of the line streams past
	if lr.err != nil && !errors.Is(lr.err, io.EOF) {
		r.err = lr.err
		return nil, lr.err
	}
	switch {
	case errors.Is(err, spill.ErrTooLarge):
		return nil, lr.tooLarge(r.max, nil)
	case lr.size <= headSize && len(bytes.TrimSpace(lr.head)) == 0:
		return r.blank(lr) // blank as NewReader sees it ("\v", U+0085)
	case errors.Is(err, jsonrpc.ErrMalformed):
		return nil, &MalformedError{Line: lr.head[:min(len(lr.head), tailSize)], Size: int(lr.size), Err: err}
	}
	// spill.ErrFull, or a spill file that could not be written: this
	// message is lost, the connection goes on.
	return nil, lr.tooLarge(r.max, err)
}

// shortLine reports whether the next line is already buffered whole and
// could not spill: shorter than the Spooler's threshold, without a string
// spelt as a marker. Such a line, the most common, is read as NewReader
// reads it, at its cost.
func (r *Reader) shortLine() bool {
	if r.br.Buffered() == 0 {
		r.br.Peek(1) // a read error is line's to report
	}
	b, _ := r.br.Peek(r.br.Buffered())
	k := bytes.IndexByte(b, '\n')
	return k >= 0 && int64(k) <= r.spool.Threshold() && !spill.MayHoldMarker(b[:k])
}

// blank skips a blank line, read to its end, as NewReader does: one over
// the cap is reported.
func (r *Reader) blank(lr *lineReader) ([]byte, error) {
	if e := lr.tooLarge(r.max, nil); e.Size > r.max {
		return nil, e
	}
	return nil, nil
}

// lineReader reads one line from br, without its "\n", keeping the line's
// first and last bytes for error reports.
type lineReader struct {
	br         *bufio.Reader
	done       bool  // the line ended
	err        error // the underlying reader's, io.EOF included
	size       int64
	head, tail []byte
}

func (l *lineReader) Read(p []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	if _, err := l.br.Peek(1); err != nil {
		l.done, l.err = true, err
		return 0, err
	}
	b, _ := l.br.Peek(min(len(p), l.br.Buffered()))
	n, skip := len(b), 0
	if k := bytes.IndexByte(b, '\n'); k >= 0 {
		n, skip, l.done = k, 1, true
	}
	copy(p, b[:n])
	l.br.Discard(n + skip)
	if len(l.head) < headSize {
		l.head = append(l.head, b[:min(n, headSize-len(l.head))]...)
	}
	l.tail = keepTail(l.tail, b[:n])
	l.size += int64(n)
	return n, nil
}

// tooLarge reports the line, which has been read to its end.
func (l *lineReader) tooLarge(limit int64, err error) *TooLargeError {
	e := &TooLargeError{Limit: limit, Size: l.size, Head: l.head, Tail: l.tail, Err: err}
	if bytes.HasSuffix(e.Tail, []byte("\r")) {
		e.Size--
		e.Tail = e.Tail[:len(e.Tail)-1]
	}
	return e
}

// line reads up to and without "\n" or "\r\n".
func (r *Reader) line() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	var g gathered
	for {
		chunk, err := r.br.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		more := errors.Is(err, bufio.ErrBufferFull)
		g.add(chunk, more, r.max)
		if more {
			continue
		}
		if err != nil {
			r.err = err // for the next call
			if err != io.EOF {
				return nil, err // the line is cut: drop it
			}
		}
		return g.line(r.max, err)
	}
}

// gathered holds what Reader.line has read of a line: the line in
// blocks, or, once it passed the cap, only the ends a TooLargeError
// keeps (over).
type gathered struct {
	blocks [][]byte // full blocks of a long line
	cur    []byte   // the block being filled
	total  int64    // bytes of the line so far
	over   *TooLargeError
}

// add gathers the next chunk of the line; more says the line goes on
// past it. The cap is limit and one byte, room for a "\r" before the
// "\n" that is not the message's.
func (g *gathered) add(chunk []byte, more bool, limit int64) {
	g.total += int64(len(chunk))
	switch {
	case g.over != nil:
		g.over.Tail = keepTail(g.over.Tail, chunk)
	case g.total > limit+1:
		g.over = &TooLargeError{Limit: limit}
		for _, p := range append(append(g.blocks, g.cur), chunk) {
			g.over.Head = append(g.over.Head, p[:min(len(p), headSize-len(g.over.Head))]...)
			g.over.Tail = keepTail(g.over.Tail, p)
		}
		g.blocks, g.cur = nil, nil
	case g.cur == nil && !more:
		// The common case: the whole line was in the buffer.
		g.cur = bytes.Clone(chunk)
	default:
		for len(chunk) > 0 {
			if len(g.cur) == cap(g.cur) {
				if g.cur != nil {
					g.blocks = append(g.blocks, g.cur)
				}
				g.cur = make([]byte, 0, min(max(2*cap(g.cur), firstBlock), maxBlock))
			}
			n := copy(g.cur[len(g.cur):cap(g.cur)], chunk)
			g.cur, chunk = g.cur[:len(g.cur)+n], chunk[n:]
		}
	}
}

// line returns the line gathered, read to its end (err is io.EOF when
// the input ended there, else nil), without a trailing "\r"; or a
// *TooLargeError when it is over limit; or err for an empty last line.
func (g *gathered) line(limit int64, err error) ([]byte, error) {
	if g.over != nil {
		g.over.Size = g.total
		if bytes.HasSuffix(g.over.Tail, []byte("\r")) {
			g.over.Size--
			g.over.Tail = g.over.Tail[:len(g.over.Tail)-1]
		}
		return nil, g.over
	}
	line := bytes.TrimSuffix(join(g.blocks, g.cur), []byte("\r"))
	switch {
	case int64(len(line)) > limit: // over by the byte of room kept for a "\r"
		return nil, &TooLargeError{Limit: limit, Size: int64(len(line)),
			Head: bytes.Clone(line[:min(len(line), headSize)]), Tail: keepTail(nil, line)}
	case len(line) == 0 && err != nil:
		return nil, err
	}
	return line, nil
}

// join makes the blocks one slice. A single block is kept unless most of
// a gathering block would be wasted.
func join(blocks [][]byte, cur []byte) []byte {
	if len(blocks) == 0 && (cap(cur) < firstBlock || cap(cur)-len(cur) <= len(cur)/8) {
		return cur
	}
	n := len(cur)
	for _, b := range blocks {
		n += len(b)
	}
	line := make([]byte, 0, n)
	for _, b := range blocks {
		line = append(line, b...)
	}
	return append(line, cur...)
}

// keepTail appends p to tail and keeps the last tailSize bytes.
func keepTail(tail, p []byte) []byte {
	if len(p) >= tailSize {
		return append(tail[:0], p[len(p)-tailSize:]...)
	}
	tail = append(tail, p...)
	if len(tail) > tailSize {
		tail = append(tail[:0], tail[len(tail)-tailSize:]...)
	}
	return tail
}
