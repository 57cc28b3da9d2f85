package preview

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
)

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r    io.ReaderAt
	read int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.read += int64(n)
	return n, err
}

// TestFeedSkipsWhatIsNotNeeded: Feed gives the preview Write gives, and
// reads only the head of a binary or of an image too large to draw, but
// all of a zip (its directory is at the end), a PDF (its pages are
// counted) and a JSON document.
func TestFeedSkipsWhatIsNotNeeded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	noise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	pad := func(b []byte, n int) []byte { return append(b, noise(n-len(b))...) }
	bigPNG := pad(genScreenshot(r), maxImageBytes+(3<<20))
	var pdf bytes.Buffer
	pdf.Write(genPDF(r))
	for pdf.Len() < 3<<20 { // pages far past the head
		pdf.WriteString("7 0 obj\n<< /Type /Page /Parent 2 0 R >>\nendobj\n")
	}
	zipWithBody := func() []byte { // its directory, at the end, past 3 MiB
		var b bytes.Buffer
		w := zip.NewWriter(&b)
		f, _ := w.CreateHeader(&zip.FileHeader{Name: "noise.bin", Method: zip.Store})
		f.Write(noise(3 << 20))
		f, _ = w.Create("README.md")
		f.Write([]byte("the last entry\n"))
		w.Close()
		return b.Bytes()
	}()
	cases := []struct {
		name     string
		o        Options
		data     []byte
		readsAll bool
	}{
		{"random binary", Options{MimeType: "application/octet-stream"}, noise(3 << 20), false},
		{"image too large to draw", Options{MimeType: "image/png", Thumbnail: true, Size: int64(len(bigPNG))}, bigPNG, false},
		{"image drawn", Options{MimeType: "image/png", Thumbnail: true}, genScreenshot(r), true},
		{"pdf", Options{MimeType: "application/pdf"}, pdf.Bytes(), true},
		{"zip", Options{MimeType: "application/zip"}, zipWithBody, true},
		{"json", Options{MimeType: "application/json"}, genAPIList(r), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := previewOf(c.o, c.data)
			b := New(c.o)
			cr := &countingReaderAt{r: bytes.NewReader(c.data)}
			if err := b.Feed(cr, int64(len(c.data))); err != nil {
				t.Fatal(err)
			}
			got := b.Preview()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Feed's preview differs from Write's:\n got %+v\nwant %+v", got, want)
			}
			if got.Facts.Size != int64(len(c.data)) {
				t.Errorf("size %d, want %d", got.Facts.Size, len(c.data))
			}
			if all := cr.read == int64(len(c.data)); all != c.readsAll {
				t.Errorf("read %d of %d bytes; want all read: %v", cr.read, len(c.data), c.readsAll)
			}
		})
	}
}

// TestFeedShortReader: a reader that ends early is an error, and what it
// gave is in the preview's size.
func TestFeedShortReader(t *testing.T) {
	data := []byte(`{"a": 1}`)
	b := New(Options{})
	if err := b.Feed(bytes.NewReader(data), 100); !errors.Is(err, io.EOF) {
		t.Fatalf("err %v, want io.EOF", err)
	}
	if pv := b.Preview(); pv.Facts.Size != int64(len(data)) {
		t.Errorf("size %d, want %d", pv.Facts.Size, len(data))
	}
}
