// Package spill keeps upstream messages from ever being held whole in
// memory.
//
// A Spooler reads one JSON value from a stream (a stdio line, an SSE
// event's data, a JSON body) and copies it byte for byte into a small
// in-memory message, except that every string (a value or a member name)
// whose escaped length passes Options.Threshold goes to a spill file on
// disk instead and is replaced by a marker: the JSON string
// "\u0000spillway:<32 lowercase hex>", whose 128 random bits an upstream
// cannot guess. An array that grows past Options.ArrayThreshold moves to
// the file whole in the same way. The small message then travels the
// normal pipeline, and Expand puts the original bytes back.
//
// # The invariant every face keeps
//
// Spilled strings are put back before any byte of a message reaches a
// client: a client never receives a marker. A face therefore never writes
// an upstream message's bytes to a client itself. It writes them through
// a wire writer that calls Expand: sse.Writer.Write, httpx.WriteReply and
// httpx.WriteMessages, or an ndjson.Conn made with Options.Expand (the
// stdio face's client connection). Expand resolves every marker before it
// writes the first byte, so a message whose strings expired fails whole
// with ErrGone instead of reaching the client cut short, and an untouched
// message arrives byte-identical. The one writer that does not expand,
// sse.Writer.WriteRaw, is given only the bytes an sse.Reader read as they
// came (Reader.Raw), which it withholds for an event whose data went
// through a Spooler. Code that sizes what a client will receive counts
// the strings put back (ExpandedLen).
//
// The rule has a mirror image: a client's message that holds a string
// spelt as a marker is refused (httpx.DecodePOST, an ndjson.Conn with
// Options.Expand), because what the proxy echoes of a request, such as
// its id, is expanded on the way back. Only upstream messages are read
// through a Spooler; a client's request is never expanded on its way to
// an upstream.
//
// # Markers and spill files
//
// Markers are recognised by their bytes, never by their decoded value, and
// resolve through a process-wide registry keyed by their random id, so a
// writer in any package can expand them without a pointer to the Spooler
// that made them. The randomness keeps tenants apart: only the writer of
// a message ever sees its markers' ids (writers expand them, and logs are
// the operator's), so one tenant's marker is never written into another
// tenant's output. A string spelt as a marker in what a Spooler reads is
// spilled whatever its length, so an upstream cannot forge one: its bytes
// come back as sent.
//
// Spill files are unlinked as soon as they are created and held open; a
// message's strings are read back with ReadAt, concurrently. A file is
// closed when its strings expire (Options.TTL), are released (Release: by
// a writer that has put the message on its one wire for good, or by the
// offloader once it stored them), or its message fails to read (a peer
// that dies mid-line leaves nothing behind). The bytes alive in spill
// files are bounded process-wide per Spooler (Options.MaxBytes), and so
// are the bytes the Reads in progress hold in memory, together
// (Options.MaxInline): past either, Read fails with ErrFull.
package spill

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/artifact/scratch"
)

// Defaults for the zero Options.
const (
	DefaultThreshold = 64 << 10
	DefaultMaxBytes  = 4 << 30
	DefaultTTL       = 15 * time.Minute
	DefaultMaxInline = 1 << 30
	// DefaultArrayThreshold is the zero Options' ArrayThreshold.
	DefaultArrayThreshold = 4 << 20
	// FirstMax bounds what a spilled array keeps in memory of its first
	// elements (see String.First).
	FirstMax = 64 << 10
	// MaxDepth bounds the nesting of arrays and objects in a message (the
	// same as encoding/json's).
	MaxDepth = 10000
)

var (
	// ErrFull is returned by Read when spilling a message would take the
	// bytes alive in spill files past Options.MaxBytes. The message is lost
	// (its partial spill freed); the next one may fit.
	ErrFull = errors.New("spill: spill space full")
	// ErrBusy, wrapped with ErrFull, is returned by Read when what stays
	// in memory of a message would take what the Reads in progress hold
	// together past Options.MaxInline.
	ErrBusy = fmt.Errorf("spill: no room in memory for more messages being read: %w", ErrFull)
	// ErrTooLarge is returned by Read when what stays in memory of a
	// message passes the caller's maxInline.
	ErrTooLarge = errors.New("spill: inline part of the message over the cap")
	// ErrGone is returned by Expand for a marker that no longer resolves:
	// its strings expired or were released, or it was forged.
	ErrGone = errors.New("spill: marker does not resolve")
	// ErrClosed is returned by Read after Close.
	ErrClosed = errors.New("spill: spooler closed")
)

