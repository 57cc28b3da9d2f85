package preview

import (
	"bytes"
	"cmp"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/preview/previewtest"
)

// rawPNG writes a w×h PNG of a color type and depth whose pixels are all
// zero bytes, interlaced (Adam7) or not, with a tRNS chunk or not: the
// shapes image/png's encoder never writes.
func rawPNG(w, h int, colorType, depth byte, interlaced, trns bool) []byte {
	chunk := func(b []byte, typ string, data []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		start := len(b)
		b = append(append(b, typ...), data...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
	}
	channels := map[byte]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colorType]
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, depth, colorType, 0, 0, 0)
	if interlaced {
		ihdr[12] = 1
	}
	b := chunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", ihdr)
	if colorType == 3 {
		b = chunk(b, "PLTE", []byte{0, 0, 0, 255, 255, 255})
	}
	if trns {
		b = chunk(b, "tRNS", make([]byte, 2*channels))
	}
	// Each pass (the whole image when not interlaced) is its rows, each
	// a filter byte and its pixels.
	passes := [][4]int{{0, 0, 1, 1}}
	if interlaced {
		passes = [][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}}
	}
	var raw bytes.Buffer
	zw := zlib.NewWriter(&raw)
	for _, p := range passes {
		pw, ph := (w-p[0]+p[2]-1)/p[2], (h-p[1]+p[3]-1)/p[3]
		if pw <= 0 || ph <= 0 {
			continue
		}
		row := make([]byte, 1+(pw*channels*int(depth)+7)/8)
		for range ph {
			zw.Write(row)
		}
	}
	zw.Close()
	b = chunk(b, "IDAT", raw.Bytes())
	return chunk(b, "IEND", nil)
}

