package preview

import (
	"bufio"
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"slices"
	"sync"
)

// Drawing a thumbnail is the one place a preview decodes what an upstream
// sent, and Go's decoders allocate what an image's header declares: a 128
// KiB progressive JPEG can declare 22 Mpx and make image/jpeg hold 15
// bytes a pixel (the pixels, and every DCT coefficient as an int32) for
// seconds. So the cost of a decode is predicted from the header before
// anything is decoded, a thumbnail whose cost is over maxDrawCost is not
// drawn, and drawing waits for its cost to fit in drawBudget, shared by
// the whole process.
const (
	// maxDrawCost is the most memory one thumbnail may take to draw. It
	// admits a 3840×2160 screenshot or photo as 8-bit PNG (34 MiB) or
	// JPEG (baseline 4:2:0: 15 MiB; progressive 4:2:0: 62 MiB); past
	// it are 16-bit or interlaced RGBA PNGs over 8 Mpx, and progressive
	// JPEGs over 8.5 Mpx (4:2:0) or 4.3 Mpx (4:4:4).
	maxDrawCost = 64 << 20
	// drawBudget is the most that all the thumbnails being drawn at once
	// may take, process-wide. It is one largest decode: a garbage
	// collector lets the heap grow to about twice what was live at its
	// last cycle, so with the decoded images garbage after their turn,
	// any number of concurrent images add at most about 2×64 MiB to the
	// heap (TestHostileImagesRSS measures the real binary).
	drawBudget = maxDrawCost
	// drawFixed and drawPerPixel are what drawing takes beside the
	// decoded image: the encoders' state, and for each pixel of the
	// thumbnail its RGBA, a buffer as large for its encoding and the
	// copy kept (measured by TestDrawCostCovers).
	drawFixed    = 1 << 20
	drawPerPixel = 12
)

// errUnpredictable is returned by drawCost for a format whose decoding
// cost it cannot tell: such an image is not drawn.
var errUnpredictable = errors.New("no cost model for this format")

// drawCost predicts the bytes that decoding img (an image in format, as
// image.DecodeConfig named it) and drawing its thumbnail (of maxSide
// pixels at most) will allocate, from its header alone. It errs when the
// header is unreadable or the format unknown.
func drawCost(img *io.SectionReader, format string, maxSide int) (int64, error) {
	decoded, w, h, err := decodeCost(img, format)
	if err != nil || decoded > maxDrawCost {
		return decoded, err // the thumbnail's part changes nothing
	}
	tw, th := thumbSize(w, h, maxSide)
	return decoded + drawFixed + drawPerPixel*int64(tw)*int64(th), nil
}

// decodeCost predicts the bytes that format's decoder allocates to decode
// img, and the image's size, from its header. It reads img as far as the
// header goes, readBufSize bytes at a time.
func decodeCost(img *io.SectionReader, format string) (cost int64, w, h int, err error) {
	switch format {
	case "png":
		p, err := parsePNG(from(img))
		return p.cost(), int(p.width), int(p.height), err
	case "jpeg":
		f, err := parseJPEG(from(img))
		return f.cost(), int(f.width), int(f.height), err
	case "gif":
		// The first frame (the one decoded) lies within the logical
		// screen, one byte a pixel, copied once more to undo interlacing.
		var b [10]byte
		if _, err := img.ReadAt(b[:], 0); err != nil {
			return 0, 0, 0, errShortHeader
		}
		w, h := int(binary.LittleEndian.Uint16(b[6:])), int(binary.LittleEndian.Uint16(b[8:]))
		return 2 * int64(w) * int64(h), w, h, nil
	}
	return 0, 0, 0, fmt.Errorf("%s: %w", format, errUnpredictable)
}

var (
	errShortHeader = errors.New("image header cut short")
	errBadHeader   = errors.New("malformed image header")
)

// pngHead is what a PNG's chunks before its pixel data say of its
// decoding.
type pngHead struct {
	width, height int64
	depth, color  byte
	interlaced    bool
	transparent   bool // a tRNS chunk: gray and truecolor decode as NRGBA
}