// Options configure a Spooler. The zero value is usable.
type Options struct {
	// Dir is where spill files go ("": os.TempDir()). Files are unlinked
	// at once after creation and held open.
	Dir string
	// Threshold: strings longer than this many escaped bytes spill
	// (≤ 0: DefaultThreshold). It is at least a marker's length (49), so
	// that spilling never makes a message longer.
	Threshold int64
	// ArrayThreshold: an array (not the message itself) whose bytes pass
	// this many, at the end of one of its elements, moves to disk whole,
	// the strings in it included: a message of many small values (a
	// tool's rows, one content item per row) never stays in memory
	// either (≤ 0: DefaultArrayThreshold).
	ArrayThreshold int64
	// MaxBytes bounds the bytes alive in this Spooler's spill files at
	// once (≤ 0: DefaultMaxBytes).
	MaxBytes int64
	// ShareMax bounds the bytes alive in spill files for one party's
	// messages, those read through its views (For), within MaxBytes
	// (≤ 0 or ≥ MaxBytes: no bound of its own).
	ShareMax int64
	// MaxInline bounds what the Reads in progress hold in memory
	// together, each its message's inline part (≤ 0: DefaultMaxInline;
	// at least 384 KiB, room for one Read):
	// each Read's own cap (maxInline) bounds one message, this bounds
	// many read at once, so that concurrent large messages fail (ErrBusy)
	// instead of adding up past the machine's memory. A message's bytes,
	// and its Read's buffer, count until its Read returns.
	MaxInline int64
	// TTL is how long a message's spilled strings live after it was read
	// (≤ 0: DefaultTTL); Release frees them earlier.
	TTL time.Duration
	// Tap, when set, is asked about every string value that spills, with
	// the name of the object member it is the value of, as sent ("" for
	// an array element, or a name over 32 bytes); strings inside an array
	// moving to disk whole are not offered. A Tap it returns watches the
	// string arrive (see Tap); nil watches nothing. A Tap that is a
	// Keeper may keep the string's bytes so that the spill file does not
	// get them. Tap is called on the reading goroutine.
	Tap func(member string) Tap
}

// A Tap watches one spilled string arrive, so that work on its value can
// run while the rest of the message is read (Options.Tap).
//
// Write gets the string's escaped bytes as sent, without quotes, in order,
// on the reading goroutine (a slow Write slows the reading); it must not
// keep p, and its error is ignored. Then End, once: complete is true when
// the whole string was read, false when its message failed to. A complete
// string's Tap is its String's (String.Tap) and gets Release, once, when
// the String is released, expires, or is folded into an array moving to
// disk; an incomplete one gets nothing more. Release may come from any
// goroutine.
type Tap interface {
	Write(p []byte) (int, error)
	End(complete bool)
	Release()
}

// A Keeper is a Tap that keeps a string's value itself, decoded, so that
// the Spooler neither writes the string's escaped bytes to its spill file
// nor has them decoded twice: while they are spelt canonically (what
// encoders send; see Canon) the Spooler decodes them as it reads them, a
// Canon of base64 data if Base64 says so, else of text, and gives the
// Keeper the value instead (Value, in order; never Write). Value must
// not keep p.
//
// Once the bytes stop being spelt canonically, or Lost is true (asked on
// the reading goroutine before each Value, and at the end), the Spooler
// gives it what it decoded and had not given (a last Value) and calls
// Handback once, with the form of the value so far: the Keeper writes
// that value spelt in form (Spell) to w, in order, and returns w's
// error. From then on the Spooler spills the
// string as any other and Writes the Tap its escaped bytes from where the
// value stopped (a unit a read cut first). After End(true), Kept returns
// a reader of the whole value, readable until Release, or ok false: then
// Handback follows.
type Keeper interface {
	Tap
	Base64() bool
	Value(p []byte)
	Lost() bool
	Handback(w io.Writer, form Form) error
	Kept() (value io.ReaderAt, ok bool)
}

// Spooler reads messages, spilling their long strings. Make one with New
// (the zero value is not usable); For gives views of it that count what
// one party's messages hold. It is safe for concurrent use; Close frees
// everything it and its views spilled.
type Spooler struct {
	*spoolState
	key string // the party this view counts Reads for (For); "" for New's
}

// spoolState is what a Spooler and its views share.
type spoolState struct {
	o      Options
	alive  atomic.Int64 // bytes in open spill files
	inline atomic.Int64 // bytes reserved by the Reads in progress (Options.MaxInline)

	mu     sync.Mutex
	msgs   map[*message]struct{}
	closed bool

	sharesMu sync.Mutex
	shares   map[string]int64 // bytes in open spill files, by party (Options.ShareMax)
}