func encodePNG(img image.Image) []byte {
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

func encodeJPEG(img image.Image) []byte {
	var b bytes.Buffer
	jpeg.Encode(&b, img, &jpeg.Options{Quality: 80})
	return b.Bytes()
}

// withAdobeRGB puts an Adobe segment saying "RGB" (transform 0) into a
// JPEG after its first marker segment, or before its end: image/jpeg then
// converts the image to RGBA.
func withAdobeRGB(jpg []byte, atEnd bool) []byte {
	seg := []byte{0xff, 0xee, 0, 14, 'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 0}
	at := 2
	if atEnd {
		at = len(jpg) - 2
	}
	return append(append(append([]byte(nil), jpg[:at]...), seg...), jpg[at:]...)
}

// gradient is a w×h picture with some detail, as an RGBA.
func gradient(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	return img
}

// costImages are an image of every type the decoders return, and every
// header feature that changes what decoding takes.
func costImages() []struct {
	name string
	data []byte
	side int // the thumbnail's; 0 means DefaultThumbMax
} {
	gray := image.NewGray(image.Rect(0, 0, 800, 600))
	for i := range gray.Pix {
		gray.Pix[i] = uint8(i)
	}
	pal := image.NewPaletted(image.Rect(0, 0, 800, 600), palette.Plan9)
	for i := range pal.Pix {
		pal.Pix[i] = uint8(i / 7)
	}
	var g bytes.Buffer
	gif.Encode(&g, pal, nil)
	interlacedGIF := g.Bytes()
	interlacedGIF[bytes.IndexByte(interlacedGIF[13+768:], 0x2c)+13+768+9] |= 0x40
	photo := encodeJPEG(gradient(1600, 1200))
	noise := image.NewGray(image.Rect(0, 0, 1300, 1000))
	rnd := rand.New(rand.NewPCG(7, 8))
	for i := range noise.Pix {
		noise.Pix[i] = uint8(rnd.Uint32())
	}
	return []struct {
		name string
		data []byte
		side int
	}{
		{"PNG screenshot 1920×1080", genScreenshot(rand.New(rand.NewPCG(1, 2))), 0},
		{"PNG NRGBA", encodePNG(image.NewNRGBA(image.Rect(0, 0, 900, 700))), 0},
		{"PNG gray", encodePNG(gray), 0},
		{"PNG paletted", encodePNG(pal), 0},
		{"PNG gray+tRNS, interlaced", rawPNG(800, 600, 0, 8, true, true), 0},
		{"PNG gray16+tRNS", rawPNG(800, 600, 0, 16, false, true), 0},
		{"PNG gray16", rawPNG(800, 600, 0, 16, false, false), 0},
		{"PNG RGB+tRNS", rawPNG(800, 600, 2, 8, false, true), 0},
		{"PNG RGBA16, interlaced", rawPNG(800, 600, 6, 16, true, false), 0},
		{"PNG RGB16", rawPNG(800, 600, 2, 16, false, false), 0},
		{"PNG gray+alpha", rawPNG(800, 600, 4, 8, false, false), 0},
		{"PNG 1-bit gray, interlaced", rawPNG(801, 603, 0, 1, true, false), 0},
		{"GIF", g.Bytes(), 0},
		{"GIF interlaced", interlacedGIF, 0},
		{"JPEG 4:2:0", photo, 0},
		{"JPEG RGB (Adobe)", withAdobeRGB(photo, false), 0},
		{"JPEG gray", encodeJPEG(gray), 0},
		{"JPEG progressive 4:2:0 3840×2160", previewtest.ProgressiveJPEG(3840, 2160, 0x22, 0x11, 0x11), 0},
		{"JPEG progressive 4:4:4", previewtest.ProgressiveJPEG(1001, 799, 0x11, 0x11, 0x11), 0},
		{"JPEG progressive 4:2:2, RGB after its scan", withAdobeRGB(previewtest.ProgressiveJPEG(1001, 799, 0x21, 0x11, 0x11), true), 0},
		{"JPEG progressive 4:1:1", previewtest.ProgressiveJPEG(1001, 799, 0x41, 0x11, 0x11), 0},
		{"JPEG progressive gray", previewtest.ProgressiveJPEG(1001, 799, 0x11), 0},
		{"JPEG progressive CMYK", previewtest.ProgressiveJPEG(1001, 799, 0x22, 0x11, 0x11, 0x22), 0},
		{"JPEG gray noise, 1200 px thumbnail", encodeJPEG(noise), 1200},
		{"PNG gray noise, 1200 px thumbnail", encodePNG(noise), 1200},
	}
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// TestDrawCostCovers: for every kind of image, what drawCost predicts
// from the header is at least what decoding and drawing allocate (so the
// bounds hold), and not much more (so ordinary images are not refused).
func TestDrawCostCovers(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine, and a minute of decoding under the race detector")
	}
	for _, c := range costImages() {
		_, format, err := image.DecodeConfig(bytes.NewReader(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		side := cmp.Or(c.side, DefaultThumbMax)
		cost, err := drawCost(inMemory(c.data), format, side)
		if err != nil {
			t.Fatalf("%s: drawCost: %v", c.name, err)
		}
		var th *Image
		alloc := allocated(func() { th, err = thumbnail(t.Context(), inMemory(c.data), format, side) })
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%-45s predicted %6.2f MiB, allocated %6.2f MiB (thumbnail %d×%d)", c.name, float64(cost)/(1<<20), float64(alloc)/(1<<20), th.Width, th.Height)
		if alloc > uint64(cost) {
			t.Errorf("%s: allocated %d bytes, over the %d predicted", c.name, alloc, cost)
		}
		if cost > 2*int64(alloc)+drawFixed {
			t.Errorf("%s: predicted %d bytes, over twice the %d allocated", c.name, cost, alloc)
		}
	}
}

// TestHostileJPEGNotDecoded is issue 38's image: 127 KiB of progressive
// JPEG declaring 5400×4100 px of 4:4:4, which image/jpeg decodes in 317
// MiB and seconds of CPU. Its header is read, its dimensions stated, and
// nothing decoded.
func TestHostileJPEGNotDecoded(t *testing.T) {
	data := previewtest.ProgressiveJPEG(5400, 4100, 0x11, 0x11, 0x11)
	var pv Preview
	alloc := allocated(func() { pv = previewOf(Options{Thumbnail: true}, data) })
	t.Logf("%d bytes of JPEG: %.1f MiB allocated; %q", len(data), float64(alloc)/(1<<20), pv.Text)
	if alloc > 4<<20 {
		t.Errorf("previewing it allocated %.1f MiB, want under 4 (its header alone)", float64(alloc)/(1<<20))
	}
	want := "JPEG image, 5400×4100 px, 126.9 KiB. Too many pixels to thumbnail: drawing it would take 317.0 MiB, over the 64.0 MiB bound."
	if pv.Thumbnail != nil || pv.Text != want || pv.Facts.Width != 5400 || pv.Facts.Height != 4100 {
		t.Errorf("got %q (thumbnail %v), want %q", pv.Text, pv.Thumbnail != nil, want)
	}
}

// TestScreenSizesThumbnailed: screenshots and photos of 1920×1080 and
// 3840×2160, as PNG and as baseline and progressive JPEG, still get their
// thumbnails under the bounds.
func TestScreenSizesThumbnailed(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine, and a minute of decoding under the race detector")
	}
	for _, size := range [][2]int{{1920, 1080}, {3840, 2160}} {
		img := image.NewRGBA(image.Rect(0, 0, size[0], size[1]))
		draw.Draw(img, img.Rect, image.NewUniform(color.Gray{0x80}), image.Point{}, draw.Src) // quick to encode
		for _, c := range []struct {
			name string
			data []byte
		}{
			{"PNG", encodePNG(img)},
			{"JPEG", encodeJPEG(img)},
			{"progressive JPEG", previewtest.ProgressiveJPEG(size[0], size[1], 0x22, 0x11, 0x11)},
		} {
			pv := previewOf(Options{Thumbnail: true}, c.data)
			if pv.Thumbnail == nil || pv.Thumbnail.Width != DefaultThumbMax {
				t.Errorf("%d×%d %s: %q", size[0], size[1], c.name, pv.Text)
			}
		}
	}
}

// waiting counts the acquires that wait.
func (g *gate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiters.Len()
}

// holding is what the gate has given and not had back.
func (g *gate) holding() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// waitFor fails t unless cond holds within 10 s: a deadline for "never".
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
	}
}

// TestGateOrder: a gate grants in arrival order, so a large acquire is
// not passed over by smaller ones that would fit; one that stops waiting
// lets those behind it go.
func TestGateOrder(t *testing.T) {
	g := newGate(100)
	if err := g.acquire(t.Context(), 50); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	got := func(name string) {
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
	}
	done := make(chan struct{}, 3)
	enter := func(ctx context.Context, name string, n int64, queued int) {
		go func() {
			if err := g.acquire(ctx, n); err == nil {
				got(name)
			}
			done <- struct{}{}
		}()
		waitFor(t, name+" waits", func() bool { return g.waiting() == queued })
	}
	quit, leave := context.WithCancel(t.Context())
	enter(t.Context(), "large", 100, 1)
	enter(quit, "leaves", 10, 2)
	enter(t.Context(), "small", 25, 3)
	leave()
	<-done
	if g.waiting() != 2 || len(order) != 0 {
		t.Fatalf("after one left: %d waiting, granted %v; want 2 and none (the large is first)", g.waiting(), order)
	}
	g.release(50)
	<-done
	if g.holding() != 100 || fmt.Sprint(order) != "[large]" {
		t.Fatalf("holding %d, granted %v; want 100 and the large", g.holding(), order)
	}
	g.release(100)
	<-done
	if g.holding() != 25 || fmt.Sprint(order) != "[large small]" {
		t.Fatalf("holding %d, granted %v", g.holding(), order)
	}
	g.release(25)
	if g.holding() != 0 || g.peak != 100 {
		t.Errorf("holding %d, peak %d", g.holding(), g.peak)
	}
}

// TestGateBound: however many acquire at once, what is held never
// passes the size, and each gets its turn.
func TestGateBound(t *testing.T) {
	g := newGate(64)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			n := int64(1 + i%64)
			if err := g.acquire(t.Context(), n); err != nil {
				t.Error(err)
				return
			}
			runtime.Gosched()
			g.release(n)
		})
	}
	wg.Wait()
	if g.peak > 64 || g.holding() != 0 || g.waiting() != 0 {
		t.Errorf("peak %d, holding %d, %d waiting; want ≤ 64, 0, 0", g.peak, g.holding(), g.waiting())
	}
}