// parsePNG reads a PNG's IHDR and walks its chunks to the first IDAT (or
// the end of r), as image/png does, without checking their CRCs. It reads
// the chunks' headers, and passes their data.
func parsePNG(r *bufio.Reader) (pngHead, error) {
	var h pngHead
	const sig = "\x89PNG\r\n\x1a\n"
	var b [len(sig) + 8 + 13]byte
	if _, err := io.ReadFull(r, b[:]); err != nil || string(b[:len(sig)]) != sig || string(b[12:16]) != "IHDR" {
		return h, errShortHeader
	}
	if binary.BigEndian.Uint32(b[8:]) != 13 {
		return h, errBadHeader
	}
	ihdr := b[16:29]
	h.width, h.height = int64(binary.BigEndian.Uint32(ihdr)), int64(binary.BigEndian.Uint32(ihdr[4:]))
	h.depth, h.color, h.interlaced = ihdr[8], ihdr[9], ihdr[12] != 0
	if h.width > 0x7fffffff || h.height > 0x7fffffff {
		return h, errBadHeader
	}
	// image/png takes a tRNS chunk only before the first IDAT. A chunk
	// cut short by the end of r is one the decoder fails on too.
	var c [8]byte
	for skip(r, 4) && readFull(r, c[:]) { // the CRC before, then a chunk's length and type
		n, typ := int64(binary.BigEndian.Uint32(c[:])), string(c[4:])
		if typ == "IDAT" {
			break
		}
		if typ == "tRNS" {
			h.transparent = true
		}
		if !skip(r, n) {
			break
		}
	}
	return h, nil
}

// readFull reads len(p) bytes of r into p, false if r has fewer.
func readFull(r io.Reader, p []byte) bool {
	_, err := io.ReadFull(r, p)
	return err == nil
}

// skip passes n bytes of r, false if r has fewer.
func skip(r *bufio.Reader, n int64) bool {
	_, err := io.CopyN(io.Discard, r, n)
	return err == nil
}

// cost is what image/png allocates to decode the image: the image, of the
// type its color type and depth decode to, and as much again for the
// seven passes of an interlaced image; and two rows of filtered bytes.
func (h pngHead) cost() int64 {
	if h.width*h.height > 1<<40 { // (each is under 2³¹)
		return 1 << 44 // more than any bound, without overflowing
	}
	var px int64 // bytes a pixel
	switch {
	case h.color == 3: // paletted
		px = 1
	case h.color == 0 && h.depth == 16: // gray: Gray16, or NRGBA64 with tRNS
		px = 2
		if h.transparent {
			px = 8
		}
	case h.color == 0: // Gray, or NRGBA with tRNS
		px = 1
		if h.transparent {
			px = 4
		}
	case h.depth == 16: // RGBA64 or NRGBA64
		px = 8
	default: // RGBA or NRGBA
		px = 4
	}
	c := h.width * h.height * px
	if h.interlaced {
		c *= 2
	}
	return c + 2*(1+8*h.width)
}

// jpegFrame is what a JPEG's markers before its first scan say of its
// decoding.
type jpegFrame struct {
	width, height int64
	progressive   bool
	// h and v are each component's sampling factors.
	h, v []int64
	// rgb says the decoder may convert the image to RGBA at its end (an
	// Adobe transform of 0, components named R, G, B).
	rgb bool
}

