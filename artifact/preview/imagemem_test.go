package preview

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact/preview/previewtest"
)

// TestLargeImageNotHeld: an image of ordinary dimensions made large by
// its metadata (a 1920×1080 screenshot with a 30 MiB ancillary chunk, a
// photo with 30 MiB of COM segments, both before their pixels) gets the
// thumbnail its unpadded self gets, and previewing it allocates no more
// than previewing that (within heldSlack): its bytes are never held in
// memory, whether written in the 64 KiB pieces the offloader gives or fed
// from a ReaderAt.
func TestLargeImageNotHeld(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are counted: one goroutine, and no race detector's")
	}
	const pad = 30 << 20
	const heldSlack = 1 << 20
	shot := genScreenshot(rand.New(rand.NewPCG(3, 8)))
	for _, c := range []struct {
		name, mime string
		plain      []byte
	}{
		{"PNG screenshot", "image/png", shot},
		{"JPEG photo", "image/jpeg", encodeJPEG(gradient(1920, 1080))},
	} {
		padded := previewtest.Padded(c.plain, pad)
		for _, way := range []string{"Write", "Feed"} {
			preview := func(data []byte) (pv Preview) {
				o := Options{MimeType: c.mime, Thumbnail: true}
				if way == "Feed" {
					o.Size = int64(len(data))
				}
				b := New(o)
				if way == "Feed" {
					b.Feed(bytes.NewReader(data), int64(len(data)))
				} else {
					for p := data; len(p) > 0; p = p[min(len(p), 64<<10):] {
						b.Write(p[:min(len(p), 64<<10)])
					}
				}
				return b.Preview()
			}
			var want, got Preview
			base := allocated(func() { want = preview(c.plain) })
			alloc := allocated(func() { got = preview(padded) })
			t.Logf("%s of %.1f MiB, %s: %.1f MiB allocated (%.1f MiB unpadded); %q", c.name,
				float64(len(padded))/(1<<20), way, float64(alloc)/(1<<20), float64(base)/(1<<20), got.Text)
			if got.Thumbnail == nil || want.Thumbnail == nil || !bytes.Equal(got.Thumbnail.Data, want.Thumbnail.Data) {
				t.Errorf("%s, %s: the padded image's thumbnail differs from the unpadded's: %q", c.name, way, got.Text)
			}
			if alloc > base+heldSlack {
				t.Errorf("%s, %s: previewing %.1f MiB allocated %.1f MiB more than the image unpadded, over %.1f MiB",
					c.name, way, float64(len(padded))/(1<<20), float64(alloc-base)/(1<<20), float64(heldSlack)/(1<<20))
			}
		}
	}
}

// TestImageWithoutTempDir: with no file to keep an image in, its preview
// states its size and says why it has no thumbnail.
func TestImageWithoutTempDir(t *testing.T) {
	pv := previewOf(Options{Thumbnail: true, TempDir: filepath.Join(t.TempDir(), "gone")}, encodeJPEG(gradient(640, 480)))
	want := "JPEG image, 640×480 px, "
	if pv.Thumbnail != nil || !strings.HasPrefix(pv.Text, want) || !strings.HasSuffix(pv.Text, " Not thumbnailed: there was no room to keep it on disk.") {
		t.Errorf("got %q (thumbnail %v)", pv.Text, pv.Thumbnail != nil)
	}
}

// TestCloseFreesTheImage: the file that keeps an image to thumbnail is
// closed by Preview, or by Close when no preview is wanted.
func TestCloseFreesTheImage(t *testing.T) {
	for _, end := range []string{"Preview", "Close"} {
		b := New(Options{Thumbnail: true})
		b.Write(previewtest.Padded(encodeJPEG(gradient(640, 480)), 128<<10)) // past the head: its kind is known
		f := b.an.(*imageAn).file
		if f == nil {
			t.Fatal("no file keeps the image")
		}
		if end == "Preview" {
			b.Preview()
		}
		b.Close()
		if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("after %s, its file is still open (%v)", end, err)
		}
	}
}
