package offload

import (
	"io"
	"sync"

	"github.com/spillway-dev/spillway/artifact/preview"
	"github.com/spillway-dev/spillway/mcpproxy/internal/spill"
)

// maxEarly bounds the previews built early at once, process-wide: each
// holds a preview's sample (under 3 MiB) and earlyChunks of the bytes in
// flight until its string is stored or let go. Past it a text's preview
// is built when it is stored, as it always could be.
const maxEarly = 8

// earlyChunks is how far the reading may run ahead of an early preview:
// past it, the reading waits.
const earlyChunks = 8

// Tap is for spill.Options.Tap: a spilled text (the value of a member
// named "text": a text content item's, an embedded resource's, a read
// resource's) starts its preview while the rest of its message is still
// arriving, on a goroutine of its own, so that offloading it once the
// message is in leaves only the store's copy to do. nil for any other
// member, or when maxEarly previews are under way. Safe for concurrent
// use.
func (f *Rewriter) Tap(member string) spill.Tap {
	if member != "text" {
		return nil
	}
	select {
	case f.early <- struct{}{}:
	default:
		return nil
	}
	e := &early{ch: make(chan []byte, earlyChunks), done: make(chan struct{}), slot: f.early}
	go e.run(f.o.ThumbMax)
	return e
}

// early is a spilled text's preview, built as the text arrives. Its
// preview is the one publish would build for a unit of the same mime type
// (publish takes it only then): the same options, the same bytes.
type early struct {
	ch   chan []byte // escaped bytes; closed at the end
	done chan struct{}
	slot chan struct{} // the Rewriter's count of early previews

	mu       sync.Mutex
	complete bool // the whole string was read (End)
	gone     bool // released or taken: pb is no one's
	mime     string
	pb       *preview.Builder // nil once released, taken, or failed
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

// Release lets the preview go: its string will not be stored from here.
func (e *early) Release() {
	e.mu.Lock()
	e.gone, e.pb = true, nil
	e.mu.Unlock()
	e.free()
}

func (e *early) free() { e.freed.Do(func() { <-e.slot }) }

// run decodes the text as it comes and feeds the preview.
func (e *early) run(thumbMax int) {
	defer close(e.done)
	r := &chunkReader{ch: e.ch}
	defer r.drain() // the reading never waits on a preview that stopped
	text := spill.DecodeText(r)
	head := make([]byte, sniffSize)
	n, err := io.ReadFull(text, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return
	}
	mime := mimeOfHead(head[:n])
	// As publish builds it for a text unit of this mime type.
	pb := preview.New(preview.Options{MimeType: mime, Name: "x" + extension(mime), ThumbMax: thumbMax})
	pb.Write(head[:n])
	if _, err := io.Copy(pb, text); err != nil {
		return
	}
	e.mu.Lock()
	if !e.gone {
		e.mime, e.pb = mime, pb
	}
	e.mu.Unlock()
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
	e.gone, e.pb = true, nil
	return pb
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

// early returns the early preview of lit, a spilled string, if it has
// one.
func (l lits) early(lit []byte) *early {
	s, ok := l.str(lit)
	if !ok {
		return nil
	}
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
