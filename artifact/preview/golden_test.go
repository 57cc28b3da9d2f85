package preview

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden previews in testdata/golden")

// corpus lists the fixtures with the type their producer would declare.
// orders.csv is declared text/plain, as a generic file tool sends it:
// content must make it a table.
var corpus = []struct{ file, mime, kind string }{
	{"api_list.json", "application/json", KindJSON},
	{"db_envelope.json", "application/json", KindJSON},
	{"compact_rows.json", "application/json", KindJSON},
	{"git_diff.json", "application/json", KindJSON},
	{"graph.json", "application/json", KindJSON},
	{"npm_ls.json", "application/json", KindJSON},
	{"tree.json", "application/json", KindJSON},
	{"events.ndjson", "application/x-ndjson", KindNDJSON},
	{"orders.csv", "text/plain", KindCSV},
	{"metrics.tsv", "", KindTSV},
	{"app.log", "text/plain", KindText},
	{"report.md", "text/markdown", KindMarkdown},
	{"page.html", "text/html", KindHTML},
	{"screenshot.png", "image/png", KindImage},
	{"photo.jpg", "image/jpeg", KindImage},
	{"tone.wav", "audio/wav", KindAudio},
	{"doc.pdf", "application/pdf", KindBinary},
	{"bundle.zip", "application/zip", KindBinary},
	{"export.csv.gz", "application/gzip", KindBinary},
	{"random.bin", "application/octet-stream", KindBinary},
	// Real outputs whose previews said little: a table after a banner
	// line, pretty JSON after one, an Excel server's sheet as HTML.
	{"query_banner.txt", "text/plain", KindCSV},
	{"search_pretty.txt", "text/plain", KindJSON},
	{"sheet.html", "text/html", KindHTML},
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// previewChunks feeds data in writes of chunk bytes.
func previewChunks(o Options, data []byte, chunk int) Preview {
	b := New(o)
	for len(data) > 0 {
		n := min(chunk, len(data))
		b.Write(data[:n])
		data = data[n:]
	}
	return b.Preview()
}

func fixtureOptions(file, mime string) Options {
	return Options{MimeType: mime, Name: file, Thumbnail: true}
}

// render is the golden form of a preview: kind, thumbnail, text.
func render(pv Preview) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "kind: %s (%d bytes of text)\n", pv.Kind, len(pv.Text))
	if th := pv.Thumbnail; th != nil {
		fmt.Fprintf(&b, "thumbnail: %s %d×%d, %d bytes\n", th.MimeType, th.Width, th.Height, len(th.Data))
	}
	b.WriteString("---\n")
	b.WriteString(pv.Text)
	b.WriteString("\n")
	return b.String()
}

// TestGolden compares each fixture's preview with its golden file, and
// holds every preview to the default budget.
func TestGolden(t *testing.T) {
	for _, c := range corpus {
		t.Run(c.file, func(t *testing.T) {
			pv := previewChunks(fixtureOptions(c.file, c.mime), readFixture(t, c.file), 4096)
			if pv.Kind != c.kind {
				t.Errorf("kind %q, want %q", pv.Kind, c.kind)
			}
			if len(pv.Text) > DefaultBudget {
				t.Errorf("text is %d bytes, over the budget of %d", len(pv.Text), DefaultBudget)
			}
			got := render(pv)
			path := filepath.Join("testdata", "golden", c.file+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("preview differs from %s (run with -update to accept):\n%s", path, got)
			}
		})
	}
}

// TestChunkingIndependent feeds every fixture one byte at a time, in odd
// chunks and all at once: the previews must be equal.
func TestChunkingIndependent(t *testing.T) {
	for _, c := range corpus {
		t.Run(c.file, func(t *testing.T) {
			data := readFixture(t, c.file)
			o := fixtureOptions(c.file, c.mime)
			whole := previewChunks(o, data, len(data))
			for _, chunk := range []int{1, 7, 4093} {
				if got := previewChunks(o, data, chunk); !reflect.DeepEqual(got, whole) {
					t.Errorf("writes of %d bytes give another preview:\n%s\nall at once:\n%s", chunk, render(got), render(whole))
				}
			}
		})
	}
}

// TestBudgets previews every fixture within budgets from tiny to large:
// the text never exceeds its budget, and the most important line stays.
func TestBudgets(t *testing.T) {
	for _, c := range corpus {
		data := readFixture(t, c.file)
		for _, budget := range []int{64, 200, 512, 1000, 4096, 16384} {
			o := Options{MimeType: c.mime, Name: c.file, Budget: budget}
			pv := previewChunks(o, data, 65536)
			if len(pv.Text) > budget {
				t.Errorf("%s: %d bytes of text for a budget of %d", c.file, len(pv.Text), budget)
			}
			if pv.Text == "" {
				t.Errorf("%s: empty text at budget %d", c.file, budget)
			}
		}
	}
}
