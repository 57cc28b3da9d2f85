package storetest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
)

// benchSizes are the object sizes every store is measured with.
var benchSizes = []int64{1 << 20, 100 << 20}

// cycle repeats a random block up to n bytes: a source that costs nothing
// next to the store, so the figures are the store's.
type cycle struct {
	block []byte
	n     int64
}

func newCycle(n int64) *cycle {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return &cycle{block: b, n: n}
}

func (c *cycle) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), c.n)]
	n := 0
	for n < len(p) {
		n += copy(p[n:], c.block)
	}
	c.n -= int64(n)
	return n, nil
}

func sizeName(n int64) string { return fmt.Sprintf("%dMiB", n>>20) }

// BenchPut measures Put of undeclared size, streamed, for 1 MiB and 100 MiB
// objects. Each object is deleted, off the clock, before the next.
func BenchPut(b *testing.B, s artifact.Store) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			b.SetBytes(size)
			src := newCycle(size)
			for b.Loop() {
				src.n = size
				meta := newMeta()
				if _, err := s.Put(b.Context(), meta, src); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := s.Delete(b.Context(), meta.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchOpen measures Open and reading to the end for 1 MiB and 100 MiB
// objects.
func BenchOpen(b *testing.B, s artifact.Store) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			meta := newMeta()
			if _, err := s.Put(b.Context(), meta, newCycle(size)); err != nil {
				b.Fatal(err)
			}
			// b.Context is canceled by the time cleanups run.
			b.Cleanup(func() { s.Delete(context.Background(), meta.ID) })
			buf := make([]byte, 256<<10)
			b.SetBytes(size)
			for b.Loop() {
				rc, err := s.Open(b.Context(), meta.ID, 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, rc, buf)
				rc.Close()
				if err != nil || n != size {
					b.Fatalf("read %d bytes, %v", n, err)
				}
			}
		})
	}
}