// parseJPEG walks a JPEG's markers as image/jpeg does, up to the first
// SOS, and reads its frame header (SOF0, SOF1 or SOF2). It holds the
// frame header and Adobe segments, and passes the others.
func parseJPEG(r *bufio.Reader) (jpegFrame, error) {
	var f jpegFrame
	var b [2]byte
	if !readFull(r, b[:]) || b[0] != 0xff || b[1] != 0xd8 {
		return f, errBadHeader
	}
	var ids []byte
	sof, adobeRGB := false, false
	seg := make([]byte, 0, 64)
	for {
		marker, n, err := nextSegment(r, &b)
		if err != nil {
			return f, err
		}
		switch marker {
		case 0xc0, 0xc1, 0xc2, 0xee: // read below
		default:
			if !skip(r, int64(n)) {
				return f, errShortHeader
			}
			if marker == 0xda { // SOS: pixel data follows
				if !sof {
					return f, errBadHeader
				}
				// An Adobe segment may follow between scans, where this
				// walk does not go; 0xff 0xee appears in scan data only
				// as that marker, so its bytes anywhere after count as
				// one.
				f.rgb = adobeRGB || string(ids) == "RGB" || hasAdobeMarker(r)
				return f, nil
			}
			continue
		}
		seg = slices.Grow(seg[:0], n)[:n]
		if !readFull(r, seg) {
			return f, errShortHeader
		}
		if marker == 0xee { // APP14: the last Adobe segment's transform counts
			adobeRGB = adobeTransform(seg, adobeRGB)
			continue
		}
		if sof {
			return f, errBadHeader // image/jpeg refuses a second frame
		}
		sof = true
		if ids, err = f.readSOF(seg, marker, ids); err != nil {
			return f, err
		}
	}
}

// adobeTransform reads an APP14 segment: whether an Adobe segment's
// transform (0) says the components are RGB; was if seg is not one.
func adobeTransform(seg []byte, was bool) bool {
	if len(seg) >= 12 && string(seg[:5]) == "Adobe" {
		return seg[11] == 0
	}
	return was
}

// nextSegment reads up to the next segment that has a length, and
// returns its marker and the length of its data. Bytes that are not a
// marker are skipped, as image/jpeg (and libjpeg) skip them, and so are
// fill bytes and the markers without a length (RSTn). b is scratch space,
// the caller's so that it is not allocated per segment.
func nextSegment(r *bufio.Reader, b *[2]byte) (marker byte, n int, err error) {
	for {
		if !readFull(r, b[:]) {
			return 0, 0, errShortHeader
		}
		c0 := b[0]
		marker = b[1]
		for c0 != 0xff {
			c, err := r.ReadByte()
			if err != nil {
				return 0, 0, errShortHeader
			}
			c0, marker = marker, c
		}
		if marker == 0 {
			continue
		}
		for marker == 0xff {
			c, err := r.ReadByte()
			if err != nil {
				return 0, 0, errShortHeader
			}
			marker = c
		}
		if marker == 0xd9 { // EOI before any scan
			return 0, 0, errBadHeader
		}
		if 0xd0 <= marker && marker <= 0xd7 { // RSTn: no length
			continue
		}
		if !readFull(r, b[:]) {
			return 0, 0, errShortHeader
		}
		if n = int(binary.BigEndian.Uint16(b[:])) - 2; n < 0 {
			return 0, 0, errBadHeader
		}
		return marker, n, nil
	}
}

// readSOF reads a frame header's segment (SOF0, SOF1, SOF2, whose marker
// is marker) into f: the image's size, whether it is progressive, and
// each component's sampling factors. It appends the components' ids to
// ids, and refuses what image/jpeg refuses.
func (f *jpegFrame) readSOF(seg []byte, marker byte, ids []byte) ([]byte, error) {
	if len(seg) < 6 || seg[0] != 8 {
		return ids, errBadHeader
	}
	nc := int(seg[5])
	if nc != 1 && nc != 3 && nc != 4 || len(seg) != 6+3*nc {
		return ids, errBadHeader
	}
	f.height, f.width = int64(binary.BigEndian.Uint16(seg[1:])), int64(binary.BigEndian.Uint16(seg[3:]))
	f.progressive = marker == 0xc2
	for c := range nc {
		id, hv := seg[6+3*c], seg[7+3*c]
		h, v := int64(hv>>4), int64(hv&0x0f)
		if h < 1 || h > 4 || v < 1 || v > 4 {
			return ids, errBadHeader
		}
		if nc == 1 { // one component is never subsampled
			h, v = 1, 1
		}
		ids = append(ids, id)
		f.h, f.v = append(f.h, h), append(f.v, v)
	}
	return ids, nil
}