// For returns a view of s whose Reads count what they spill for key (a
// tenant), within Options.ShareMax: one party whose messages are slow to
// go (a client that reads a big one slowly) fills its share, never the
// space every party's messages need. Views of one key share one count;
// Close on a view closes s.
func (s *Spooler) For(key string) *Spooler { return &Spooler{spoolState: s.spoolState, key: key} }

// charge counts n more bytes (fewer, when n < 0) spilled for key; false,
// nothing counted, when that passes Options.ShareMax.
func (s *spoolState) charge(key string, n int64) bool {
	if s.o.ShareMax >= s.o.MaxBytes {
		return true // no share smaller than the whole
	}
	s.sharesMu.Lock()
	defer s.sharesMu.Unlock()
	v := s.shares[key] + n
	if n > 0 && v > s.o.ShareMax {
		return false
	}
	if v == 0 {
		delete(s.shares, key) // the map holds only the parties holding bytes
	} else {
		s.shares[key] = v
	}
	return true
}

// New checks that o.Dir takes files and returns a Spooler.
func New(o Options) (*Spooler, error) {
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultThreshold
	}
	o.Threshold = max(o.Threshold, int64(markerLen))
	if o.ArrayThreshold <= 0 {
		o.ArrayThreshold = DefaultArrayThreshold
	}
	o.ArrayThreshold = max(o.ArrayThreshold, int64(markerLen))
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.MaxInline <= 0 {
		o.MaxInline = DefaultMaxInline
	}
	o.MaxInline = max(o.MaxInline, readSize+inlineStep) // room for one Read
	if o.ShareMax <= 0 {
		o.ShareMax = o.MaxBytes
	}
	f, err := createUnlinked(o.Dir)
	if err != nil {
		return nil, err
	}
	f.Close()
	return &Spooler{spoolState: &spoolState{o: o, msgs: map[*message]struct{}{}, shares: map[string]int64{}}}, nil
}

// Threshold is the length past which a string spills (escaped bytes).
func (s *Spooler) Threshold() int64 { return s.o.Threshold }

// MayHoldMarker reports whether p may be part of a string spelt as a
// marker: a reader holding a whole message shorter than Threshold, for
// which this is false, may skip Read and take the message as it is.
func MayHoldMarker(p []byte) bool { return bytes.Contains(p, []byte(markerPrefix[1:])) }

// Alive is the number of bytes in this Spooler's open spill files.
func (s *Spooler) Alive() int64 { return s.alive.Load() }

// Close frees every string this Spooler spilled; later Reads fail with
// ErrClosed, and the markers it made stop resolving. It returns nil.
func (s *Spooler) Close() error {
	s.mu.Lock()
	s.closed = true
	msgs := s.msgs
	s.msgs = map[*message]struct{}{}
	s.mu.Unlock()
	for m := range msgs {
		m.expire()
	}
	return nil
}

// Release frees the spilled strings whose markers appear in raw, before
// their TTL. A marker of another Spooler or none at all is ignored.
func (s *Spooler) Release(raw []byte) { release(raw, s) }

// Release frees the spilled strings whose markers appear in raw, whichever
// Spooler made them: for a writer that has put raw on its one wire for
// good (nothing will replay it). An Expand writing them finishes first.
func Release(raw []byte) { release(raw, nil) }

func release(raw []byte, s *Spooler) {
	for _, sp := range markers(raw) {
		registry.mu.Lock()
		x := registry.m[string(raw[sp[0]+len(markerPrefix):sp[1]-1])]
		registry.mu.Unlock()
		if x != nil && (s == nil || x.msg.sp.spoolState == s.spoolState) {
			x.drop()
		}
	}
}

