package offload

import "io"

// aside hands what is written to w on a goroutine of its own, a few
// chunks ahead (bounded: asideChunks of what it is given at a time), so
// that a large unit's preview is built beside the store's write and hash
// rather than after each chunk of it. Its asideChunks+1 buffers are
// reused: a Write waits for one while w is behind, and allocates nothing
// once they have grown. Close waits for w to have everything. Write never
// fails; w's own errors are w's to keep.
type aside struct {
	ch   chan []byte
	free chan []byte
	done chan struct{}
}

const (
	asideChunks = 4
	asideChunk  = 64 << 10 // a buffer's least size: what a reader gives at a time
)

func newAside(w io.Writer) *aside {
	a := &aside{ch: make(chan []byte, asideChunks), free: make(chan []byte, asideChunks+1), done: make(chan struct{})}
	for range asideChunks + 1 {
		a.free <- nil // made on first use
	}
	go func() {
		defer close(a.done)
		for b := range a.ch {
			w.Write(b)
			a.free <- b[:0] // never blocks: there are only so many
		}
	}()
	return a
}

func (a *aside) Write(p []byte) (int, error) {
	b := <-a.free
	if cap(b) < len(p) {
		b = make([]byte, 0, max(len(p), asideChunk))
	}
	a.ch <- append(b, p...)
	return len(p), nil
}

// Close ends the stream and waits for w to have it all.
func (a *aside) Close() {
	close(a.ch)
	<-a.done
}
