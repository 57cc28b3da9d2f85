package artifact

import (
	"io"
	"net"

	"github.com/spillway-dev/spillway/artifact/httpsafe"
)

// ConnSection is implemented by a reader Store.Open returns when its bytes
// arrive on a plain TCP connection of its own, already positioned at them
// (the S3 store on an http endpoint): the fetch endpoint then has the
// kernel move them from that connection to the client's (splice on Linux)
// instead of copying each byte through a buffer here. A reader that
// implements it is read either through ConnSection or through Read, never
// both. Its Close closes the connection, which is never reused.
type ConnSection interface {
	// ConnSection returns the section's first bytes, already read off the
	// connection (head), and the connection that carries the n bytes that
	// follow them. The reader keeps watching the connection while the
	// caller moves them: a store that stops sending, or the end of the
	// request's context, fails the caller's reads with a timeout.
	ConnSection() (head []byte, c *net.TCPConn, n int64)
	// SectionErr returns the store's error for err, an error met while
	// moving the bytes off the connection: one that wraps ErrUnavailable
	// when the store stopped sending, err itself otherwise.
	SectionErr(err error) error
}

// splice writes head, then n bytes from c, as Write would, but through
// the writer's ReadFrom, where the HTTP server hands the connection itself
// to the client connection's ReadFrom (splice: the bytes never leave the
// kernel).
//
// Each call moves at most spliceChunk bytes under a fresh write deadline:
// a client that stops reading is cut after the timeout, as by Write, but
// one must take spliceChunk (not httpsafe.StallChunk) within each
// timeout, so at the default WriteStallTimeout of 30 s a client reading
// under about 34 KiB/s is cut. The calls are what it costs: of a 100 MiB
// fetch from MinIO, Spillway's CPU was 33.5-34.6 ms spliced in slices of
// 256 KiB, 26.4-28.5 ms in slices of 1 MiB (a bare Go proxy copying
// through a buffer: 30-32 ms; see BENCHMARKS.md).
func (s *stallWriter) splice(head []byte, c *net.TCPConn, n int64) error {
	if _, err := s.Write(head); err != nil {
		return err
	}
	rf, ok := s.w.(io.ReaderFrom)
	if !ok {
		m, err := io.Copy(s, io.LimitReader(c, n))
		if err == nil && m < n {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	chunk := int64(0) // no deadline: one call
	if s.timeout >= 0 {
		chunk = spliceChunk
	}
	return s.readFrom(rf, c, n, chunk)
}

// spliceChunk is the most one write deadline covers when splicing.
const spliceChunk = 16 * httpsafe.StallChunk
