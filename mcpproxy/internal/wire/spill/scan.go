package spill

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

const readSize = 128 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readSize); return &b }}

// valueBufs hold what a Read decodes for a Keeper between two hand-overs:
// up to valueChunk, plus one read buffer's decoding.
var valueBufs = sync.Pool{New: func() any { b := make([]byte, 0, valueChunk+readSize+8); return &b }}

// special marks the bytes that end a run of plain string content.
var special = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return
}()

// hasSpecial reports whether one of v's eight bytes is special: under
// 0x20, '"' or '\\' (the classic zero-byte tests, which never miss one).
func hasSpecial(v uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, b := v^(ones*'"'), v^(ones*'\\')
	return ((v-ones*0x20)&^v|(q-ones)&^q|(b-ones)&^b)&highs != 0
}

// hexDigit marks the bytes a \u escape's digits may be.
var hexDigit = func() (t [256]bool) {
	for _, c := range "0123456789abcdefABCDEF" {
		t[c] = true
	}
	return
}()

// longRun is how long a run of plain string content must be before
// skipRun looks for its end a window at a time: base64 data, not the
// short runs between the escapes of a JSON document spelt as a text.
const longRun = 256

// window is how much of a long run skipRun checks at a time.
const window = 1024

// skipRun returns the start of the first window of buf[j:] that holds a
// special byte, or of the bytes left when fewer than a window are. A window is checked
// with the library's vectorized search for '"' and '\\' and a word-wide
// pass for control bytes, without a branch per word: about three times
// the pace of the word-by-word loop on a run with no special at all.
func skipRun(buf []byte, j int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(buf)-j >= window {
		w := buf[j : j+window]
		if bytes.IndexByte(w, '\\') >= 0 || bytes.IndexByte(w, '"') >= 0 {
			return j
		}
		var ctl uint64
		for k := 0; k < window; k += 8 {
			v := binary.LittleEndian.Uint64(w[k:])
			ctl |= (v - ones*0x20) &^ v
		}
		if ctl&highs != 0 {
			return j
		}
		j += window
	}
	return j
}

// Read reads exactly one JSON value from r, which must end where the
// message ends (one line, one event's data, one body): only whitespace may
// follow the value. It returns the value with every string longer than
// Options.Threshold, and every string spelt as a marker, replaced by a
// marker; everything else is kept byte for byte, whitespace included.
//
// At most maxInline bytes of the result stay in memory (≤ 0: no cap),
// plus one string of up to Threshold while it is being read and a read
// buffer. Errors: io.EOF when r holds only whitespace; an error wrapping
// ErrTooLarge past maxInline, ErrFull past Options.MaxBytes,
// jsonrpc.ErrMalformed for input that is not one JSON value (invalid
// escapes, control characters in strings, nesting past MaxDepth included);
// r's own error, wrapped. On any error nothing of the message stays
// spilled.
func (s *Spooler) Read(r io.Reader, maxInline int64) ([]byte, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	buf := readBufs.Get().(*[]byte)
	defer readBufs.Put(buf)
	sc := &scanner{sp: s, r: r, buf: *buf, max: maxInline}
	defer func() {
		if sc.valBuf != nil {
			*sc.valBuf = sc.val[:0]
			valueBufs.Put(sc.valBuf)
		}
	}()
	if maxInline <= 0 {
		sc.max = 1<<63 - 1
	}
	err := sc.reserve(readSize) // its read buffer counts too
	if err == nil {
		err = sc.run()
	}
	s.inline.Add(-sc.reserved)
	if err != nil {
		sc.abort()
		return nil, err
	}
	if sc.msg != nil {
		s.keep(sc.msg)
	}
	return sc.out, nil
}

// keep registers m's strings and starts their TTL.
func (s *Spooler) keep(m *message) {
	s.mu.Lock()
	s.msgs[m] = struct{}{}
	closed := s.closed
	s.mu.Unlock()
	registry.mu.Lock()
	for _, x := range m.strs {
		registry.m[x.id] = x
		x.refs.Store(1)
	}
	m.live = len(m.strs)
	m.timer = time.AfterFunc(s.o.TTL, m.expire) // before any drop can see m
	registry.mu.Unlock()
	m.strs[0].f.unref() // Read's own reference: the strings hold the file now
	if closed {
		m.expire()
	}
}

