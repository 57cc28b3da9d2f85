// Package sse reads and writes server-sent event streams (the WHATWG
// "text/event-stream" format) exactly enough for a relay to reproduce what
// it read: event ids (an id-only event stays id-only), event names,
// multi-line data, retry hints and comments such as keepalives.
//
// The Reader accepts LF, CRLF and lone CR line endings and never waits for
// the byte after a CR, so a live stream that ends its lines with CR does
// not stall. It bounds each event: an event over the limit is discarded up
// to its end and reported as a *TooLargeError carrying its id and first
// bytes, after which reading goes on with the next event.
//
// The Writer refuses what cannot be written as one field (an id, event
// name or comment containing a line break), so a value from a peer cannot
// inject fields or events, and flushes after each event. It expands the
// spill markers of an upstream message (package spill) as it writes, so
// the client gets the bytes the upstream sent.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// DefaultMaxEvent is the event size limit of a Reader given none.
const DefaultMaxEvent = 1 << 30

// headLen and tailLen are how much of a too-large event's data a
// TooLargeError keeps: room for a JSON-RPC envelope's id at either end
// (jsonrpc.Peek), and for a log line.
const (
	headLen = 4 << 10
	tailLen = 256
)

// Event is one block of an event stream: the fields and comments between
// two blank lines. The zero Event has no field at all.
//
// The Has flags record that a field was present even when its value is
// zero: an "id:" with an empty value resets the last event id, "retry: 0"
// asks for an immediate reconnection and "data:" alone is an event with
// empty data. The Writer writes a field when its value is non-zero or its
// flag is set.
type Event struct {
	ID    string
	HasID bool
	// Name is the "event" field; "" is the default type, "message".
	Name string
	// Data is the event's data lines joined by "\n".
	Data    []byte
	HasData bool
	// Retry is the reconnection delay the stream asks for, a whole number
	// of milliseconds.
	Retry    time.Duration
	HasRetry bool
	// Comments are the comment lines (":" lines) without the colon and one
	// following space, in order; keepalives such as ": ping" arrive here.
	Comments []string
}

// TooLargeError reports an event larger than the Reader's limit. The event
// was discarded up to its end; the Reader goes on with the next one.
type TooLargeError struct {
	Limit int64 // the cap
	Size  int64 // the event's size, every line and line end counted
	// ID and HasID are the event's id field, when it had one short enough
	// to keep.
	ID    string
	HasID bool
	// Head and Tail are the first (up to 4 KiB) and last (up to 256)
	// bytes of the event's data, for finding out which request the lost
	// message answered.
	Head, Tail []byte
	// Err says why the Reader's Spooler could not take the event's data
	// (not one JSON value, no room, what stays in memory over the limit);
	// nil when the event passed the limit.
	Err error
}

func (e *TooLargeError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("sse: event of %d bytes dropped: %v", e.Size, e.Err)
	}
	return fmt.Sprintf("sse: event of %d bytes exceeds the %d byte limit", e.Size, e.Limit)
}

func (e *TooLargeError) Unwrap() error { return e.Err }

// keep records data of the discarded event: its head, then its tail.
func (e *TooLargeError) keep(b []byte) {
	if room := headLen - len(e.Head); room > 0 {
		e.Head = append(e.Head, b[:min(len(b), room)]...)
	}
	if len(b) >= tailLen {
		e.Tail = append(e.Tail[:0], b[len(b)-tailLen:]...)
		return
	}
	if over := len(e.Tail) + len(b) - tailLen; over > 0 {
		e.Tail = e.Tail[:copy(e.Tail, e.Tail[over:])]
	}
	e.Tail = append(e.Tail, b...)
}

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	src io.Reader
	buf []byte
	mem *readMem // what buf and scratch were borrowed from (readBufs)
	// scratch holds a field's value (an id, a name, a retry hint, a
	// comment) while Next reads it.
	scratch []byte
	r, w    int
	err     error // the source's sticky error, returned once buffered bytes are used

	skipLF  bool  // the last line ended with CR: a LF right after it belongs to it
	started bool  // a leading byte-order mark was looked for
	off     int64 // bytes consumed so far
	max     int64

	lastID   string
	retry    time.Duration
	hasRetry bool

	spool      Spooler // nil: events are held in memory
	spillAfter int     // SpillAfter, but in tests

	// hold is the stream offset where the block being read starts: fill
	// keeps the block's bytes in buf from there, for Raw. It is noHold
	// between blocks and lostHold once the block no longer fits in buf.
	hold int64
	raw  []byte // the last event's bytes (Raw)

	// big is a larger buffer (spillBufSize) that replaces buf while an
	// event's data streams through the Spooler: fill swaps it in once grow
	// is set, and shrink gives it back between events, once what is
	// unread fits buf again.
	big  *[]byte
	grow bool
}

