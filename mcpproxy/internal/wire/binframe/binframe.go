// Package binframe writes and reads the two framings of binary transfer
// (rfc-binary-transfer.md): the stdio frame that follows a JSON-RPC line
// (Option A: a 16-byte stream id, an 8-byte big-endian size, the bytes)
// and the multipart/mixed response of an HTTP POST (Option B: each
// JSON-RPC message a part, each binaryRef's bytes a part named by its
// Content-ID).
//
// Writers stream: a part's or a frame's bytes are copied from an
// io.Reader in bounded chunks, never held whole. The readers are for
// clients and tests; they bound what they hold (a frame's header, a
// part's headers) and hand the bytes on as readers too.
package binframe

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// StreamID names one binary item's bytes: 128 random bits, written as a
// UUID (8-4-4-12 lowercase hex) in a binaryRef and as 16 raw bytes in a
// stdio frame. The zero StreamID names nothing.
type StreamID [16]byte

// NewStreamID returns a fresh random StreamID (shaped as a version 4
// UUID: 122 random bits).
func NewStreamID() StreamID {
	var id StreamID
	rand.Read(id[:]) // never fails (crypto/rand since Go 1.24)
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

// String is id as a UUID, lowercase.
func (id StreamID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// ParseStreamID reads a StreamID written as a UUID (any hex case); ok is
// false for anything else.
func ParseStreamID(s string) (id StreamID, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return StreamID{}, false
	}
	return id, true
}

// HeaderLen is the length of a stdio frame's header.
const HeaderLen = 16 + 8

// ErrShort is returned when a frame's or part's bytes end before the
// size it declared.
var ErrShort = errors.New("binframe: the bytes ended before their declared size")

// WriteFrame writes one stdio frame to w: id, size as 8 bytes big-endian,
// then exactly size bytes copied from r. A reader that ends sooner fails
// with ErrShort (the frame is then cut: the caller must end the
// connection, as its peer can no longer find the next line).
func WriteFrame(w io.Writer, id StreamID, size int64, r io.Reader) error {
	if size < 0 {
		return fmt.Errorf("binframe: negative size %d", size)
	}
	var h [HeaderLen]byte
	copy(h[:16], id[:])
	binary.BigEndian.PutUint64(h[16:], uint64(size))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	return copyExactly(w, r, size)
}

// copyExactly copies size bytes of r to w through a bounded buffer.
func copyExactly(w io.Writer, r io.Reader, size int64) error {
	n, err := io.CopyBuffer(onlyWriter{w}, io.LimitReader(r, size), make([]byte, 32<<10))
	if err != nil {
		return err
	}
	if n < size {
		return fmt.Errorf("%w: %d of %d bytes", ErrShort, n, size)
	}
	return nil
}

// onlyWriter hides a ReaderFrom, so that CopyBuffer uses its buffer.
type onlyWriter struct{ io.Writer }

// ReadFrameHeader reads a stdio frame's header from r: the stream id and
// the size of the bytes that follow, which the caller reads next (at most
// max of them: a larger size is an error, nothing more read).
func ReadFrameHeader(r io.Reader, max int64) (StreamID, int64, error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return StreamID{}, 0, err
	}
	var id StreamID
	copy(id[:], h[:16])
	size := binary.BigEndian.Uint64(h[16:])
	if size > uint64(max) {
		return id, 0, fmt.Errorf("binframe: frame of %d bytes over the %d byte limit", size, max)
	}
	return id, int64(size), nil
}
