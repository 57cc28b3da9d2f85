package preview

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"os"

	"github.com/spillway-dev/spillway/artifact/scratch"
)

// decoders are the formats a thumbnail is drawn of, each with a cost
// model in drawCost. (Importing them registers them with
// image.DecodeConfig too.)
var decoders = map[string]func(io.Reader) (image.Image, error){
	"png":  png.Decode,
	"jpeg": jpeg.Decode,
	"gif":  gif.Decode,
}

// thumbSoftMax is the size past which a PNG thumbnail is re-encoded as
// JPEG: a few tens of KB is what a thumbnail should cost.
const thumbSoftMax = 48 << 10

// imageAn reads an image's size from its header and, to draw a
// thumbnail, keeps the image up to maxImageBytes in a file (Options.
// TempDir) as it arrives, never in memory: an image of ordinary
// dimensions can carry tens of megabytes of metadata, and many arrive
// at once. The file is unlinked at once and closed at the end (or by
// Builder.Close, or when the Builder is collected).
type imageAn struct {
	format string
	o      Options
	head   []byte   // the first imageHeaderBytes, when no file keeps the image
	file   *os.File // the image, when a thumbnail may be drawn
	n      int64    // the bytes written to file
	over   bool     // it is past what is kept: the rest is not read
	err    error    // the file could not be made or written: no thumbnail
}

func (a *imageAn) write(p []byte) {
	if a.over {
		return
	}
	if a.file == nil && a.err == nil && a.o.Thumbnail && a.o.Size <= maxImageBytes {
		a.file, a.err = tempFile(a.o.TempDir)
	}
	if a.file == nil {
		// No thumbnail to draw (not asked for, the image known to be
		// too large for one, or no file to keep it in): the header is
		// all the size needs.
		keep := min(len(p), imageHeaderBytes-len(a.head))
		a.head = append(a.head, p[:keep]...)
		a.over = keep < len(p)
		return
	}
	if a.n+int64(len(p)) > maxImageBytes {
		a.over = true // what the file holds still gives the size
		return
	}
	n, err := a.file.Write(p)
	a.n += int64(n)
	if err != nil {
		a.over, a.err = true, err
	}
}

func (a *imageAn) sated() bool { return a.over }

// Close frees the file, if any, and takes nothing more.
func (a *imageAn) Close() error {
	if a.file != nil {
		a.file.Close()
		a.file, a.n = nil, 0
	}
	a.over = true
	return nil
}

// imageHeaderBytes is what an image keeps in memory when it is not drawn:
// enough for its size to be read (a JPEG's frame header may follow a
// large Exif block).
const imageHeaderBytes = 1 << 20

// tempFile returns a new file in dir ("": os.TempDir()), unlinked at
// once (scratch.CreateBestEffort): it is gone with its descriptor, even
// if the process dies.
func tempFile(dir string) (*os.File, error) {
	f, err := scratch.CreateBestEffort(dir, "thumb-*")
	if err != nil {
		return nil, fmt.Errorf("keep an image to thumbnail: %w", err)
	}
	return f, nil
}

// encoded returns the image as kept: the file's bytes, or the head.
func (a *imageAn) encoded() *io.SectionReader {
	if a.file != nil {
		return io.NewSectionReader(a.file, 0, a.n)
	}
	return inMemory(a.head)
}

// inMemory returns a reader of an image held in memory.
func inMemory(b []byte) *io.SectionReader {
	return io.NewSectionReader(bytes.NewReader(b), 0, int64(len(b)))
}

// readBufSize is what a reader of a kept image buffers: the file is read
// in steps this large, never whole.
const readBufSize = 32 << 10

// from returns a buffered reader of img from its first byte.
func from(img *io.SectionReader) *bufio.Reader {
	return bufio.NewReaderSize(io.NewSectionReader(img, 0, img.Size()), readBufSize)
}

func (a *imageAn) finish(pv *Preview) []section {
	return a.finishContext(context.Background(), pv)
}

// finishContext is finish with a context: it stops drawing the
// thumbnail when ctx ends.
func (a *imageAn) finishContext(ctx context.Context, pv *Preview) []section {
	defer a.Close()
	f := &pv.Facts
	f.Format = a.format
	img := a.encoded()
	cfg, format, err := image.DecodeConfig(from(img))
	if err != nil {
		// No decoder here for WebP: its header still gives the size.
		var b [30]byte
		n, _ := img.ReadAt(b[:], 0)
		if w, h, ok := webpSize(b[:n]); ok && a.format == "webp" {
			f.Width, f.Height = w, h
			return []section{{prioHead, fmt.Sprintf("WEBP image, %d×%d px, %s.", w, h, humanSize(f.Size))}}
		}
		return []section{{prioHead, fmt.Sprintf("%s image, %s; its size is unreadable.", upper(a.format), humanSize(f.Size))}}
	}
	f.Format, f.Width, f.Height = format, cfg.Width, cfg.Height
	s := fmt.Sprintf("%s image, %d×%d px, %s.", upper(format), cfg.Width, cfg.Height, humanSize(f.Size))
	if a.o.Thumbnail {
		s += a.draw(ctx, pv, img, format, cfg)
	}
	return []section{{prioHead, s}}
}