const (
	noHold   = -1
	lostHold = -2
)

// Spooler takes an event's data as it streams in and returns what of it
// stays in memory (a spill.Spooler: long JSON strings go to disk), at most
// maxInline bytes.
type Spooler interface {
	Read(r io.Reader, maxInline int64) ([]byte, error)
}

// SpillAfter is how much of one event's data a Reader with a Spooler
// holds before the rest streams through the Spooler.
const SpillAfter = 64 << 10

// Spool makes rd stream the data of every event past SpillAfter bytes
// through s: the event's Data is then what s keeps, and the Reader's
// limit applies to that alone. Data s cannot take (not one JSON value,
// or no room) makes the event a *TooLargeError whose Err says why. Set
// it for an upstream's stream only.
func (rd *Reader) Spool(s Spooler) { rd.spool, rd.spillAfter = s, SpillAfter }

// maxSpooledFields bounds the fields other than data an event keeps once
// its data goes through the Spooler (the Reader's limit then bounds what
// the Spooler keeps): past it they are dropped, as the data is not
// theirs to make large.
const maxSpooledFields = 64 << 10

// spilling carries one event's data to the Spooler: the Reader's
// goroutine writes the data into a pipe, and a goroutine of its own runs
// Spooler.Read on the other end.
type spilling struct {
	pw    *io.PipeWriter
	done  chan struct{}
	data  []byte
	err   error
	head  TooLargeError // the data's ends, for the error if it fails
	bytes int64
}

func (rd *Reader) startSpill(held []byte) *spilling {
	pr, pw := io.Pipe()
	sp := &spilling{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(sp.done)
		sp.data, sp.err = rd.spool.Read(pr, rd.max)
		pr.CloseWithError(errSpilled) // a writer past a failed read stops at once
	}()
	rd.grow = true
	sp.write(held)
	return sp
}

var errSpilled = errors.New("sse: the spooler stopped reading")

func (sp *spilling) write(b []byte) {
	sp.head.keep(b)
	sp.bytes += int64(len(b))
	sp.pw.Write(b) // a failure shows in finish
}

// finish ends the data (cause nil: the event ended) and waits for the
// Spooler.
func (sp *spilling) finish(cause error) ([]byte, error) {
	if cause == nil {
		cause = io.EOF
	}
	sp.pw.CloseWithError(cause)
	<-sp.done
	return sp.data, sp.err
}

// NewReader returns a Reader of src whose events may hold at most
// maxEvent bytes (their lines, terminators included); maxEvent <= 0 means
// DefaultMaxEvent.
func NewReader(src io.Reader, maxEvent int64) *Reader {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	m := readBufs.Get().(*readMem)
	return &Reader{src: src, buf: m.buf[:readBufSize], scratch: m.scratch[:0], mem: m, max: maxEvent, hold: noHold}
}

// Raw returns the bytes of the event the last Next returned, as they
// came (its lines, unknown fields and line ends as the stream had them,
// up to its blank line), for a relay to pass on an event it does not
// change without encoding it again; nil when the Reader no longer has
// them whole (an event larger than its buffer, or one whose data went
// through the Spooler). They are valid until the next call to Next or
// Release.
func (rd *Reader) Raw() []byte { return rd.raw }

const readBufSize = 32 << 10

// spillBufSize is a Reader's buffer once an event's data goes through
// its Spooler: each step of it is a handoff to the Spooler's goroutine,
// an eighth as many as with readBufSize.
const spillBufSize = 256 << 10

var spillBufs = sync.Pool{New: func() any { b := make([]byte, spillBufSize); return &b }}

// readMem is the memory a Reader borrows: its read buffer and its scratch
// space (kept up to maxScratch).
type readMem struct{ buf, scratch []byte }

const maxScratch = 1 << 10

// readBufs pools the memory Readers borrow, because a relay makes a
// Reader for every POST.
var readBufs = sync.Pool{New: func() any { return &readMem{buf: make([]byte, readBufSize)} }}

// Release gives rd's buffer back for another Reader; rd must not be used
// after. Events already returned are the caller's (their data is a copy).
func (rd *Reader) Release() {
	if m := rd.mem; m != nil {
		m.scratch = nil
		if cap(rd.scratch) <= maxScratch { // an id of a megabyte is not kept
			m.scratch = rd.scratch[:0]
		}
		readBufs.Put(m)
		if rd.big != nil {
			spillBufs.Put(rd.big)
			rd.big = nil
		}
		rd.buf, rd.scratch, rd.mem, rd.r, rd.w, rd.raw = nil, nil, nil, 0, 0, nil
	}
}