// hasAdobeMarker reports whether the rest of r holds the bytes 0xff 0xee.
func hasAdobeMarker(r *bufio.Reader) bool {
	for {
		_, err := r.ReadSlice(0xff)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // no 0xff in a whole buffer
		}
		if err != nil {
			return false
		}
		if next, err := r.Peek(1); err == nil && next[0] == 0xee {
			return true
		} else if err != nil {
			return false
		}
	}
}

// cost is what image/jpeg allocates to decode the frame: every
// component's samples (one byte each) over whole MCUs, for a progressive
// image every component's DCT coefficients (64 int32s a block of 8×8
// samples), and the RGBA or CMYK copy it makes of an RGB or four-component
// image at the end.
func (f jpegFrame) cost() int64 {
	if len(f.h) == 0 {
		return 0
	}
	mxx := (f.width + 8*f.h[0] - 1) / (8 * f.h[0])
	myy := (f.height + 8*f.v[0] - 1) / (8 * f.v[0])
	var blocks int64
	for c := range f.h {
		blocks += mxx * myy * f.h[c] * f.v[c]
	}
	cost := 64 * blocks
	if f.progressive {
		cost += 256 * blocks
	}
	if len(f.h) == 4 || len(f.h) == 3 && f.rgb {
		cost += 4 * f.width * f.height
	}
	return cost
}

// drawGate bounds the bytes held by the decodes under way, process-wide.
var drawGate = newGate(drawBudget)

// gate is a weighted semaphore: acquire waits, first come first served,
// until n more bytes fit under the size (a large decode is not passed
// over forever by small ones). It is safe for concurrent use.
type gate struct {
	mu      sync.Mutex
	size    int64
	held    int64
	peak    int64     // the most held at once, for tests
	waiters list.List // of *gateWaiter, in arrival order
}

type gateWaiter struct {
	n     int64
	ready chan struct{} // closed once n is granted
}

func newGate(size int64) *gate { return &gate{size: size} }

// acquire takes n bytes (at most the gate's size), waiting for them only
// as long as ctx lasts; on ctx's end it takes nothing and returns
// ctx.Err().
func (g *gate) acquire(ctx context.Context, n int64) error {
	n = min(n, g.size)
	g.mu.Lock()
	if g.waiters.Len() == 0 && g.held+n <= g.size {
		g.take(n)
		g.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		g.mu.Unlock()
		return err
	}
	w := &gateWaiter{n: n, ready: make(chan struct{})}
	e := g.waiters.PushBack(w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: give it back
		g.held -= n
	default:
		g.waiters.Remove(e)
	}
	g.grant() // those behind may fit now
	return ctx.Err()
}

// release gives back n bytes that acquire took.
func (g *gate) release(n int64) {
	g.mu.Lock()
	g.held -= min(n, g.size)
	g.grant()
	g.mu.Unlock()
}

// grant hands bytes to the waiters in order, as long as the first fits.
// g.mu is held.
func (g *gate) grant() {
	for e := g.waiters.Front(); e != nil; e = g.waiters.Front() {
		w := e.Value.(*gateWaiter)
		if g.held+w.n > g.size {
			return
		}
		g.take(w.n)
		g.waiters.Remove(e)
		close(w.ready)
	}
}

func (g *gate) take(n int64) {
	g.held += n
	g.peak = max(g.peak, g.held)
}

// ctxReader fails every read once ctx is done, so that a decoder stops at
// its next read when nobody waits for its thumbnail any more.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// decodeAs decodes img with the decoder of format, the one drawCost
// predicted, reading through ctx, readBufSize bytes at a time (drawFixed
// counts them).
func decodeAs(ctx context.Context, img *io.SectionReader, format string) (image.Image, error) {
	dec, ok := decoders[format]
	if !ok {
		return nil, fmt.Errorf("%s: %w", format, errUnpredictable)
	}
	return dec(ctxReader{ctx, from(img)})
}
