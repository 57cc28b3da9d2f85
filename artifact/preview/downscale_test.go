package preview

import (
	"image"
	"image/color"
	"image/color/palette"
	"math/rand/v2"
	"reflect"
	"testing"
)

// pixOf is an image's Pix, for the types that have one.
func pixOf(img image.Image) []uint8 { return reflect.ValueOf(img).Elem().FieldByName("Pix").Bytes() }

// BenchmarkDownscale: a 1920×1080 image of each type the decoders return
// drawn as a 512-pixel thumbnail through its fast path ("fast") and
// through image.Image's At ("generic"), which every type but RGBA, NRGBA
// and YCbCr took before.
func BenchmarkDownscale(b *testing.B) {
	r := image.Rect(0, 0, 1920, 1080)
	pal := image.NewPaletted(r, palette.Plan9)
	gray := image.NewGray(r)
	for i := range pal.Pix {
		pal.Pix[i], gray.Pix[i] = uint8(i), uint8(i>>3)
	}
	for _, c := range []struct {
		name string
		img  image.Image
	}{
		{"gray", gray},
		{"paletted", pal},
		{"gray16", image.NewGray16(r)},
		{"nrgba64", image.NewNRGBA64(r)},
		{"cmyk", image.NewCMYK(r)},
		{"rgba", image.NewRGBA(r)},
	} {
		for _, path := range []string{"fast", "generic"} {
			img := c.img
			if path == "generic" {
				img = struct{ image.Image }{img} // hides the type
			}
			b.Run(c.name+"/"+path, func(b *testing.B) {
				for b.Loop() {
					downscale(b.Context(), img, 512, 288)
				}
			})
		}
	}
}

// TestFastPathsMatchGeneric: each fast path sums what image.Image's At
// reads, box by box.
func TestFastPathsMatchGeneric(t *testing.T) {
	r := image.Rect(3, 2, 40, 9) // not at the origin
	pal := image.NewPaletted(r, color.Palette{color.NRGBA{200, 10, 30, 128}, color.Gray{77}})
	imgs := []image.Image{image.NewGray(r), image.NewGray16(r), pal, image.NewRGBA(r), image.NewNRGBA(r),
		image.NewRGBA64(r), image.NewNRGBA64(r), image.NewCMYK(r)}
	rnd := rand.New(rand.NewPCG(5, 6))
	x0s := []int{0, 1, 5, 6, 20, 37}
	for _, img := range imgs {
		pix := pixOf(img)
		for i := range pix {
			pix[i] = uint8(rnd.Uint32())
			if img == pal {
				pix[i] %= 2
			}
		}
		fast, generic := make([][4]uint64, 5), make([][4]uint64, 5)
		for y := r.Min.Y; y < r.Max.Y; y++ {
			rowAdder(img, x0s)(fast, y)
			rowAdder(struct{ image.Image }{img}, x0s)(generic, y)
		}
		// CMYK goes through 8-bit RGB: off by at most 0x101 a pixel of
		// the box (17 columns, 7 rows at most); the others are exact.
		var tolerance uint64
		if _, ok := img.(*image.CMYK); ok {
			tolerance = 0x101 * 17 * 7
		}
		for x := range fast {
			for c := range 4 {
				if d := max(fast[x][c], generic[x][c]) - min(fast[x][c], generic[x][c]); d > tolerance {
					t.Errorf("%T box %d channel %d: %d, At: %d", img, x, c, fast[x][c], generic[x][c])
				}
			}
		}
	}
}