// LastEventID is the value of the last id field read, the one to resume
// the stream from with Last-Event-ID ("" when none, or after a reset).
func (rd *Reader) LastEventID() string { return rd.lastID }

// Retry is the last retry hint the stream gave, and whether it gave one.
func (rd *Reader) Retry() (time.Duration, bool) { return rd.retry, rd.hasRetry }

// The kinds of field fieldStart tells apart; fUnknown is a field the
// format does not define, whose line is ignored.
const (
	fUnknown = iota
	fComment
	fData
	fID
	fEvent
	fRetry
)

// Next returns the next event that has at least one known field or a
// comment; blocks of unknown fields only are skipped. It returns io.EOF
// at a clean end of stream, io.ErrUnexpectedEOF when the stream ends
// inside an event (which is then lost, as the format says), a
// *TooLargeError for an event over the limit (Next may be called again),
// or the source's error.
func (rd *Reader) Next() (Event, error) {
	e := block{scratch: rd.scratch[:0]}
	rd.raw = nil
	rd.shrink() // nothing of buf is anyone's now (Raw was the last event's)
	defer func() {
		rd.scratch = e.scratch[:0] // grown, for the next event's fields
		if e.sp != nil {
			e.sp.finish(io.ErrUnexpectedEOF) // the stream broke inside the event
		}
	}()
	for {
		if !e.inBlock {
			e.start = rd.off
		}
		kind, n, err := rd.fieldStart()
		if err != nil {
			if errors.Is(err, io.EOF) && e.inBlock {
				err = io.ErrUnexpectedEOF
			}
			rd.hold = noHold
			return Event{}, err
		}
		if n < 0 { // a blank line ends the block
			if ev, err, ok := rd.endBlock(&e); ok {
				return ev, err
			}
			e.inBlock, e.known, e.dataLines = false, false, 0 // nothing to report: skipped
			continue
		}
		if err := rd.field(&e, kind); err != nil {
			return Event{}, err
		}
	}
}

// block is what Next has read of the block of lines it is in: the event
// so far, or, once the event passed the limit, what is kept of it for the
// TooLargeError (big); while its data streams through the Spooler, sp.
type block struct {
	ev        Event
	start     int64 // the offset the block starts at
	inBlock   bool  // some line of this block was read
	known     bool  // the block has something to report
	big       *TooLargeError
	scratch   []byte // the value of the field being read, but data
	dataLines int
	sp        *spilling
	fields    int  // bytes of the fields kept while the data spools
	drop      bool // the field being read is dropped (a spooled event's, past maxSpooledFields)
}

// endBlock ends the block at its blank line. ok is false for a block
// with nothing to report (unknown fields only), which Next skips; else
// Next returns ev and err: the event, or a *TooLargeError.
func (rd *Reader) endBlock(e *block) (ev Event, err error, ok bool) {
	held := rd.hold
	rd.hold = noHold
	if e.sp != nil {
		held = lostHold // the data is the Spooler's, not these bytes
		data, err := e.sp.finish(nil)
		if err != nil {
			e.big = &e.sp.head
			e.big.Limit, e.big.ID, e.big.HasID, e.big.Err = rd.max, e.ev.ID, e.ev.HasID, err
		}
		e.ev.Data, e.sp = data, nil
	}
	switch {
	case e.big != nil:
		e.big.Size = rd.off - e.start
		return Event{}, e.big, true
	case !e.known:
		return Event{}, nil, false
	}
	if held >= 0 {
		if rd.skipLF && rd.r < rd.w && rd.buf[rd.r] == '\n' {
			// The LF of a CRLF blank line is the event's too when it is
			// here already (never waited for).
			rd.advance(1)
			rd.skipLF = false
		}
		rd.raw = rd.buf[rd.r-int(rd.off-held) : rd.r]
	}
	return e.ev, nil, true
}

// field reads the value of a field whose name fieldStart read, and adds
// the field to the block.
func (rd *Reader) field(e *block, kind int) error {
	e.inBlock = true
	if kind == fData && e.dataLines > 0 {
		// The line break between two data lines.
		if e.sp != nil {
			e.sp.write([]byte{'\n'})
		} else if e.big == nil {
			e.ev.Data = append(e.ev.Data, '\n')
		} else {
			e.big.keep([]byte{'\n'})
		}
	}
	e.scratch = e.scratch[:0]
	e.drop = false
	err := rd.value(func(b []byte) { rd.take(e, kind, b) })
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	rd.cut(e, 0) // lines with no value count too
	if e.drop {
		return nil
	}
	if e.sp != nil && kind != fData {
		e.fields += len(e.scratch)
	}
	rd.apply(e, kind)
	return nil
}

