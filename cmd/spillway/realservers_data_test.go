package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The large outputs of TestRealServers, written from seeded formulas: the
// same bytes every run.

// rsLog writes a server log of about size bytes.
func rsLog(t *testing.T, name string, size int) {
	t.Helper()
	r := rand.New(rand.NewPCG(21, 1))
	paths := []string{"/api/v1/items", "/api/v1/orders", "/healthz", "/api/v1/users", "/static/app.js"}
	levels := []string{"INFO", "INFO", "INFO", "WARN", "DEBUG", "ERROR"}
	b := make([]byte, 0, size+200)
	for i := 0; len(b) < size; i++ {
		b = fmt.Appendf(b, "2026-11-26T%02d:%02d:%02d.%03dZ %-5s req=%08d path=%s/%d status=%d dur=%dms user=u-%d\n",
			i/3600000%24, i/60000%60, i/1000%60, i%1000, levels[r.IntN(len(levels))], i,
			paths[r.IntN(len(paths))], r.IntN(100000), []int{200, 200, 200, 201, 404, 500}[r.IntN(6)], r.IntN(2000), r.IntN(5000))
	}
	rsWrite(t, name, b)
}

// rsCSV writes a table of n rows and a header.
func rsCSV(t *testing.T, name string, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(21, 2))
	cities := []string{"Lisbon", "Oslo", "Nairobi", "Osaka", "Quito", "Tallinn", "Perth"}
	var b bytes.Buffer
	b.WriteString("id,name,email,city,amount,date\n")
	for i := range n {
		fmt.Fprintf(&b, "%d,customer-%05d,c%d@example.test,%s,%d.%02d,2026-%02d-%02d\n",
			i, i, i, cities[r.IntN(len(cities))], r.IntN(10000), r.IntN(100), 1+r.IntN(12), 1+r.IntN(28))
	}
	rsWrite(t, name, b.Bytes())
}

// rsTree makes a source tree of dirs×subs folders with files files each.
func rsTree(t *testing.T, root string, dirs, subs, files int) {
	t.Helper()
	for d := range dirs {
		for s := range subs {
			dir := filepath.Join(root, fmt.Sprintf("package-%02d", d), fmt.Sprintf("module-%02d", s))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for f := range files {
				rsWrite(t, filepath.Join(dir, fmt.Sprintf("component-%03d.js", f)), nil)
			}
		}
	}
}

// rsScreenshot writes a w×h PNG that looks like a desktop: flat panels,
// lines of "text" and a noisy picture in one corner.
func rsScreenshot(t *testing.T, name string, w, h int) {
	t.Helper()
	r := rand.New(rand.NewPCG(21, 3))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := range w {
			c := [4]byte{236, 238, 241, 255}
			switch {
			case y < 40:
				c = [4]byte{40, 44, 52, 255}
			case x < 280:
				c = [4]byte{250, 250, 252, 255}
			case x > w/2+200 && y > h/2:
				v := r.Uint32()
				c = [4]byte{byte(v), byte(v >> 8), byte(v >> 16), 255}
			case y%24 > 6 && y%24 < 18 && (x/9+y/24)%7 != 0 && r.IntN(3) == 0:
				c = [4]byte{30, 30, 30, 255}
			}
			copy(row[4*x:], c[:])
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	rsWrite(t, name, b.Bytes())
}

// rsPhoto writes a w×h JPEG of fine grain (it compresses badly, as camera
// noise does).
func rsPhoto(t *testing.T, name string, w, h int) {
	t.Helper()
	r := rand.NewChaCha8([32]byte{21, 4})
	img := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio444)
	r.Read(img.Y)
	r.Read(img.Cb)
	r.Read(img.Cr)
	// Muted colour: chroma near neutral.
	for i := range img.Cb {
		img.Cb[i] = 96 + img.Cb[i]%64
		img.Cr[i] = 96 + img.Cr[i]%64
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 92}); err != nil {
		t.Fatal(err)
	}
	rsWrite(t, name, b.Bytes())
}

// rsGraph writes a knowledge graph of n entities in server-memory's JSON
// lines format, each entity related to the next two.
func rsGraph(t *testing.T, name string, n int) {
	t.Helper()
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	enc := json.NewEncoder(w)
	types := []string{"person", "project", "service", "incident", "team"}
	for i := range n {
		enc.Encode(map[string]any{"type": "entity", "name": fmt.Sprintf("entity-%04d", i), "entityType": types[i%len(types)],
			"observations": []string{
				fmt.Sprintf("created in sprint %d", i%40),
				fmt.Sprintf("owned by team-%02d", i%17),
				fmt.Sprintf("last reviewed 2026-%02d-%02d", 1+i%12, 1+i%28),
			}})
	}
	for i := range n {
		for _, d := range []int{1, 2} {
			enc.Encode(map[string]any{"type": "relation", "from": fmt.Sprintf("entity-%04d", i),
				"to": fmt.Sprintf("entity-%04d", (i+d)%n), "relationType": []string{"depends_on", "reports_to"}[d-1]})
		}
	}
	w.Flush()
	rsWrite(t, name, b.Bytes())
}

func rsWrite(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
