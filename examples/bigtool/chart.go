package bigtool

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
)

// ChartOptions shape the PNG that Chart draws. The zero value draws the
// default chart: 1280×800 pixels, 12 bars, grain 4 (about 1.5 MB).
type ChartOptions struct {
	Seed   int64
	Width  int // pixels, default 1280
	Height int // pixels, default 800
	Bars   int // default 12
	// Grain is the amplitude of the per-pixel noise laid over the picture,
	// 0–64; 0 means the default. Real screenshots and rendered charts carry
	// anti-aliasing and texture that defeat PNG compression; the grain
	// stands in for it so the file has a realistic, predictable size. Use
	// -1 for a flat picture (a few kilobytes).
	Grain int
}

const (
	maxChartPixels = 25_000_000
	defaultGrain   = 4
)

func (o ChartOptions) withDefaults() (ChartOptions, error) {
	if o.Width == 0 {
		o.Width = 1280
	}
	if o.Height == 0 {
		o.Height = 800
	}
	if o.Bars == 0 {
		o.Bars = 12
	}
	if o.Grain == 0 {
		o.Grain = defaultGrain
	}
	if o.Grain < 0 {
		o.Grain = 0
	}
	switch {
	case o.Width < 64 || o.Height < 64:
		return o, fmt.Errorf("chart is %d×%d pixels: each side must be at least 64", o.Width, o.Height)
	case o.Width*o.Height > maxChartPixels:
		return o, fmt.Errorf("chart is %d×%d pixels: at most %d pixels", o.Width, o.Height, maxChartPixels)
	case o.Bars < 1 || o.Bars > o.Width/4:
		return o, fmt.Errorf("%d bars do not fit a %d pixel wide chart", o.Bars, o.Width)
	case o.Grain > 64:
		return o, fmt.Errorf("grain %d is over 64", o.Grain)
	}
	return o, nil
}

var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0xe1, 0x57, 0x59, 0xff}, {0x76, 0xb7, 0xb2, 0xff},
	{0x59, 0xa1, 0x4f, 0xff}, {0xed, 0xc9, 0x48, 0xff}, {0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff},
}

// Chart draws a bar chart (monthly revenue, say) as an opaque PNG and
// writes it to w. The same options always give the same bytes.
func Chart(w io.Writer, o ChartOptions) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	img := image.NewRGBA(image.Rect(0, 0, o.Width, o.Height))
	r := newRNG(o.Seed, 1<<40)

	fill(img, img.Rect, color.RGBA{0xfa, 0xfa, 0xf7, 0xff})
	left, right := o.Width/12, o.Width-o.Width/24
	top, bottom := o.Height/12, o.Height-o.Height/10
	plot := image.Rect(left, top, right, bottom)
	fill(img, plot, color.RGBA{0xff, 0xff, 0xff, 0xff})
	for i := 1; i <= 5; i++ { // horizontal grid lines
		y := bottom - (bottom-top)*i/5
		fill(img, image.Rect(left, y, right, y+1), color.RGBA{0xdd, 0xdd, 0xdd, 0xff})
	}
	slot := (right - left) / o.Bars
	for b := range o.Bars {
		v := 20 + r.intn(81) // percent of full scale
		h := (bottom - top) * v / 100
		x0 := left + b*slot + slot/6
		x1 := left + (b+1)*slot - slot/6
		if x1 <= x0 {
			x1 = x0 + 1
		}
		c := palette[b%len(palette)]
		// Shade each bar top to bottom, as plotting libraries do.
		for y := bottom - h; y < bottom; y++ {
			k := 90 + 10*(y-(bottom-h))/max(h, 1)
			fill(img, image.Rect(x0, y, x1, y+1), color.RGBA{
				uint8(int(c.R) * k / 100), uint8(int(c.G) * k / 100), uint8(int(c.B) * k / 100), 0xff})
		}
		fill(img, image.Rect(x0, bottom+4, x1, bottom+8), c) // legend tick
	}
	axis := color.RGBA{0x33, 0x33, 0x33, 0xff}
	fill(img, image.Rect(left-2, top, left, bottom+2), axis)
	fill(img, image.Rect(left-2, bottom, right, bottom+2), axis)

	if o.Grain > 0 {
		grain(img, r, o.Grain)
	}
	return (&png.Encoder{CompressionLevel: png.DefaultCompression}).Encode(w, img)
}

func fill(img *image.RGBA, rect image.Rectangle, c color.RGBA) {
	rect = rect.Intersect(img.Rect)
	for y := rect.Min.Y; y < rect.Max.Y; y++ {
		row := img.Pix[img.PixOffset(rect.Min.X, y):img.PixOffset(rect.Max.X, y)]
		for i := 0; i < len(row); i += 4 {
			row[i], row[i+1], row[i+2], row[i+3] = c.R, c.G, c.B, c.A
		}
	}
}

// grain adds uniform noise in [-a, a] to every colour channel.
func grain(img *image.RGBA, r *rng, a int) {
	span := uint64(2*a + 1)
	for i := 0; i < len(img.Pix); i += 4 {
		n := r.next()
		for ch := range 3 {
			d := int(((n>>(ch*16))&0xffff)%span) - a
			img.Pix[i+ch] = clamp(int(img.Pix[i+ch]) + d)
		}
	}
}

func clamp(v int) uint8 {
	switch {
	case v < 0:
		return 0
	case v > 255:
		return 255
	}
	return uint8(v)
}