// take adds b, the next piece of a field's value, to the block: data to
// the event's data (or to the Spooler, or to the ends a TooLargeError
// keeps), another field's value to scratch.
func (rd *Reader) take(e *block, kind int, b []byte) {
	if rd.cut(e, len(b)) && kind != fData {
		return
	}
	switch {
	case kind == fData && e.sp != nil:
		e.sp.write(b)
	case kind == fData && e.big == nil && rd.spool != nil && len(e.ev.Data)+len(b) > rd.spillAfter && rd.max > int64(rd.spillAfter):
		e.sp = rd.startSpill(e.ev.Data)
		e.ev.Data = nil
		e.sp.write(b)
	case kind == fData && e.big == nil:
		e.ev.Data = append(e.ev.Data, b...)
	case kind == fData:
		e.big.keep(b)
	case kind == fUnknown:
	case e.sp != nil && e.fields+len(e.scratch)+len(b) > maxSpooledFields:
		e.drop = true
	case e.big == nil || len(e.scratch)+len(b) <= headLen:
		e.scratch = append(e.scratch, b...)
	default:
		e.scratch = append(e.scratch[:0], 0) // too long to keep: invalid as an id
	}
}

// cut turns the event into a discarded one once it is over the limit,
// pending bytes more counted: from then on only its id and the ends of
// its data are kept. It reports whether it did so now.
func (rd *Reader) cut(e *block, pending int) bool {
	if e.big != nil || e.sp != nil || rd.off+int64(pending)-e.start <= rd.max {
		return false
	}
	e.big = &TooLargeError{Limit: rd.max, ID: e.ev.ID, HasID: e.ev.HasID}
	e.big.keep(e.ev.Data)
	e.ev = Event{}
	e.scratch = append(e.scratch[:0], 0) // a value cut in two is never kept
	return true
}

// apply sets the field just read (its value in scratch, but data) on the
// event, or on the TooLargeError of a discarded one, and on the Reader's
// last event id and retry hint.
func (rd *Reader) apply(e *block, kind int) {
	switch kind {
	case fData:
		e.dataLines++
		if e.big == nil {
			e.ev.HasData, e.known = true, true
			if e.ev.Data == nil {
				e.ev.Data = []byte{}
			}
		}
	case fID:
		if bytes.IndexByte(e.scratch, 0) >= 0 {
			break // the format ignores an id with NUL
		}
		rd.lastID = string(e.scratch)
		if e.big != nil {
			e.big.ID, e.big.HasID = rd.lastID, true
			break
		}
		e.ev.ID, e.ev.HasID, e.known = rd.lastID, true, true
	case fEvent:
		if e.big == nil {
			// An empty name is the default: a field that says nothing.
			e.ev.Name, e.known = eventName(e.scratch), e.known || len(e.scratch) > 0
		}
	case fRetry:
		if d, ok := parseRetry(e.scratch); ok {
			rd.retry, rd.hasRetry = d, true
			if e.big == nil {
				e.ev.Retry, e.ev.HasRetry, e.known = d, true, true
			}
		}
	case fComment:
		if e.big == nil {
			e.ev.Comments, e.known = append(e.ev.Comments, string(e.scratch)), true
		}
	}
}

