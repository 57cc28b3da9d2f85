package offload

import (
	"cmp"
	"io"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/preview"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// maxEarly bounds the strings worked on as they arrive, per Rewriter:
// each holds a preview's sample (under 3 MiB), earlyChunks of the bytes in
// flight, and its staged copy on disk (within Options.StageMax) until its
// string is stored or let go. Past it a string is decoded when it is
// stored, as it always could be.
const maxEarly = 8

// stageChunk is what the early work decodes at a time: one write to the
// staging, and one of the aside's buffers as they are first made.
const stageChunk = asideChunk

// earlyChunks is how far the reading may run ahead of the early work:
// past it, the reading waits.
const earlyChunks = 8

// Tap is for spill.Options.Tap: a spilled string that will likely be
// stored starts its work while the rest of its message is still arriving,
// on a goroutine of its own, so that offloading it once the message is in
// is a copy. A text (the value of a member named "text": a text content
// item's, an embedded resource's, a read resource's) is decoded once, into
// its preview and a staged copy; base64 data (members "data" and "blob":
// images, audio, blobs) is decoded into a staged copy. nil for any other
// member, or when maxEarly are under way. Safe for concurrent use.
func (f *Rewriter) Tap(member string) spill.Tap {
	var b64 bool
	switch member {
	case "text":
	case "data", "blob":
		b64 = true
	default:
		return nil
	}
	select {
	case f.early <- struct{}{}:
	default:
		return nil
	}
	e := &early{ch: make(chan []byte, earlyChunks), done: make(chan struct{}), slot: f.early, base64: b64,
		decided: make(chan struct{}), hb: make(chan handback), hbErr: make(chan error)}
	go e.run(f.o.ThumbMax, f.stage)
	return e
}

// early is a spilled string's work done as it arrives: a text's preview,
// the one publish would build for a unit of the same mime type (publish
// takes it only then: the same options, the same bytes), and the decoded
// bytes staged (artifact.Staging), which the store takes as they are or
// copies, instead of decoding the spilled string again.
//
// It is a spill.Keeper: while the string is spelt canonically (what
// encoders send; see spill.Canon) the Spooler decodes it as it reads it
// and the value is staged alone: the spill file never gets its bytes, and
// a string offloaded as it arrives is written once, decoded. From the
// first chunk that is not (or once the staging fails) it is lost:
// Handback writes the value so far, spelt again, and the spill file takes
// the rest, which the work here decodes the general way.
type early struct {
	ch     chan []byte // the value, then (once handed back) escaped bytes; closed at the end
	done   chan struct{}
	slot   chan struct{} // the Rewriter's count of early work
	base64 bool          // the value is base64 data, staged decoded; no preview

	lost    atomic.Bool   // it does not keep the string: Handback
	decided chan struct{} // closed once it kept the whole string, or lost it
	value   io.ReaderAt   // the string's value, once decided and kept
	hb      chan handback
	hbErr   chan error

	mu       sync.Mutex
	complete bool // the whole string was read (End)
	released bool // the string was released: nothing here is anyone's
	mime     string
	pb       *preview.Builder // nil once released, taken, or failed
	stg      *staged          // nil once released, or when not staged whole
	freed    sync.Once
}

// chunkPool holds the buffers the chunks of a string travel in to its
// early work.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// Write takes the string's escaped bytes, once handed back.
func (e *early) Write(p []byte) (int, error) {
	b := chunkPool.Get().(*[]byte)
	*b = append((*b)[:0], p...)
	e.ch <- *b
	return len(p), nil
}

// Value takes the string's value as the Spooler decodes it (spill.Keeper).
func (e *early) Value(p []byte) { e.Write(p) }

// Base64 tells the Spooler which values it takes (spill.Keeper).
func (e *early) Base64() bool { return e.base64 }

// End says the string ended, whole or not (spill.Tap).
func (e *early) End(complete bool) {
	e.mu.Lock()
	e.complete = complete
	e.mu.Unlock()
	close(e.ch)
	if !complete {
		e.free()
	}
}

// Lost reports whether the string's bytes must be spilled (spill.Keeper).
func (e *early) Lost() bool { return e.lost.Load() }

// Kept returns the string's staged value, after End (spill.Keeper).
func (e *early) Kept() (io.ReaderAt, bool) {
	<-e.decided
	return e.value, e.value != nil
}

// handback is a Handback's request: the value so far goes to w, spelt in
// form.
type handback struct {
	w    io.Writer
	form spill.Form
}

// Handback writes the value so far to w, spelt in form, once lost
// (spill.Keeper).
func (e *early) Handback(w io.Writer, form spill.Form) error {
	e.hb <- handback{w, form}
	return <-e.hbErr
}

// Release lets the work go: its string will not be stored from here. A
// reader of the staged copy still open fails from now, as the spilled
// string's own readers do.
func (e *early) Release() {
	e.mu.Lock()
	e.released, e.pb = true, nil
	stg := e.stg
	e.stg = nil
	e.mu.Unlock()
	stg.drop()
	e.free()
}

// free gives the work's place back to the Rewriter's count, once.
func (e *early) free() { e.freed.Do(func() { <-e.slot }) }

// run decodes the string as it comes, into its preview and its staged
// copy.
func (e *early) run(thumbMax int, st *stager) {
	defer close(e.done)
	sk := &earlySink{text: !e.base64, thumbMax: thumbMax, stg: st.create()}
	rest := e.keep(sk) // a staging that cannot be made loses it at once
	whole := true
	if rest != nil {
		whole = sk.decode(rest, e.base64)
	}
	drain(e.ch) // the reading never waits on work that stopped
	sk.finish()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !whole || !e.complete || e.released {
		sk.stg.drop()
		return
	}
	e.mime, e.pb, e.stg = sk.mime, sk.pb, sk.stg
}

// keep stages the value chunk by chunk as the Spooler gives it. It
// returns nil when it kept the string whole (or it ended incomplete),
// else the escaped bytes from where the value stopped, for the general
// decoding, once they are handed back.
func (e *early) keep(sk *earlySink) io.Reader {
	var given int64 // value bytes staged
	for {
		select {
		case b, ok := <-e.ch:
			if !ok {
				e.mu.Lock()
				complete := e.complete
				e.mu.Unlock()
				if complete && sk.stg == nil {
					return e.loseTo(sk, 0, nil, nil)
				}
				if complete {
					e.value = sk.stg.w
				}
				close(e.decided)
				return nil
			}
			if sk.stg == nil {
				return e.loseTo(sk, 0, nil, b)
			}
			if !sk.write(b) {
				return e.loseTo(sk, given, b, nil)
			}
			given += int64(len(b))
			chunkPool.Put(&b)
		case hb := <-e.hb: // the Spooler's Canon refused the bytes
			e.lost.Store(true)
			close(e.decided)
			return e.handedBack(hb, sk, given, nil, nil)
		}
	}
}

// loseTo gives the string up: the staged value (given bytes), then seen
// (a chunk of the value the sink took but the staging did not), then
// next and every chunk of the value that came since (which the sink gets
// now), spelt in the form the Handback says; then the general decoding
// goes on with the escaped bytes that follow. It returns what that
// decoding reads, nil if the string ends incomplete first.
func (e *early) loseTo(sk *earlySink, given int64, seen, next []byte) io.Reader {
	e.lost.Store(true)
	close(e.decided)
	var pend [][]byte
	if next != nil {
		pend = append(pend, next)
	}
	for {
		select {
		case b, ok := <-e.ch:
			if ok {
				pend = append(pend, b)
				continue
			}
			e.mu.Lock()
			complete := e.complete
			e.mu.Unlock()
			if !complete {
				return nil // no Handback comes
			}
			// Ended: the Handback comes after Kept.
			return e.handedBack(<-e.hb, sk, given, seen, pend)
		case hb := <-e.hb:
			return e.handedBack(hb, sk, given, seen, pend)
		}
	}
}

// handedBack answers the Spooler's Handback, hb: the value so far (see
// loseTo) goes to hb.w, and the sink gets the chunks pend. It returns a
// reader of the escaped bytes that follow.
func (e *early) handedBack(hb handback, sk *earlySink, given int64, seen []byte, pend [][]byte) io.Reader {
	// The Spooler waits in Handback: every value chunk it gave is in the
	// channel (the select may have taken the Handback before them).
	for len(e.ch) > 0 {
		b, ok := <-e.ch
		if !ok {
			break
		}
		pend = append(pend, b)
	}
	e.hbErr <- e.handTo(hb, sk, given, seen, pend)
	if seen != nil {
		chunkPool.Put(&seen)
	}
	for _, b := range pend {
		sk.write(b) // the preview's, and the staging's if it still takes them
		chunkPool.Put(&b)
	}
	if !sk.staging() {
		sk.stg.drop()
		sk.stg = nil
	}
	return &chunkReader{ch: e.ch}
}

// handTo writes the value so far to hb.w, spelt in hb.form: the staged
// part, then seen, then the chunks pend.
func (e *early) handTo(hb handback, sk *earlySink, given int64, seen []byte, pend [][]byte) error {
	var sp []byte
	spell := func(v []byte) error {
		sp = spill.Spell(sp[:0], v, hb.form)
		_, err := hb.w.Write(sp)
		return err
	}
	if given > 0 {
		// Whole base64 quanta, or whole characters, at a time: the
		// spelling of each read is the spelling of the whole (TextLS
		// escapes U+2028 and U+2029, three bytes each).
		buf := make([]byte, 48<<10)
		for off := int64(0); off < given; {
			want := int(min(int64(len(buf)), given-off))
			n, err := sk.stg.w.ReadAt(buf[:want], off)
			if n < want {
				return cmp.Or(err, io.ErrUnexpectedEOF)
			}
			if !e.base64 {
				if m := wholeChars(buf[:n]); m > 0 {
					n = m // never 0: the value is UTF-8, and a read is 48 KiB or its end
				}
			}
			if err := spell(buf[:n]); err != nil {
				return err
			}
			off += int64(n)
		}
	}
	if err := spell(seen); err != nil {
		return err
	}
	for _, b := range pend {
		if err := spell(b); err != nil {
			return err
		}
	}
	return nil
}

// wholeChars returns the length of b's whole UTF-8 characters: all of it
// but a last one cut by its end (b is valid UTF-8 cut anywhere, at least
// one character long).
func wholeChars(b []byte) int {
	i := len(b) - 1
	for i > 0 && i > len(b)-4 && !utf8.RuneStart(b[i]) {
		i--
	}
	if utf8.FullRune(b[i:]) {
		return len(b)
	}
	return i
}

// earlySink takes a string's value as it is decoded: into its staged
// copy and, for a text, once its first bytes tell its mime type, into
// its preview, built beside (see aside).
type earlySink struct {
	text      bool
	thumbMax  int
	stg       *staged
	stgFailed bool // stg takes no more: a write failed
	head      []byte
	mime      string
	pb        *preview.Builder
	side      *aside
}

// staging reports whether the staged copy has every byte so far.
func (k *earlySink) staging() bool { return k.stg != nil && !k.stgFailed }

// write takes p; false if the staging failed (it then takes no more,
// but is not dropped: the caller may still read what it holds).
func (k *earlySink) write(p []byte) bool {
	if len(p) == 0 {
		return k.staging()
	}
	if k.text && k.pb == nil {
		k.head = append(k.head, p...)
		if len(k.head) >= sniffSize {
			k.start()
		}
	} else if k.side != nil {
		k.side.Write(p)
	}
	if !k.staging() {
		return false
	}
	if !k.stg.add(p) {
		k.stgFailed = true
		return false
	}
	return true
}

// start begins the preview, of the mime type the text's head tells.
func (k *earlySink) start() {
	n := min(len(k.head), sniffSize)
	k.mime = mimeOfHead(k.head[:n])
	// As publish builds it for a text unit of this mime type, on a
	// goroutine of its own: the decoding and the staging do not wait for
	// it (nor it for them) but a few chunks ahead.
	k.pb = preview.New(preview.Options{MimeType: k.mime, Name: "x" + extension(k.mime), ThumbMax: k.thumbMax})
	k.side = newAside(k.pb)
	k.side.Write(k.head)
	k.head = nil
}

// decode decodes r the general way into the sink; false if r's bytes do
// not decode (malformed base64: the store's own decoding will say so).
func (k *earlySink) decode(r io.Reader, b64 bool) bool {
	src := spill.DecodeText(r)
	if b64 {
		src = spill.DecodeBase64(r)
	}
	buf := make([]byte, stageChunk) // big reads: each a write to the staging
	for {
		n, err := src.Read(buf)
		if !k.write(buf[:n]) && k.stg != nil && k.stgFailed {
			k.stg.drop()
			k.stg = nil
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// finish ends the preview.
func (k *earlySink) finish() {
	if k.text && k.pb == nil {
		k.start()
	}
	if k.side != nil {
		k.side.Close()
	}
	if k.stgFailed {
		k.stg.drop()
		k.stg = nil
	}
}

// drain reads ch until it is closed.
func drain(ch chan []byte) {
	for range ch {
	}
}

// stager stages decoded strings (artifact.Service.Stage), within a
// bound on the bytes staged at once. A nil *stager stages nothing.
type stager struct {
	svc  *artifact.Service
	dir  string
	max  int64
	used atomic.Int64
}

// staged is one string's decoded copy. A nil *staged is one that failed:
// its methods do nothing.
type staged struct {
	st *stager
	w  artifact.Staging
	n  int64
}

// create starts a staged copy; nil when it cannot be made.
func (st *stager) create() *staged {
	if st == nil {
		return nil
	}
	w, err := st.svc.Stage(st.dir)
	if err != nil {
		return nil
	}
	return &staged{st: st, w: w}
}

// add appends p; false once s failed (out of its stager's bound, or of
// disk): it then holds what it held before, and takes no more.
func (s *staged) add(p []byte) bool {
	if s.st.used.Add(int64(len(p))) > s.st.max {
		s.st.used.Add(-int64(len(p)))
		return false
	}
	s.n += int64(len(p))
	n, err := s.w.Write(p)
	return err == nil && n == len(p)
}

// drop frees the staging (an artifact made of it stays) and gives its
// bytes back.
func (s *staged) drop() {
	if s == nil {
		return
	}
	s.w.Close()
	s.st.used.Add(-s.n)
}

// chunkReader reads the chunks of a channel, giving each back to
// chunkPool once read.
type chunkReader struct {
	ch  chan []byte
	cur []byte
	buf *[]byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.buf != nil {
			chunkPool.Put(r.buf)
			r.buf = nil
		}
		b, ok := <-r.ch
		if !ok {
			return 0, io.EOF
		}
		r.cur, r.buf = b, &b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