// TestThumbnailsShareTheBudget: previews drawn at once never hold more
// than drawBudget between them, and all get their thumbnails.
func TestThumbnailsShareTheBudget(t *testing.T) {
	big, small := 3840, 1920 // 62 MiB to draw, one at a time; and 33 MiB (4:4:4)
	if raceEnabled {
		big, small = 1280, 640 // the race detector decodes ten times slower
	}
	img := previewtest.ProgressiveJPEG(big, big*9/16, 0x22, 0x11, 0x11)
	shot := previewtest.ProgressiveJPEG(small, small*9/16, 0x11, 0x11, 0x11)
	largest, _ := drawCost(inMemory(img), "jpeg", DefaultThumbMax)
	drawGate.mu.Lock()
	drawGate.peak = drawGate.held
	drawGate.mu.Unlock()
	var wg sync.WaitGroup
	var missing sync.Map
	for i := range 6 {
		wg.Go(func() {
			data := shot
			if i%3 == 0 {
				data = img
			}
			if pv := previewOf(Options{Thumbnail: true}, data); pv.Thumbnail == nil {
				missing.Store(i, pv.Text)
			}
		})
	}
	wg.Wait()
	missing.Range(func(k, v any) bool { t.Errorf("preview %v: no thumbnail: %q", k, v); return true })
	drawGate.mu.Lock()
	peak := drawGate.peak
	drawGate.mu.Unlock()
	t.Logf("peak held %.1f MiB", float64(peak)/(1<<20))
	if peak < largest || peak > drawBudget {
		t.Errorf("held %d bytes at once; want the largest image's at least, and at most the %d budget", peak, drawBudget)
	}
}