// parseRetry reads a retry value: ASCII digits only, else it is ignored.
func parseRetry(b []byte) (time.Duration, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// fieldStart reads the start of a line: its field name, the colon and one
// following space. n is the length of the name (-1 for a blank line).
func (rd *Reader) fieldStart() (kind, n int, err error) {
	if err := rd.lineStart(); err != nil {
		return 0, 0, err
	}
	if rd.hold == noHold {
		rd.hold = rd.off // a block (or a blank line) starts here
	}
	// The longest name we know is "retry": 6 bytes show whether a line is
	// one of ours, and fill stops early at a line end.
	rd.fill(6)
	b := rd.buf[rd.r:rd.w]
	b = b[:min(len(b), 6)]
	switch b[0] {
	case '\r':
		rd.advance(1)
		rd.skipLF = true
		return 0, -1, nil
	case '\n':
		rd.advance(1)
		return 0, -1, nil
	case ':':
		rd.advance(1)
		return fComment, 0, rd.skipSpace()
	}
	i := bytes.IndexAny(b, ":\r\n")
	if i < 0 {
		return fUnknown, 0, nil // a long name: the whole line is discarded
	}
	kind = fieldKind(b[:i])
	rd.advance(i)
	if b[i] != ':' {
		return kind, i, nil // a name alone: its value is empty
	}
	rd.advance(1)
	return kind, i, rd.skipSpace()
}

// lineStart buffers the first byte of a line, past the LF of a CRLF
// whose CR ended the last line and, at the start of the stream, past a
// byte-order mark.
func (rd *Reader) lineStart() error {
	if err := rd.fill(1); err != nil {
		return err
	}
	if rd.skipLF {
		rd.skipLF = false
		if rd.buf[rd.r] == '\n' {
			rd.advance(1)
			if err := rd.fill(1); err != nil {
				return err
			}
		}
	}
	if !rd.started {
		rd.started = true
		rd.fill(3)
		if bytes.HasPrefix(rd.buf[rd.r:rd.w], []byte("\xEF\xBB\xBF")) {
			rd.advance(3)
			if err := rd.fill(1); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldKind is the kind of the field called name; fUnknown for a name
// the format does not define, whose line is ignored.
func fieldKind(name []byte) int {
	switch string(name) {
	case "data":
		return fData
	case "id":
		return fID
	case "event":
		return fEvent
	case "retry":
		return fRetry
	}
	return fUnknown
}

// skipSpace drops the one space the format allows after a colon.
func (rd *Reader) skipSpace() error {
	if err := rd.fill(1); err != nil {
		return err
	}
	if rd.buf[rd.r] == ' ' {
		rd.advance(1)
	}
	return nil
}

// value passes the rest of the line to sink in pieces, as it arrives, and
// consumes the line end.
func (rd *Reader) value(sink func([]byte)) error {
	for {
		if err := rd.fill(1); err != nil {
			return err
		}
		b := rd.buf[rd.r:rd.w]
		i := lineEnd(b)
		if i < 0 {
			sink(b)
			rd.advance(len(b))
			continue
		}
		if i > 0 {
			sink(b[:i])
		}
		rd.advance(i + 1)
		rd.skipLF = b[i] == '\r'
		return nil
	}
}

// lineEnd is the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		i = len(b)
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	if i == len(b) {
		return -1
	}
	return i
}

// advance consumes n buffered bytes.
func (rd *Reader) advance(n int) {
	rd.r += n
	rd.off += int64(n)
}

// shrink gives back the buffer a spooled event grew (see fill), between
// events, once what is unread fits the Reader's own: a long-lived stream
// that carried one big event does not keep 256 KiB for good.
func (rd *Reader) shrink() {
	if rd.big == nil || rd.w-rd.r > readBufSize {
		return
	}
	rd.w = copy(rd.mem.buf[:readBufSize], rd.buf[rd.r:rd.w])
	rd.r, rd.buf = 0, rd.mem.buf[:readBufSize]
	spillBufs.Put(rd.big)
	rd.big, rd.grow = nil, false
}

// fill reads until n bytes are buffered or a line end is, whichever comes
// first. It returns an error only when nothing is buffered.
func (rd *Reader) fill(n int) error {
	if rd.grow && rd.big == nil {
		rd.big = spillBufs.Get().(*[]byte)
		rd.w = copy(*rd.big, rd.buf[rd.r:rd.w])
		rd.r, rd.buf = 0, *rd.big
		rd.hold = lostHold // the event's data is the Spooler's: no Raw
	}
	for empty := 0; rd.w-rd.r < n && lineEnd(rd.buf[rd.r:rd.w]) < 0 && rd.err == nil; {
		// The block being read stays in buf (for Raw) while it fits.
		from := rd.r
		if rd.hold >= 0 {
			if h := rd.r - int(rd.off-rd.hold); h > 0 || rd.w < len(rd.buf) {
				from = h
			} else {
				rd.hold = lostHold
			}
		}
		if from > 0 {
			rd.w = copy(rd.buf, rd.buf[from:rd.w])
			rd.r -= from
		}
		m, err := rd.src.Read(rd.buf[rd.w:])
		if m < 0 || m > len(rd.buf)-rd.w {
			m, err = 0, errors.New("sse: the source returned an invalid count")
		}
		rd.w += m
		switch {
		case err != nil:
			rd.err = err
		case m > 0:
			empty = 0
		default: // io.Reader allows a few empty reads, not endless ones
			if empty++; empty >= 100 {
				rd.err = io.ErrNoProgress
			}
		}
	}
	if rd.w == rd.r {
		return rd.err
	}
	return nil
}

// eventName returns b as a string: "message", the name MCP servers give
// every event, without a copy (the compiler compares without converting).
func eventName(b []byte) string {
	if string(b) == "message" {
		return "message"
	}
	return string(b)
}
