package storetest

import (
	"encoding/binary"
	"errors"
	"io"
)

// Gen is a deterministic, seekable stream of pseudo-random bytes: byte i of
// the stream depends only on Seed and i, so a test can check any range of a
// large artifact without holding it in memory. Read returns io.EOF after
// Size bytes.
type Gen struct {
	Seed uint64
	Size int64
	off  int64
}

// word returns the k-th 8-byte word of the stream (SplitMix64).
func (g *Gen) word(k uint64) uint64 {
	z := g.Seed + (k+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Read implements io.Reader.
func (g *Gen) Read(p []byte) (int, error) {
	if g.off >= g.Size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.Size-g.off)]
	n := g.fill(p, g.off)
	g.off += int64(n)
	return n, nil
}

// fill writes the stream's bytes from off into p.
func (g *Gen) fill(p []byte, off int64) int {
	n := 0
	var w [8]byte
	for n < len(p) {
		pos := off + int64(n)
		k, r := uint64(pos)/8, int(pos%8)
		if r == 0 && len(p)-n >= 8 {
			binary.LittleEndian.PutUint64(p[n:], g.word(k))
			n += 8
			continue
		}
		binary.LittleEndian.PutUint64(w[:], g.word(k))
		n += copy(p[n:], w[r:])
	}
	return n
}

// Bytes returns bytes [off, off+n) of the stream, cut at Size.
func (g *Gen) Bytes(off, n int64) []byte {
	if off >= g.Size {
		return []byte{}
	}
	n = min(n, g.Size-off)
	b := make([]byte, n)
	g.fill(b, off)
	return b
}

// failReader yields n bytes of a Gen and then err.
type failReader struct {
	g   Gen
	n   int64
	err error
}

func (r *failReader) Read(p []byte) (int, error) {
	if r.g.off >= r.n {
		return 0, r.err
	}
	p = p[:min(int64(len(p)), r.n-r.g.off)]
	return r.g.Read(p)
}

var errBoom = errors.New("storetest: reader failed on purpose")
