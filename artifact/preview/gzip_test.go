package preview

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func gzipped(t testing.TB, name string, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Name = name
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A gzip is previewed as what it holds, from its first 256 KiB
// decompressed: a log too large to inflate whole shows its lines; a
// decompression bomb (64 MiB of zeros in 64 KiB) costs no more than that
// bound. Before, a gzip's preview gave its name and length only.
func TestGzipContent(t *testing.T) {
	var log strings.Builder
	for i := 0; log.Len() < 4<<20; i++ {
		fmt.Fprintf(&log, "2025-01-01T09:%02d:%02d.%03dZ INFO job %d: step %x done in %dms\n", i/60%60, i%60, i%1000, i, i*7919, i%977)
	}
	pv := previewChunks(Options{Name: "app.log.gz"}, gzipped(t, "app.log", []byte(log.String())), 4096)
	for _, want := range []string{"gzip-compressed data", "Its content, decompressed (its first 25", " only), is text data:", "Log, ", "INFO job 0: step 0 done"} {
		if !strings.Contains(pv.Text, want) {
			t.Errorf("the preview lacks %q:\n%s", want, pv.Text)
		}
	}

	bomb := gzipped(t, "zeros.txt", make([]byte, 64<<20))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pv = previewChunks(Options{}, bomb, 64<<10)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("previewing a %d-byte bomb allocated %d bytes", len(bomb), alloc)
	}
	if !strings.Contains(pv.Text, "Its content, decompressed (its first 256.0 KiB only)") {
		t.Errorf("the bomb's preview:\n%s", pv.Text)
	}
}

// FuzzGzipHead: any bytes after the gzip magic inflate to at most
// gzipHeadMax bytes without a panic, and their preview holds its budget.
func FuzzGzipHead(f *testing.F) {
	gz := readFixtureF(f, "export.csv.gz")
	f.Add(gz)
	f.Add(gz[:200])
	f.Add(gzipped(f, "", bytes.Repeat([]byte{0}, 1<<20)))
	f.Add(gzipped(f, "x.gz", gzipped(f, "y", []byte("a,b\n1,2\n"))))
	f.Add([]byte("\x1f\x8b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		content, _ := gunzipHead(data)
		if len(content) > gzipHeadMax {
			t.Fatalf("inflated %d bytes", len(content))
		}
		pv := previewChunks(Options{Budget: 500}, append([]byte("\x1f\x8b"), data...), 1000)
		if len(pv.Text) > 500 {
			t.Fatalf("%d bytes of text", len(pv.Text))
		}
	})
}