// scanner reads one value. buf[i:n] is unread; buf[mark:i] is read but not
// yet copied to out (or, while a long string spills, to the file).
type scanner struct {
	sp  *Spooler
	r   io.Reader
	buf []byte
	i   int
	n   int
	eof bool

	mark     int
	out      []byte
	max      int64
	reserved int64  // of Spooler.inline: out's capacity and buf, in inlineStep steps
	stack    []byte // '{' or '[' per open container
	strStart int    // where the current string's quote is in out
	inString bool
	spilling bool // the current string goes to the file
	strOff   int64

	f      *file // this message's spill file, once a string spilled
	msg    *message
	forged int // strings spelt as markers, spilled

	starts   []int // where each open container's bracket is in out
	arr      bool  // an array is moving to the file whole (spilling is set too)
	arrDepth int   // len(stack) with that array open
	arrOff   int64
	arrFirst []byte
	arrCount int64

	readingKey bool    // the string being read is a member name
	valueStr   bool    // the string being read is a value
	key        []byte  // the last member name read, as sent; empty if long
	inMember   bool    // the value being read is an object member's
	tap        Tap     // watching the string spilling now
	keeper     Keeper  // tap, while it keeps the string's value (no bytes written here)
	canon      *Canon  // decoding the string for keeper
	val        []byte  // value decoded, not yet given to keeper
	valBuf     *[]byte // val's, from valueBufs
}

// maxTapKey bounds the member names remembered for Options.Tap.
const maxTapKey = 32

// maxForged bounds the strings spelt as markers one message may hold. No
// honest upstream sends one; each costs a registry entry, so a message
// made of them (49 bytes each) must not cost memory by the million.
const maxForged = 16

func malformed(format string, a ...any) error {
	return fmt.Errorf("spill: %s: %w", fmt.Sprintf(format, a...), jsonrpc.ErrMalformed)
}

// fill moves what was read to its sink (flush) and reads more. It returns
// io.EOF at the end of input, or the read error wrapped.
func (s *scanner) fill() error {
	if err := s.flush(); err != nil {
		return err
	}
	s.i, s.n, s.mark = 0, 0, 0
	for s.n == 0 {
		if s.eof {
			return io.EOF
		}
		n, err := s.r.Read(s.buf)
		s.n = n
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			return fmt.Errorf("spill: reading: %w", err)
		}
	}
	return nil
}

// flush copies buf[mark:i] to out, or to the spill file while a string
// spills, and checks the bounds.
func (s *scanner) flush() error {
	p := s.buf[s.mark:s.i]
	s.mark = s.i
	if s.spilling {
		return s.write(p)
	}
	s.out = append(s.out, p...)
	if s.inString && int64(len(s.out)-s.strStart-1) > s.sp.o.Threshold {
		return s.startSpill()
	}
	return s.checkInline()
}

// checkInline fails once what stays inline passes the cap: all of out, but
// for a string being read, which may still spill.
func (s *scanner) checkInline() error {
	base := len(s.out)
	if s.inString {
		base = s.strStart
	}
	if int64(base) > s.max {
		return fmt.Errorf("spill: more than %d bytes stay inline: %w", s.max, ErrTooLarge)
	}
	if held := int64(cap(s.out)) + readSize; held > s.reserved {
		return s.reserve(held)
	}
	return nil
}

// inlineStep is what a Read reserves of Options.MaxInline at a time.
const inlineStep = 256 << 10

// reserve takes of Options.MaxInline what holding n bytes needs.
func (s *scanner) reserve(n int64) error {
	need := (n - s.reserved + inlineStep - 1) / inlineStep * inlineStep
	if s.sp.inline.Add(need) > s.sp.o.MaxInline {
		s.sp.inline.Add(-need)
		return ErrBusy
	}
	s.reserved += need
	return nil
}