// createUnlinked makes a spill file in dir that is gone with its last
// descriptor (scratch.Create), saying which step failed.
func createUnlinked(dir string) (*os.File, error) {
	f, err := scratch.Create(dir, "spill-*")
	if unlink, ok := errors.AsType[*scratch.UnlinkError](err); ok {
		return nil, fmt.Errorf("spill: unlinking a spill file: %w", unlink.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("spill: creating a spill file: %w", err)
	}
	return f, nil
}

// file is one message's spill file. It is closed, and its bytes given back
// to the Spooler, when the last reference goes: one per live string, one
// per Expand in progress, one for the Read writing it.
type file struct {
	sp   *Spooler
	f    *os.File
	size int64 // written, and counted in sp.alive
	refs atomic.Int64
}

func (f *file) unref() {
	if f.refs.Add(-1) == 0 {
		f.f.Close()
		f.sp.alive.Add(-f.size)
		f.sp.charge(f.sp.key, -f.size)
	}
}

// message is what one Read spilled: its strings live and die together
// (TTL), or one by one (Release).
type message struct {
	sp    *Spooler
	strs  []*String
	timer *time.Timer // set before the strings are registered
	live  int         // strings not dropped; under registry.mu
}

func (m *message) expire() {
	for _, x := range m.strs {
		x.drop()
	}
}

// String is one spilled string. Its methods are safe for concurrent use;
// the readers they return fail once the string expired.
type String struct {
	id   string // 32 lowercase hex
	msg  *message
	f    *file
	off  int64
	n    int64
	gone bool // dropped; under registry.mu

	array bool   // an array moved out whole, not a string
	first []byte // an array's first elements, as a JSON array
	count int64  // an array's elements

	tap Tap // what watched it arrive, if anything (Options.Tap)
	// kept reads the escaped bytes when a Keeper kept them, not the file.
	kept io.ReaderAt
	// refs: one while x is registered, one per Expand writing it; its Tap
	// is released at the last.
	refs atomic.Int64
}

// bytes reads x's escaped bytes, at x.off.
func (x *String) bytes() io.ReaderAt {
	if x.kept != nil {
		return x.kept
	}
	return x.f.f
}

func (x *String) unref() {
	if x.refs.Add(-1) == 0 {
		x.untap()
	}
}

// Tap is the Tap that watched x arrive, nil if none.
func (x *String) Tap() Tap { return x.tap }

// untap releases x's Tap.
func (x *String) untap() {
	if x.tap != nil {
		x.tap.Release()
	}
}

// Kind is "array" for an array moved out whole, "string" otherwise.
func (x *String) Kind() string {
	if x.array {
		return "array"
	}
	return "string"
}

// First is an array's first elements as a JSON array, byte for byte, as
// many as fit in FirstMax (the elements before the first that holds a
// string spilled on its own): what a preview shows of it. nil for a
// string.
func (x *String) First() []byte { return x.first }

// Count is an array's number of elements; 0 for a string.
func (x *String) Count() int64 { return x.count }

// drop takes x out of the registry and gives its file reference back.
func (x *String) drop() {
	registry.mu.Lock()
	if x.gone {
		registry.mu.Unlock()
		return
	}
	x.gone = true
	delete(registry.m, x.id)
	m := x.msg
	m.live--
	last := m.live == 0
	registry.mu.Unlock()
	x.unref()
	x.f.unref()
	if last {
		m.timer.Stop()
		m.sp.mu.Lock()
		delete(m.sp.msgs, m)
		m.sp.mu.Unlock()
	}
}

// Release frees x now rather than at its TTL: its marker stops resolving
// and its file space is given back once no Expand is writing it. For the
// reader of a message that has taken x's bytes elsewhere (the offloader,
// once they are stored). Safe to call more than once.
func (x *String) Release() { x.drop() }

// Len is the string's escaped length, without its quotes; an array's
// length.
func (x *String) Len() int64 { return x.n }

// Raw returns the escaped bytes as sent, without quotes (an array: as
// sent, brackets included): a fresh reader on each call.
func (x *String) Raw() io.Reader { return io.NewSectionReader(x.bytes(), x.off, x.n) }

// Text returns the string's value: its escapes decoded to UTF-8 as
// encoding/json decodes them (invalid UTF-8 and lone surrogates become
// U+FFFD), streaming.
func (x *String) Text() io.Reader { return newTextReader(x.Raw()) }

// Base64 returns Text decoded as standard base64, padded or not (line
// breaks ignored). A malformed encoding is a read error.
func (x *String) Base64() io.Reader { return DecodeBase64(x.Raw()) }

// DecodeText decodes the escaped bytes of a JSON string read from r
// (without its quotes) as String.Text does: for a Tap's bytes.
func DecodeText(r io.Reader) io.Reader { return newTextReader(r) }

// DecodeBase64 decodes the escaped bytes of a JSON string read from r as
// String.Base64 does: for a Tap's bytes.
func DecodeBase64(r io.Reader) io.Reader { return &letters{src: r, in: make([]byte, 64<<10)} }

// decodeBase64Escaped is DecodeBase64 for input with escapes, line breaks
// or padding: what letters hands on when it meets one.
func decodeBase64Escaped(r io.Reader) io.Reader {
	t := newTextReader(r)
	t.wide = true
	return newBase64Reader(t)
}

// Head returns up to the first n bytes of Text, for sniffing; fewer when
// the text is shorter or cannot be read.
func (x *String) Head(n int) []byte {
	b, _ := io.ReadAll(io.LimitReader(x.Text(), int64(n)))
	return b
}

// registry resolves markers process-wide.
var registry = struct {
	mu sync.Mutex
	m  map[string]*String
}{m: map[string]*String{}}

// markerPrefix starts every marker; 32 lowercase hex digits and a quote
// follow.
const (
	markerPrefix = `"\u0000spillway:`
	markerLen    = len(markerPrefix) + 32 + 1
)

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(b[:])
}