// draw draws the thumbnail into pv if it may, and returns the sentence
// that says what became of it.
func (a *imageAn) draw(ctx context.Context, pv *Preview, img *io.SectionReader, format string, cfg image.Config) string {
	switch {
	case a.err != nil:
		return " Not thumbnailed: there was no room to keep it on disk."
	case a.over:
		return fmt.Sprintf(" Too large to thumbnail (over %s).", humanSize(maxImageBytes))
	}
	cost, err := drawCost(img, format, a.o.ThumbMax)
	if err != nil {
		return "" // undecodable: the decoder would fail too
	}
	if cost > maxDrawCost {
		return fmt.Sprintf(" Too many pixels to thumbnail: drawing it would take %s, over the %s bound.",
			humanSize(cost), humanSize(maxDrawCost))
	}
	// The turn is waited for, like the drawing, only while the caller
	// waits (ctx): its client may have gone, or its patience run out.
	if err := drawGate.acquire(ctx, cost); err != nil {
		return " Not thumbnailed: its caller stopped waiting first."
	}
	defer drawGate.release(cost)
	th, err := thumbnail(ctx, img, format, a.o.ThumbMax)
	switch {
	case ctx.Err() != nil:
		return " Not thumbnailed: its caller stopped waiting first."
	case err != nil:
		return ""
	}
	pv.Thumbnail = th
	if th.Width != cfg.Width || th.Height != cfg.Height {
		return fmt.Sprintf(" A %d×%d thumbnail is attached.", th.Width, th.Height)
	}
	return " A copy is attached."
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// thumbnail decodes an image and shrinks it to fit maxSide, averaging the
// source pixels each thumbnail pixel covers. A small image is returned as
// it is. Photos become JPEG, others PNG unless that is large.
//
// It decodes with format's decoder, and stops with ctx's error at the
// decoder's next read, or between rows, once ctx is done.
func thumbnail(ctx context.Context, img *io.SectionReader, format string, maxSide int) (*Image, error) {
	src, err := decodeAs(ctx, img, format)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= maxSide && h <= maxSide && img.Size() <= thumbSoftMax && format != "gif" {
		data := make([]byte, img.Size())
		if _, err := img.ReadAt(data, 0); err != nil {
			return nil, fmt.Errorf("read back: %w", err)
		}
		return &Image{MimeType: "image/" + format, Data: data, Width: w, Height: h}, nil
	}
	tw, th := thumbSize(w, h, maxSide)
	dst, err := downscale(ctx, src, tw, th)
	if err != nil {
		return nil, err
	}
	// One buffer for both encodings, the size of the pixels, which an
	// encoding hardly ever passes: it does not grow by doubling, and
	// drawCost can count it. What is kept is a copy of the encoding.
	out := bytes.NewBuffer(make([]byte, 0, 4*tw*th+4<<10))
	if format != "jpeg" {
		if err := png.Encode(out, dst); err != nil {
			return nil, fmt.Errorf("encode png: %w", err)
		}
		if out.Len() <= thumbSoftMax {
			return &Image{MimeType: "image/png", Data: bytes.Clone(out.Bytes()), Width: tw, Height: th}, nil
		}
		out.Reset()
	}
	if err := jpeg.Encode(out, dst, &jpeg.Options{Quality: 80}); err != nil {
		return nil, fmt.Errorf("encode jpeg: %w", err)
	}
	return &Image{MimeType: "image/jpeg", Data: bytes.Clone(out.Bytes()), Width: tw, Height: th}, nil
}

// thumbSize is the size of a w×h image's thumbnail: its longest side cut
// to maxSide, keeping its shape.
func thumbSize(w, h, maxSide int) (tw, th int) {
	switch {
	case w >= h && w > maxSide:
		return maxSide, max(1, (h*maxSide+w/2)/w)
	case h > w && h > maxSide:
		return max(1, (w*maxSide+h/2)/h), maxSide
	}
	return w, h
}

// downscale averages the box of source pixels under each destination
// pixel (premultiplied, so transparent pixels do not darken edges), then
// lays the result on white, as a viewer would show it. It returns ctx's
// error if ctx ends first.
func downscale(ctx context.Context, src image.Image, tw, th int) (*image.RGBA, error) {
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	dst := image.NewRGBA(image.Rect(0, 0, tw, th))
	// Column boxes are the same for every row: compute them once.
	x0s := make([]int, tw+1)
	for x := 0; x <= tw; x++ {
		x0s[x] = x * w / tw
	}
	addRow := rowAdder(src, x0s)
	acc := make([][4]uint64, tw)
	for y := 0; y < th; y++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		y0, y1 := y*h/th, max((y+1)*h/th, y*h/th+1)
		clear(acc)
		for sy := y0; sy < y1; sy++ {
			addRow(acc, b.Min.Y+sy)
		}
		for x := 0; x < tw; x++ {
			n := uint64((y1 - y0) * (max(x0s[x+1], x0s[x]+1) - x0s[x]))
			r, g, bl, a := acc[x][0]/n, acc[x][1]/n, acc[x][2]/n, acc[x][3]/n
			white := 0xffff - a // premultiplied over white
			i := dst.PixOffset(x, y)
			dst.Pix[i+0] = uint8((r + white) >> 8)
			dst.Pix[i+1] = uint8((g + white) >> 8)
			dst.Pix[i+2] = uint8((bl + white) >> 8)
			dst.Pix[i+3] = 0xff
		}
	}
	return dst, nil
}