// TestThumbnailWaitsWithinContext: a thumbnail waits for its turn only
// as long as its context lasts, then gives up, holding nothing, and its
// preview says so; once the turn is free, it is drawn.
func TestThumbnailWaitsWithinContext(t *testing.T) {
	if err := drawGate.acquire(t.Context(), drawBudget); err != nil { // every byte, as other decodes would
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			drawGate.release(drawBudget)
		}
	}()
	shot := genScreenshot(rand.New(rand.NewPCG(1, 2)))
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan Preview)
	go func() {
		b := New(Options{Thumbnail: true})
		b.Write(shot)
		got <- b.PreviewContext(ctx)
	}()
	waitFor(t, "waited for its turn", func() bool { return drawGate.waiting() == 1 })
	cancel()
	pv := <-got
	if pv.Thumbnail != nil || !strings.HasSuffix(pv.Text, "1920×1080 px, "+humanSize(int64(len(shot)))+". Not thumbnailed: its caller stopped waiting first.") {
		t.Errorf("preview after its context ended: %q", pv.Text)
	}
	if drawGate.waiting() != 0 || drawGate.holding() != drawBudget {
		t.Errorf("%d waiting, %d held; want 0 and only the test's", drawGate.waiting(), drawGate.holding())
	}
	drawGate.release(drawBudget)
	released = true
	if pv := previewOf(Options{Thumbnail: true}, shot); pv.Thumbnail == nil {
		t.Errorf("no thumbnail with the budget free: %q", pv.Text)
	}
}

// endingCtx is a context whose Err turns to Canceled after n calls: a
// client that leaves at a chosen point of the work. It counts the calls.
type endingCtx struct {
	context.Context
	n, calls int
}

func (c *endingCtx) Err() error {
	if c.calls++; c.calls > c.n {
		return context.Canceled
	}
	return nil
}

