package preview

import "testing"

// What is not a table or JSON behind a banner stays what it was: a
// Markdown document whose lines hold a comma each, a text after a line
// that starts with a bracket (Desktop Commander's read_file).
func TestBannerNotOverReached(t *testing.T) {
	for _, c := range []struct{ text, kind string }{
		{"# Report\nSome text, with a comma.\nMore text, here.\nAnd more, there.\n", KindMarkdown},
		{"[Reading 3 lines from start (total: 3 lines, 0 remaining)]\nalpha\nbeta\ngamma\n", KindText},
		{"Result:\n{\"a\": 1,\n \"b\": [1, 2]}\n", KindJSON},
		{"Rows:\n\nid;name\n1;a\n2;b\n", KindCSV},
		{"Result:\n{\"a\": 1,\n \"b\": [1, 2]} and words\n", KindText},
	} {
		if pv := previewChunks(Options{MimeType: "text/plain"}, []byte(c.text), 3); pv.Kind != c.kind {
			t.Errorf("%q: kind %s, want %s:\n%s", c.text, pv.Kind, c.kind, pv.Text)
		}
	}
}
