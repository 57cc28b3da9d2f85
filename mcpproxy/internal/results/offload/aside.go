package offload

import "io"

// aside passes what is written to it on to w, on a goroutine of its own
// and a few chunks ahead (at most asideChunks writes wait), so that a
// large unit's preview is built beside the store's write and hash
// rather than after each chunk of it. Its asideChunks+1 buffers are
// reused: a Write waits for one while w is behind, and allocates nothing
// once they have grown. Close waits until w has everything. Write never
// fails: w's errors are not passed back, w keeps them itself.
type aside struct {
	ch   chan []byte
	free chan []byte
	done chan struct{}
}

// asideChunks is how many writes may wait for w; asideChunk is the
// least size of a buffer.
const (
	asideChunks = 4
	asideChunk  = 64 << 10 // a buffer's least size: what a reader gives at a time
)

// newAside starts passing what is written to it on to w.
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

// Write copies p into a free buffer and queues it for w.
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