// TestDecodeStopsWhenContextEnds: once its context ends, a decode stops
// at its next read and a drawing at its next row (each asks Err once).
func TestDecodeStopsWhenContextEnds(t *testing.T) {
	photo := encodeJPEG(gradient(1920, 1080))
	for _, n := range []int{0, 1, 5} {
		c := &endingCtx{Context: t.Context(), n: n}
		if _, err := thumbnail(c, inMemory(photo), "jpeg", DefaultThumbMax); !errors.Is(err, context.Canceled) || c.calls != n+1 {
			t.Errorf("decoding, ended after %d reads: %v after %d reads; want Canceled after %d", n, err, c.calls, n+1)
		}
	}
	c := &endingCtx{Context: t.Context(), n: 10}
	if _, err := downscale(c, gradient(1000, 1000), 100, 100); !errors.Is(err, context.Canceled) || c.calls != 11 {
		t.Errorf("drawing, ended after 10 rows: %v after %d rows", err, c.calls)
	}
}

// FuzzDrawCost: the header parsers take any bytes; where a decoder takes
// them too, the parsers read the dimensions it does, and the predicted
// cost covers the pixels it decoded.
func FuzzDrawCost(f *testing.F) {
	var g bytes.Buffer
	gif.Encode(&g, image.NewPaletted(image.Rect(0, 0, 5, 5), palette.Plan9), nil)
	f.Add(g.Bytes())
	f.Add(rawPNG(9, 7, 0, 8, true, true))
	f.Add(rawPNG(9, 7, 2, 16, false, true))
	f.Add(rawPNG(9, 7, 4, 8, false, false))
	f.Add(encodeJPEG(image.NewGray(image.Rect(0, 0, 20, 10))))
	f.Add(withAdobeRGB(encodeJPEG(gradient(16, 16)), false))
	f.Add(previewtest.ProgressiveJPEG(40, 30, 0x22, 0x11, 0x11))
	f.Add(previewtest.ProgressiveJPEG(40, 30, 0x11))
	f.Add(previewtest.ProgressiveJPEG(17, 9, 0x22, 0x11, 0x11, 0x22))
	f.Add(withAdobeRGB(previewtest.ProgressiveJPEG(20, 20, 0x11, 0x11, 0x11), true))
	f.Add(encodeJPEG(gradient(40, 30)))
	f.Add(rawPNG(9, 7, 0, 16, true, true))
	f.Add(rawPNG(9, 7, 3, 8, false, true))
	f.Add(rawPNG(9, 7, 6, 8, true, false))
	f.Add(encodePNG(image.NewPaletted(image.Rect(0, 0, 5, 5), palette.WebSafe)))
	f.Add([]byte("\xff\xd8\xff\xc2\x00\x11\x08\xff\xff\xff\xff\x03\x01\x11\x00\x02\x11\x00\x03\x11\x00\xff\xda"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []string{"png", "jpeg", "gif"} {
			if cost, _, _, err := decodeCost(inMemory(data), format); err == nil && cost < 0 {
				t.Fatalf("%s: cost %d", format, cost)
			}
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			return
		}
		cost, w, h, err := decodeCost(inMemory(data), format)
		if err != nil {
			return
		}
		if w != cfg.Width || h != cfg.Height {
			t.Fatalf("%s: %d×%d, DecodeConfig: %d×%d", format, w, h, cfg.Width, cfg.Height)
		}
		if cost > 1<<20 {
			return // the instrumented decoders are slow
		}
		img, err := decodeAs(t.Context(), inMemory(data), format)
		if err != nil {
			return
		}
		if n := pixBytes(img); n > cost {
			t.Fatalf("%s %T %v: %d bytes of pixels, over the %d predicted", format, img, img.Bounds(), n, cost)
		}
	})
}

// pixBytes is the size of a decoded image's pixel buffers.
func pixBytes(img image.Image) int64 {
	if m, ok := img.(*image.YCbCr); ok {
		return int64(len(m.Y) + len(m.Cb) + len(m.Cr))
	}
	return int64(len(pixOf(img)))
}