// rowAdder returns a function that adds source row y's premultiplied
// 16-bit channels to acc, the pixels of each column box (from x0s[x] to
// x0s[x+1], at least one) to acc[x]. Gray and paletted rows are summed
// from their bytes; other types through pixelReader.
func rowAdder(src image.Image, x0s []int) func(acc [][4]uint64, y int) {
	minX := src.Bounds().Min.X
	switch m := src.(type) {
	case *image.Gray:
		return grayRowAdder(m, minX, x0s)
	case *image.Paletted:
		return palettedRowAdder(m, minX, x0s)
	}
	at := pixelReader(src)
	return func(acc [][4]uint64, y int) {
		for x := range acc {
			for sx := x0s[x]; sx < max(x0s[x+1], x0s[x]+1); sx++ {
				r, g, b, a := at(minX+sx, y)
				acc[x][0] += uint64(r)
				acc[x][1] += uint64(g)
				acc[x][2] += uint64(b)
				acc[x][3] += uint64(a)
			}
		}
	}
}

// grayRowAdder is rowAdder for a gray image: a run of bytes summed once
// for the three channels.
func grayRowAdder(m *image.Gray, minX int, x0s []int) func(acc [][4]uint64, y int) {
	return func(acc [][4]uint64, y int) {
		row := m.Pix[m.PixOffset(minX, y):]
		for x := range acc {
			x0, x1 := x0s[x], max(x0s[x+1], x0s[x]+1)
			var s uint64
			for _, v := range row[x0:x1] {
				s += uint64(v)
			}
			s *= 0x101
			acc[x][0] += s
			acc[x][1] += s
			acc[x][2] += s
			acc[x][3] += uint64(x1-x0) * 0xffff
		}
	}
}

// palettedRowAdder is rowAdder for a paletted image: the palette's
// colors, premultiplied, are read once; an index past the palette
// (image/png allows it) reads as opaque black.
func palettedRowAdder(m *image.Paletted, minX int, x0s []int) func(acc [][4]uint64, y int) {
	var pal [256][4]uint64
	for i := range pal {
		pal[i][3] = 0xffff
		if i < len(m.Palette) && m.Palette[i] != nil {
			r, g, b, a := m.Palette[i].RGBA()
			pal[i] = [4]uint64{uint64(r), uint64(g), uint64(b), uint64(a)}
		}
	}
	return func(acc [][4]uint64, y int) {
		row := m.Pix[m.PixOffset(minX, y):]
		for x := range acc {
			x0, x1 := x0s[x], max(x0s[x+1], x0s[x]+1)
			var s [4]uint64
			for _, i := range row[x0:x1] {
				c := &pal[i]
				s[0], s[1], s[2], s[3] = s[0]+c[0], s[1]+c[1], s[2]+c[2], s[3]+c[3]
			}
			acc[x] = [4]uint64{acc[x][0] + s[0], acc[x][1] + s[1], acc[x][2] + s[2], acc[x][3] + s[3]}
		}
	}
}