// write appends p to the spill file, or decodes it for the Keeper
// keeping the string.
func (s *scanner) write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if s.canon != nil {
		val, ok := s.canon.Next(s.val, p)
		if ok {
			s.val = val
			if len(s.val) >= valueChunk {
				return s.give()
			}
			return nil
		}
		if err := s.lose(); err != nil {
			return err
		}
	}
	if err := s.spillBytes(p); err != nil {
		return err
	}
	if s.tap != nil {
		s.tap.Write(p)
	}
	return nil
}

// valueChunk is how much decoded value the scanner gathers before giving
// it to a Keeper.
const valueChunk = 64 << 10

// give hands the value decoded so far to the Keeper, unless it is lost.
func (s *scanner) give() error {
	if s.keeper.Lost() {
		return s.lose()
	}
	if len(s.val) > 0 {
		s.keeper.Value(s.val)
		s.val = s.val[:0]
	}
	return nil
}

// keepRun decodes for the Keeper what is read of the string, up to its
// end: true when buf[i] is its closing quote. Once the bytes are not
// spelt canonically (or the Keeper is lost) the string spills from
// there: s.canon is nil, and esc is where the scanning goes on in an
// escape the Canon held part of (as str counts).
func (s *scanner) keepRun() (end bool, esc int, err error) {
	if err := s.flush(); err != nil { // an escape's rest, read a byte at a time
		return false, 0, err
	}
	c := s.canon
	if c == nil {
		return false, 0, nil
	}
	defer func() {
		if s.canon == nil { // lost here: go on in the unit c held
			esc = escapeIn(c.Held())
		}
	}()
	val, n, end, ok := c.Scan(s.val, s.buf[s.i:s.n])
	if !ok {
		return false, 0, s.lose()
	}
	s.val = val
	s.i += n
	s.mark = s.i
	if end {
		return true, 0, nil // addString ends the decoding
	}
	if len(s.val) >= valueChunk || s.i == s.n {
		return false, 0, s.give() // which may lose it
	}
	return false, 0, nil
}

// escapeIn returns the escape state str goes on in (see escapeStep) when
// a Canon that stopped held held, the start of a unit cut by a read's end:
// -1 after a lone backslash, the hex digits still to come in a \u escape,
// else 0.
func escapeIn(held []byte) int {
	switch {
	case len(held) == 0 || held[0] != '\\':
		return 0
	case len(held) == 1:
		return -1
	}
	return 4 - (len(held) - 2)
}

// lose gives the string back to the spill file: the value the Keeper
// has, spelt again, then what the Canon holds (a unit cut by a read's
// end); the Tap gets those held bytes too, and the string spills from
// here as any other.
func (s *scanner) lose() error {
	k, c := s.keeper, s.canon
	s.keeper, s.canon = nil, nil
	if len(s.val) > 0 {
		k.Value(s.val)
		s.val = s.val[:0]
	}
	if err := s.handBack(k, c.Form(), c.Taken()-int64(len(c.Held()))); err != nil {
		return err
	}
	held := c.Held()
	if len(held) == 0 {
		return nil
	}
	if err := s.spillBytes(held); err != nil {
		return err
	}
	s.tap.Write(held)
	return nil
}

// handBack has k write the value it kept, spelt in form (want bytes), to
// the file.
func (s *scanner) handBack(k Keeper, form Form, want int64) error {
	w := &spillWriter{s: s}
	if err := k.Handback(w, form); err != nil {
		return err
	}
	if w.n != want {
		return fmt.Errorf("spill: a tap handed back %d bytes of %d", w.n, want)
	}
	return nil
}

// spillWriter appends to a scanner's spill file.
type spillWriter struct {
	s *scanner
	n int64
}

func (w *spillWriter) Write(p []byte) (int, error) {
	if err := w.s.spillBytes(p); err != nil {
		return 0, err
	}
	w.n += int64(len(p))
	return len(p), nil
}

// spillBytes appends p to the spill file, within Options.MaxBytes.
func (s *scanner) spillBytes(p []byte) error {
	if s.sp.alive.Add(int64(len(p))) > s.sp.o.MaxBytes {
		s.sp.alive.Add(-int64(len(p)))
		return fmt.Errorf("spill: more than %d bytes spilled: %w", s.sp.o.MaxBytes, ErrFull)
	}
	if !s.sp.charge(s.sp.key, int64(len(p))) {
		s.sp.alive.Add(-int64(len(p)))
		return fmt.Errorf("spill: more than %d bytes spilled for one party: %w", s.sp.o.ShareMax, ErrFull)
	}
	s.f.size += int64(len(p))
	if _, err := s.f.f.Write(p); err != nil {
		return fmt.Errorf("spill: writing a spill file: %w", err)
	}
	return nil
}

