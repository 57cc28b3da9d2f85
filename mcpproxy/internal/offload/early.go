package offload

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/preview"
	"github.com/spillway-dev/spillway/mcpproxy/internal/spill"
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
	e := &early{ch: make(chan []byte, earlyChunks), done: make(chan struct{}), slot: f.early, base64: b64}
	go e.run(f.o.ThumbMax, f.stage)
	return e
}

// early is a spilled string's work done as it arrives: a text's preview,
// the one publish would build for a unit of the same mime type (publish
// takes it only then: the same options, the same bytes), and the decoded
// bytes staged (artifact.Staging), which the store takes as they are or
// copies, instead of decoding the spilled string again.
type early struct {
	ch     chan []byte // escaped bytes; closed at the end
	done   chan struct{}
	slot   chan struct{} // the Rewriter's count of early work
	base64 bool          // the value is base64 data, staged decoded; no preview

	mu       sync.Mutex
	complete bool // the whole string was read (End)
	released bool // the string was released: nothing here is anyone's
	mime     string
	pb       *preview.Builder // nil once released, taken, or failed
	stg      *staged          // nil once released, or when not staged whole
	freed    sync.Once
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func (e *early) Write(p []byte) (int, error) {
	b := chunkPool.Get().(*[]byte)
	*b = append((*b)[:0], p...)
	e.ch <- *b
	return len(p), nil
}

func (e *early) End(complete bool) {
	e.mu.Lock()
	e.complete = complete
	e.mu.Unlock()
	close(e.ch)
	if !complete {
		e.free()
	}
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

func (e *early) free() { e.freed.Do(func() { <-e.slot }) }

// run decodes the string as it comes, into its preview and its staged
// copy.
func (e *early) run(thumbMax int, st *stager) {
	defer close(e.done)
	r := &chunkReader{ch: e.ch}
	defer r.drain() // the reading never waits on work that stopped
	stg := st.create()
	var (
		src  io.Reader
		pb   *preview.Builder
		side *aside
		mime string
		// Big reads: each is a write to the staging (a system call).
		buf = make([]byte, stageChunk)
	)
	if e.base64 {
		src = spill.DecodeBase64(r)
	} else {
		src = spill.DecodeText(r)
		n, err := io.ReadFull(src, buf[:sniffSize])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			stg.drop()
			return
		}
		mime = mimeOfHead(buf[:n])
		// As publish builds it for a text unit of this mime type, on a
		// goroutine of its own: the decoding and the staging do not wait
		// for it (nor it for them) but a few chunks ahead.
		pb = preview.New(preview.Options{MimeType: mime, Name: "x" + extension(mime), ThumbMax: thumbMax})
		side = newAside(pb)
		side.Write(buf[:n])
		stg = stg.write(buf[:n])
	}
	whole := true
	for {
		n, err := src.Read(buf)
		if side != nil && n > 0 {
			side.Write(buf[:n])
		}
		stg = stg.write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil { // malformed base64: the store's own decoding will say so
			whole = false
			break
		}
	}
	if side != nil {
		side.Close()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !whole || !e.complete || e.released {
		stg.drop()
		return
	}
	e.mime, e.pb, e.stg = mime, pb, stg
}

// take returns the early preview's builder, all the text written, when
// it was built for mime, once; nil otherwise (publish builds one).
func (e *early) take(mime string) *preview.Builder {
	if e == nil {
		return nil
	}
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.complete || e.pb == nil || e.mime != mime {
		return nil
	}
	pb := e.pb
	e.pb = nil
	return pb
}

// open returns a reader of the string's value as staged while it
// arrived: its text, or with b64 its bytes decoded from base64. nil when
// there is no such copy (the caller decodes the spilled string).
func (e *early) open(b64 bool) io.Reader {
	if e == nil || e.base64 != b64 {
		return nil
	}
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stg == nil {
		return nil
	}
	return artifact.StagedReader(e.stg.w)
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

// write appends p, returning s, or nil once s failed (out of its
// stager's bound, or of disk), its bytes given back.
func (s *staged) write(p []byte) *staged {
	if s == nil || len(p) == 0 {
		return s
	}
	if s.st.used.Add(int64(len(p))) > s.st.max {
		s.st.used.Add(-int64(len(p)))
		s.drop()
		return nil
	}
	s.n += int64(len(p))
	if _, err := s.w.Write(p); err != nil {
		s.drop()
		return nil
	}
	return s
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

func (r *chunkReader) drain() {
	for range r.ch {
	}
}

// early returns the early work of lit, a spilled string, if it has any.
func (l lits) early(lit []byte) *early {
	s, ok := l.str(lit)
	if !ok {
		return nil
	}
	return earlyOf(s)
}

// earlyOf returns the early work of a spilled string, nil if none.
func earlyOf(s Spilled) *early {
	t, ok := s.(interface{ Tap() spill.Tap })
	if !ok {
		return nil
	}
	e, _ := t.Tap().(*early)
	return e
}

// Registry is the spill package's process-wide registry of spilled
// strings, as a Rewriter asks it (Options.Spills). The zero value is
// ready; it is safe for concurrent use.
type Registry struct{}

// Lookup is spill.Lookup.
func (Registry) Lookup(lit []byte) (Spilled, bool) {
	if s, ok := spill.Lookup(lit); ok {
		return s, true
	}
	return nil, false
}

// Release releases the string lit stands for, if it is one.
func (Registry) Release(lit []byte) {
	if s, ok := spill.Lookup(lit); ok {
		s.Release()
	}
}

// ExpandedLen is spill.ExpandedLen.
func (Registry) ExpandedLen(raw []byte) int64 { return spill.ExpandedLen(raw) }

// Expand is spill.Expand.
func (Registry) Expand(w io.Writer, raw []byte) error { return spill.Expand(w, raw) }