// pixelReader returns a fast premultiplied 16-bit reader for the types
// the decoders return but Gray and Paletted (which rowAdder reads): PNG's
// RGBA, NRGBA, Gray16, RGBA64, NRGBA64; JPEG's YCbCr, RGBA, CMYK. For
// any other, it returns the generic reader, which boxes a color.Color
// for every pixel.
func pixelReader(src image.Image) func(x, y int) (r, g, b, a uint32) {
	switch m := src.(type) {
	case *image.RGBA:
		return func(x, y int) (uint32, uint32, uint32, uint32) {
			i := m.PixOffset(x, y)
			p := m.Pix[i : i+4 : i+4]
			return uint32(p[0]) * 0x101, uint32(p[1]) * 0x101, uint32(p[2]) * 0x101, uint32(p[3]) * 0x101
		}
	case *image.NRGBA:
		return func(x, y int) (uint32, uint32, uint32, uint32) {
			i := m.PixOffset(x, y)
			p := m.Pix[i : i+4 : i+4]
			a := uint32(p[3]) * 0x101
			return uint32(p[0]) * a / 0xff, uint32(p[1]) * a / 0xff, uint32(p[2]) * a / 0xff, a
		}
	case *image.YCbCr:
		return func(x, y int) (uint32, uint32, uint32, uint32) {
			yi, ci := m.YOffset(x, y), m.COffset(x, y)
			r, g, b := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			return uint32(r) * 0x101, uint32(g) * 0x101, uint32(b) * 0x101, 0xffff
		}
	case *image.CMYK:
		return func(x, y int) (uint32, uint32, uint32, uint32) {
			i := m.PixOffset(x, y)
			p := m.Pix[i : i+4 : i+4]
			r, g, b := color.CMYKToRGB(p[0], p[1], p[2], p[3])
			return uint32(r) * 0x101, uint32(g) * 0x101, uint32(b) * 0x101, 0xffff
		}
	}
	if at := pixelReader16(src); at != nil {
		return at
	}
	return func(x, y int) (uint32, uint32, uint32, uint32) { return src.At(x, y).RGBA() }
}

// pixelReader16 is pixelReader for the images of 16 bits a channel, nil
// for the others.
func pixelReader16(src image.Image) func(x, y int) (r, g, b, a uint32) {
	switch m := src.(type) {
	case *image.Gray16:
		return func(x, y int) (uint32, uint32, uint32, uint32) {
			i := m.PixOffset(x, y)
			v := uint32(m.Pix[i])<<8 | uint32(m.Pix[i+1])
			return v, v, v, 0xffff
		}
	case *image.RGBA64:
		return func(x, y int) (uint32, uint32, uint32, uint32) {
			i := m.PixOffset(x, y)
			p := m.Pix[i : i+8 : i+8]
			return uint32(p[0])<<8 | uint32(p[1]), uint32(p[2])<<8 | uint32(p[3]),
				uint32(p[4])<<8 | uint32(p[5]), uint32(p[6])<<8 | uint32(p[7])
		}
	case *image.NRGBA64:
		return func(x, y int) (uint32, uint32, uint32, uint32) {
			i := m.PixOffset(x, y)
			p := m.Pix[i : i+8 : i+8]
			a := uint32(p[6])<<8 | uint32(p[7])
			r, g, b := uint32(p[0])<<8|uint32(p[1]), uint32(p[2])<<8|uint32(p[3]), uint32(p[4])<<8|uint32(p[5])
			return r * a / 0xffff, g * a / 0xffff, b * a / 0xffff, a
		}
	}
	return nil
}

// webpSize reads a WebP's dimensions from its first chunk: VP8X (the
// canvas), VP8L (lossless) or VP8 (lossy).
func webpSize(b []byte) (w, h int, ok bool) {
	if len(b) < 30 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return 0, 0, false
	}
	switch string(b[12:16]) {
	case "VP8X":
		w = 1 + (int(b[24]) | int(b[25])<<8 | int(b[26])<<16)
		h = 1 + (int(b[27]) | int(b[28])<<8 | int(b[29])<<16)
		return w, h, true
	case "VP8L":
		if b[20] != 0x2f {
			return 0, 0, false
		}
		v := binary.LittleEndian.Uint32(b[21:25])
		return 1 + int(v&0x3fff), 1 + int(v>>14&0x3fff), true
	case "VP8 ":
		if b[23] != 0x9d || b[24] != 0x01 || b[25] != 0x2a {
			return 0, 0, false
		}
		return int(binary.LittleEndian.Uint16(b[26:28]) & 0x3fff), int(binary.LittleEndian.Uint16(b[28:30]) & 0x3fff), true
	}
	return 0, 0, false
}