// IsMarker reports whether jsonString (quotes included) is spelt as a
// marker. It may not resolve.
func IsMarker(jsonString []byte) bool {
	if len(jsonString) != markerLen || !bytes.HasPrefix(jsonString, []byte(markerPrefix)) || jsonString[markerLen-1] != '"' {
		return false
	}
	for _, c := range jsonString[len(markerPrefix) : markerLen-1] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Lookup resolves a marker (quotes included) to its spilled string.
func Lookup(jsonString []byte) (*String, bool) {
	if !IsMarker(jsonString) {
		return nil, false
	}
	registry.mu.Lock()
	x := registry.m[string(jsonString[len(markerPrefix):markerLen-1])]
	registry.mu.Unlock()
	return x, x != nil
}

// Lookup is the package's Lookup; any Spooler's markers resolve.
func (s *Spooler) Lookup(jsonString []byte) (*String, bool) { return Lookup(jsonString) }

// markers returns the spans of the markers in raw, a JSON text: member
// names and values, never a marker's spelling inside another string.
func markers(raw []byte) [][2]int {
	if !bytes.Contains(raw, []byte(markerPrefix[1:])) {
		return nil
	}
	var spans [][2]int
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		if i+markerLen <= len(raw) && IsMarker(raw[i:i+markerLen]) {
			spans = append(spans, [2]int{i, i + markerLen})
			i += markerLen - 1
			continue
		}
		for i++; i < len(raw) && raw[i] != '"'; i++ {
			if raw[i] == '\\' {
				i++
			}
		}
	}
	return spans
}

// Expand writes raw to w with every marker replaced by its original string
// (quotes kept). Every marker is resolved before anything is written: one
// that does not resolve fails with ErrGone and nothing written. Strings
// cannot expire while they are being written. Without markers raw is
// written as it is.
func Expand(w io.Writer, raw []byte) error {
	spans := markers(raw)
	if spans == nil {
		_, err := w.Write(raw)
		return err
	}
	xs := make([]*String, len(spans))
	defer func() {
		for _, x := range xs {
			if x != nil {
				x.unref()
				x.f.unref()
			}
		}
	}()
	registry.mu.Lock()
	for i, sp := range spans {
		x := registry.m[string(raw[sp[0]+len(markerPrefix):sp[1]-1])]
		if x == nil {
			registry.mu.Unlock()
			return fmt.Errorf("expanding %s: %w", raw[sp[0]:sp[1]], ErrGone)
		}
		x.refs.Add(1) // pinned, and its file: alive while it is written
		x.f.refs.Add(1)
		xs[i] = x
	}
	registry.mu.Unlock()
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	at := 0
	for i, sp := range spans {
		q := 1 // a string keeps the marker's quotes, an array does not
		if xs[i].array {
			q = 0
		}
		if _, err := w.Write(raw[at : sp[0]+q]); err != nil {
			return err
		}
		if _, err := io.CopyBuffer(onlyWriter{w}, xs[i].Raw(), *buf); err != nil {
			return err
		}
		at = sp[1] - q
	}
	_, err := w.Write(raw[at:])
	return err
}

// onlyWriter hides a ReaderFrom, so that CopyBuffer uses the pooled buffer.
type onlyWriter struct{ io.Writer }

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// ExpandedLen is the number of bytes Expand would write, counting a marker
// that does not resolve as itself.
func ExpandedLen(raw []byte) int64 {
	n := int64(len(raw))
	for _, sp := range markers(raw) {
		if x, ok := Lookup(raw[sp[0]:sp[1]]); ok {
			n += x.n - int64(markerLen)
			if !x.array {
				n += 2
			}
		}
	}
	return n
}

// Expand is the package's Expand.
func (s *Spooler) Expand(w io.Writer, raw []byte) error { return Expand(w, raw) }

// ExpandedLen is the package's ExpandedLen.
func (s *Spooler) ExpandedLen(raw []byte) int64 { return ExpandedLen(raw) }

// HasMarkers reports whether raw holds a marker (resolving or not).
func HasMarkers(raw []byte) bool { return markers(raw) != nil }