// startSpill sends the current string, so far in out, to the file.
func (s *scanner) startSpill() error {
	if err := s.openFile(); err != nil {
		return err
	}
	s.spilling = true
	s.strOff = s.f.size
	if s.readingKey {
		s.key = s.key[:0] // a long name: remembered as none
	}
	if s.valueStr && !s.arr && s.sp.o.Tap != nil {
		name := ""
		if s.inMember {
			name = string(s.key)
		}
		s.tap = s.sp.o.Tap(name)
		if s.keeper, _ = s.tap.(Keeper); s.keeper != nil {
			s.canon = NewCanon(s.keeper.Base64())
			if s.valBuf == nil {
				s.valBuf = valueBufs.Get().(*[]byte)
				s.val = (*s.valBuf)[:0]
			}
		}
	}
	p := s.out[s.strStart+1:]
	s.out = s.out[:s.strStart]
	return s.write(p)
}

// openFile starts the message's spill file.
func (s *scanner) openFile() error {
	if s.f != nil {
		return nil
	}
	f, err := createUnlinked(s.sp.o.Dir)
	if err != nil {
		return err
	}
	s.f = &file{sp: s.sp, f: f}
	s.f.refs.Store(1) // Read's own
	s.msg = &message{sp: s.sp}
	return nil
}

// startArray sends the innermost array, so far in out, to the file, its
// strings that spilled on their own put back in it: from here to its
// closing bracket everything read goes to the file.
func (s *scanner) startArray() error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.openFile(); err != nil {
		return err
	}
	start := s.starts[len(s.starts)-1]
	p := s.out[start:]
	s.arrOff = s.f.size
	s.arrFirst, s.arrCount = firstElements(p)
	if err := s.writeExpanded(p); err != nil {
		return err
	}
	s.out = s.out[:start]
	s.spilling, s.arr, s.arrDepth = true, true, len(s.stack)
	return nil
}

// endArray ends the array moving to the file (its closing bracket just
// read) and puts its marker in out.
func (s *scanner) endArray() error {
	if err := s.flush(); err != nil {
		return err
	}
	s.spilling, s.arr = false, false
	x := &String{id: newID(), msg: s.msg, f: s.f, off: s.arrOff, n: s.f.size - s.arrOff,
		array: true, first: s.arrFirst, count: s.arrCount}
	s.arrFirst = nil
	s.f.refs.Add(1)
	s.msg.strs = append(s.msg.strs, x)
	s.out = append(append(append(s.out, markerPrefix...), x.id...), '"')
	return s.checkInline()
}

// writeExpanded writes p to the file with the markers of this message's
// strings replaced by the strings, which are then no longer its own.
func (s *scanner) writeExpanded(p []byte) error {
	at := 0
	for _, sp := range markers(p) {
		id := string(p[sp[0]+len(markerPrefix) : sp[1]-1])
		k := slices.IndexFunc(s.msg.strs, func(x *String) bool { return x.id == id })
		if k < 0 {
			continue // cannot happen: every marker in out is this message's
		}
		x := s.msg.strs[k]
		if err := s.write(p[at : sp[0]+1]); err != nil {
			return err
		}
		if err := s.copyWithin(x.bytes(), x.off, x.n); err != nil {
			return err
		}
		at = sp[1] - 1
		s.msg.strs = slices.Delete(s.msg.strs, k, k+1)
		x.untap()
		s.f.unref()
	}
	return s.write(p[at:])
}

// copyWithin appends n bytes of src (the file, or a kept string) from off
// to the file.
func (s *scanner) copyWithin(src io.ReaderAt, off, n int64) error {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	for n > 0 {
		k, err := src.ReadAt((*buf)[:min(int64(len(*buf)), n)], off)
		if k > 0 {
			if err := s.write((*buf)[:k]); err != nil {
				return err
			}
		}
		if err != nil && k == 0 {
			return fmt.Errorf("spill: reading a spill file: %w", err)
		}
		off, n = off+int64(k), n-int64(k)
	}
	return nil
}

// firstElements returns the elements p (an array's start, "[" and whole
// elements) begins with, as a JSON array of at most FirstMax bytes that
// stops before an element holding a marker, and how many elements p
// holds.
func firstElements(p []byte) (first []byte, count int64) {
	first = []byte{'['}
	open := true
	i := jsonrpc.SkipSpace(p, 1)
	for i < len(p) {
		e := jsonrpc.SkipValue(p, i)
		count++
		if el := p[i:e]; open && len(first)+len(el)+2 <= FirstMax && !bytes.Contains(el, []byte(markerPrefix[1:])) {
			if len(first) > 1 {
				first = append(first, ',')
			}
			first = append(first, el...)
		} else {
			open = false
		}
		i = jsonrpc.SkipSpace(p, e)
		if i < len(p) && p[i] == ',' {
			i = jsonrpc.SkipSpace(p, i+1)
		}
	}
	return append(first, ']'), count
}

// abort frees what a failed Read spilled.
func (s *scanner) abort() {
	if s.tap != nil {
		s.tap.End(false)
		s.tap, s.keeper, s.canon = nil, nil, nil
	}
	if s.f == nil {
		return
	}
	for _, x := range s.msg.strs {
		x.untap()
		s.f.unref()
	}
	s.f.unref()
}

// peek returns the next unread byte, reading more if need be.
func (s *scanner) peek() (byte, error) {
	if s.i == s.n {
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
	return s.buf[s.i], nil
}

// ws skips whitespace.
func (s *scanner) ws() error {
	for {
		for s.i < s.n {
			switch s.buf[s.i] {
			case ' ', '\t', '\n', '\r':
				s.i++
			default:
				return nil
			}
		}
		if err := s.fill(); err != nil {
			return err
		}
	}
}

// next skips whitespace and returns the next byte. The input ending there
// is malformed: what names what should have come.
func (s *scanner) next(what string) (byte, error) {
	if s.i < s.n && s.buf[s.i] > ' ' { // the common case, inlined
		return s.buf[s.i], nil
	}
	return s.nextSlow(what)
}

func (s *scanner) nextSlow(what string) (byte, error) {
	err := s.ws()
	if errors.Is(err, io.EOF) {
		return 0, malformed("input ends where %s should be", what)
	}
	if err != nil {
		return 0, err
	}
	return s.buf[s.i], nil
}

// run reads the value, one token at a time: a value, then what follows
// it (see afterValue), until the outermost value ends.
func (s *scanner) run() error {
	if err := s.ws(); err != nil {
		return err // io.EOF: nothing but whitespace
	}
	for {
		c, err := s.next("a value")
		if err != nil {
			return err
		}
		switch {
		case c == '{' || c == '[':
			var empty bool
			if empty, err = s.open(c); err == nil && !empty {
				continue // its first value, or member, is next
			}
		case c == '"':
			s.valueStr = true
			s.inMember = len(s.stack) > 0 && s.stack[len(s.stack)-1] == '{'
			err = s.str()
			s.valueStr = false
		case c == 't':
			err = s.literal("true")
		case c == 'f':
			err = s.literal("false")
		case c == 'n':
			err = s.literal("null")
		case c == '-' || '0' <= c && c <= '9':
			err = s.number()
		default:
			return malformed("unexpected %q where a value should be", c)
		}
		if err != nil {
			return err
		}
		if done, err := s.afterValue(); done || err != nil {
			return err
		}
	}
}

// open reads the bracket at buf[i] that opens an object or an array, c,
// and, in an object, the first member's name and colon. empty reports
// that the closing bracket came next: the value ended.
func (s *scanner) open(c byte) (empty bool, err error) {
	if len(s.stack) == MaxDepth {
		return false, malformed("nesting deeper than %d", MaxDepth)
	}
	s.stack = append(s.stack, c)
	s.starts = append(s.starts, len(s.out)+s.i-s.mark)
	s.i++
	d, err := s.next("a member or element")
	if err != nil {
		return false, err
	}
	if d == c+2 { // '}' or ']'
		s.i++
		s.stack, s.starts = s.stack[:len(s.stack)-1], s.starts[:len(s.starts)-1]
		return true, nil
	}
	if c == '{' {
		return false, s.member()
	}
	return false, nil
}

// afterValue reads what follows a value: the brackets that close
// containers (an array moving to the file ends at its own), then the
// comma before the next value, and in an object the next member's name
// and colon. An array that grew past Options.ArrayThreshold starts
// moving to the file at that comma. done reports that the outermost
// value ended, with the input (then err is end's).
func (s *scanner) afterValue() (done bool, err error) {
	for {
		if len(s.stack) == 0 {
			return true, s.end()
		}
		c, err := s.next("',' or a closing bracket")
		if err != nil {
			return false, err
		}
		top := s.stack[len(s.stack)-1]
		if c == top+2 {
			s.i++
			closed := s.arr && len(s.stack) == s.arrDepth
			s.stack, s.starts = s.stack[:len(s.stack)-1], s.starts[:len(s.starts)-1]
			if closed {
				if err := s.endArray(); err != nil {
					return false, err
				}
			}
			continue
		}
		if c != ',' {
			return false, malformed("unexpected %q after a value", c)
		}
		if top == '[' && !s.arr && len(s.stack) >= 2 &&
			int64(len(s.out)+s.i-s.mark-s.starts[len(s.starts)-1]) > s.sp.o.ArrayThreshold {
			if err := s.startArray(); err != nil {
				return false, err
			}
		}
		if s.arr && len(s.stack) == s.arrDepth {
			s.arrCount++
		}
		s.i++
		if top == '{' {
			if _, err := s.next("a member name"); err != nil {
				return false, err
			}
			return false, s.member()
		}
		return false, nil
	}
}

// member reads a member name and its colon.
func (s *scanner) member() error {
	if s.buf[s.i] != '"' {
		return malformed("unexpected %q where a member name should be", s.buf[s.i])
	}
	s.readingKey = true
	err := s.str()
	s.readingKey = false
	if err != nil {
		return err
	}
	c, err := s.next("':'")
	if err != nil {
		return err
	}
	if c != ':' {
		return malformed("unexpected %q after a member name", c)
	}
	s.i++
	return nil
}

// end checks that only whitespace follows the value and flushes.
func (s *scanner) end() error {
	err := s.ws()
	if err == nil {
		return malformed("unexpected %q after the value", s.buf[s.i])
	}
	if !errors.Is(err, io.EOF) {
		return err
	}
	return nil // fill flushed everything
}

func (s *scanner) literal(word string) error {
	if s.n-s.i >= len(word) && string(s.buf[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return nil
	}
	for k := 0; k < len(word); k++ {
		c, err := s.peek()
		if errors.Is(err, io.EOF) {
			return malformed("input ends inside %s", word)
		}
		if err != nil {
			return err
		}
		if c != word[k] {
			return malformed("unexpected %q in %s", c, word)
		}
		s.i++
	}
	return nil
}

// number reads a JSON number: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
func (s *scanner) number() error {
	// The common case: the number ends inside the buffer.
	j := s.i
	for j < s.n && numChar[s.buf[j]] {
		j++
	}
	if j < s.n && jsonrpc.SkipNumber(s.buf[s.i:j], 0) == j-s.i {
		s.i = j
		return nil
	}
	return s.numberAcross()
}

// The states of numberAcross: the part of a number read next.
const (
	numSign = iota
	numFirst
	numIntDigits
	numAfterZero // after an integer part "0"
	numFracFirst
	numFracDigits
	numExpSign
	numExpFirst
	numExpDigits
)

// numberAcross reads a number a byte at a time, across the buffer's
// refills: what number does when the number may not end in the buffer.
func (s *scanner) numberAcross() error {
	st := numSign
	for {
		c, err := s.peek()
		if errors.Is(err, io.EOF) {
			c = 0
		} else if err != nil {
			return err
		}
		if next := numberStep(st, c); next >= 0 {
			st = next
			s.i++
			continue
		}
		switch {
		case st == numIntDigits || st == numAfterZero || st == numFracDigits || st == numExpDigits:
			return nil // the byte after the number is the caller's
		case errors.Is(err, io.EOF):
			return malformed("input ends inside a number")
		}
		return malformed("unexpected %q in a number", c)
	}
}

// numberStep returns numberAcross's state after c in state st, -1 when c
// does not go on the number.
func numberStep(st int, c byte) int {
	digit := '0' <= c && c <= '9'
	switch {
	case st == numSign && c == '-':
		return numFirst
	case (st == numSign || st == numFirst) && c == '0':
		return numAfterZero
	case (st == numSign || st == numFirst) && digit:
		return numIntDigits
	case st == numIntDigits && digit:
		return numIntDigits
	case (st == numIntDigits || st == numAfterZero) && c == '.':
		return numFracFirst
	case (st == numFracFirst || st == numFracDigits) && digit:
		return numFracDigits
	case (st == numIntDigits || st == numAfterZero || st == numFracDigits) && (c == 'e' || c == 'E'):
		return numExpSign
	case st == numExpSign && (c == '+' || c == '-'):
		return numExpFirst
	case (st == numExpSign || st == numExpFirst || st == numExpDigits) && digit:
		return numExpDigits
	}
	return -1
}

// str reads a string from its opening quote: kept in out while short,
// sent to the spill file once longer than the threshold. It checks the
// escapes as it goes (their decoding is Canon's and textReader's).
func (s *scanner) str() error {
	// Where the quote will be in out: the bytes read since mark are
	// copied there at the next flush.
	s.strStart = len(s.out) + s.i - s.mark
	s.inString = true
	s.i++
	esc := 0 // 0: plain; -1: after a backslash; k > 0: hex digits left
	for {
		if s.i == s.n {
			if err := s.refill("a string"); err != nil {
				return err
			}
		}
		if esc == 0 && s.canon != nil {
			end, held, err := s.keepRun()
			if err != nil {
				return err
			}
			if end {
				return s.endString()
			}
			esc = held // 0 unless lost inside an escape
			if s.canon != nil || s.i == s.n || esc != 0 {
				continue
			}
		}
		if esc == 0 {
			j := plainEnd(s.buf[:s.n], s.i)
			s.i = j
			if j == s.n {
				continue
			}
			switch c := s.buf[j]; c {
			case '"':
				return s.endString()
			case '\\':
				esc = -1
			default:
				return malformed("control character %q in a string", c)
			}
			s.i++
			continue
		}
		var err error
		if esc, err = escapeStep(esc, s.buf[s.i]); err != nil {
			return err
		}
		s.i++
	}
}

// refill reads more input, buf being used up inside a token (what): the
// input ending there is malformed.
func (s *scanner) refill(what string) error {
	err := s.fill()
	if errors.Is(err, io.EOF) {
		return malformed("input ends inside %s", what)
	}
	return err
}

// plainEnd returns where the run of a string's content that starts at
// buf[j] ends: at a quote, a backslash that does not start an escape
// whole in buf, a control character, or buf's end. Escapes whole in buf
// are part of the run: they were checked here, and are decoded later. It
// looks at eight bytes at a time, and a window at a time once the run is
// long (skipRun).
func plainEnd(buf []byte, j int) int {
	for {
		for run := j + longRun; j+8 <= len(buf) && !hasSpecial(binary.LittleEndian.Uint64(buf[j:])); {
			if j += 8; j >= run {
				j, run = skipRun(buf, j), len(buf)
			}
		}
		for j < len(buf) && !special[buf[j]] {
			j++
		}
		// A one-letter escape whole in buf is part of the run.
		if j+1 < len(buf) && buf[j] == '\\' && simpleEscape[buf[j+1]] != 0 {
			j += 2
			continue
		}
		// So is a \u escape (as Go's json.Marshal spells '<', '>'
		// and '&').
		if j+5 < len(buf) && buf[j] == '\\' && buf[j+1] == 'u' &&
			hexDigit[buf[j+2]] && hexDigit[buf[j+3]] && hexDigit[buf[j+4]] && hexDigit[buf[j+5]] {
			j += 6
			continue
		}
		return j
	}
}

// escapeStep checks c, the next byte of an escape cut by the end of the
// buffer, in the escape state esc (as str keeps it: -1 after the
// backslash, the hex digits left in a \u escape) and returns the state
// after it.
func escapeStep(esc int, c byte) (int, error) {
	if esc == -1 {
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			return 0, nil
		case 'u':
			return 4, nil
		}
		return 0, malformed("invalid escape %q in a string", "\\"+string(c))
	}
	if hexDigit[c] {
		return esc - 1, nil
	}
	return 0, malformed("invalid \\u escape in a string")
}

// endString closes the string at buf[i] (its closing quote): a spilled
// string, one longer than the threshold, or one spelt as a marker becomes a
// marker.
func (s *scanner) endString() error {
	if s.arr { // inside an array on its way to the file: nothing to do
		s.i++
		s.inString = false
		return nil
	}
	if s.spilling {
		if err := s.flush(); err != nil { // the rest, without the quote
			return err
		}
		s.i++
		s.mark = s.i
	} else {
		s.i++
		if at := s.strStart - len(s.out); at >= 0 {
			// The common case: the whole string is still in buf, and stays
			// there until the next flush.
			str := s.buf[s.mark+at : s.i]
			if int64(len(str)-2) <= s.sp.o.Threshold && !bytes.HasPrefix(str, []byte(markerPrefix)) {
				s.inString = false
				s.noteKey(str)
				return nil
			}
		}
		s.out = append(s.out, s.buf[s.mark:s.i]...) // not flush: the checks come below
		s.mark = s.i
		str := s.out[s.strStart:]
		// A string spelt as a marker is spilled whatever its length, so
		// that no upstream can make one.
		if int64(len(str)-2) <= s.sp.o.Threshold && !bytes.HasPrefix(str, []byte(markerPrefix)) {
			s.inString = false
			s.noteKey(str)
			return s.checkInline()
		}
		if int64(len(str)-2) <= s.sp.o.Threshold {
			if s.forged++; s.forged > maxForged {
				return malformed("more than %d strings spelt as spill markers", maxForged)
			}
		}
		s.out = s.out[:len(s.out)-1] // not the closing quote
		if err := s.startSpill(); err != nil {
			return err
		}
	}
	s.inString, s.spilling = false, false
	if err := s.addString(); err != nil {
		return err
	}
	return s.checkInline()
}

// noteKey remembers str (quoted, as sent) when it is a member name short
// enough to be offered to Options.Tap.
func (s *scanner) noteKey(str []byte) {
	if !s.readingKey {
		return
	}
	s.key = s.key[:0]
	if len(str)-2 <= maxTapKey {
		s.key = append(s.key, str[1:len(str)-1]...)
	}
}

// addString puts a marker in out for the string spilled since strOff, or
// kept by its Keeper.
func (s *scanner) addString() error {
	if s.canon != nil {
		var err error
		var ok bool
		if s.val, ok = s.canon.End(s.val); !ok {
			err = s.lose()
		} else {
			err = s.give()
		}
		if err != nil {
			return err
		}
	}
	tap := s.tap
	s.tap = nil // ended here: abort must not end it again
	if tap != nil {
		tap.End(true)
	}
	x := &String{id: newID(), msg: s.msg, f: s.f, off: s.strOff, n: s.f.size - s.strOff, tap: tap}
	if k, c := s.keeper, s.canon; k != nil {
		s.keeper, s.canon = nil, nil
		value, ok := k.Kept()
		if !ok {
			if err := s.handBack(k, c.Form(), c.Taken()); err != nil {
				tap.Release() // a complete string's Tap, of no String
				return err
			}
			x.n = s.f.size - s.strOff
		} else {
			x.kept, x.n = Spelling(value, c.Given(), c.Taken(), c.Form()), c.Taken()
			x.off = 0
		}
	}
	s.f.refs.Add(1)
	s.msg.strs = append(s.msg.strs, x)
	s.out = append(append(append(s.out, markerPrefix...), x.id...), '"')
	return nil
}

// numChar marks the bytes a number may hold.
var numChar = func() (t [256]bool) {
	for _, c := range "0123456789-+.eE" {
		t[c] = true
	}
	return
}()
