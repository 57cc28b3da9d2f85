package preview

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The table reader takes rows and cells as a browser would: implicit
// ends, entities, nested tables inside a cell, comments and scripts
// skipped.
func TestFirstTable(t *testing.T) {
	page := `<p>intro</p><table><!-- <tr><td>no</td></tr> --><tr><th>a</th><th>b &amp; c</th>
<tr><td> 1 <td>x<table><tr><td>in</td></tr></table>y</td></tr>
<tr><td>2<script>var s = "<td>";</script></td><td>z</td></table><table><tr><td>second</td></tr></table>`
	rows, tables := firstTable(page)
	want := [][]string{{"a", "b & c"}, {"1", "x in y"}, {"2", "z"}}
	if tables != 2 || len(rows) != len(want) {
		t.Fatalf("%d tables, rows %q", tables, rows)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d: %q, want %q", i, rows[i], want[i])
		}
	}
}

// FuzzHTMLTable: any page reads within the bounds (rows, cells, cell
// bytes), as valid UTF-8 where the page is, without a panic; its
// preview holds its budget.
func FuzzHTMLTable(f *testing.F) {
	f.Add(string(readFixtureF(f, "sheet.html")[:4096]))
	f.Add(string(readFixtureF(f, "page.html")))
	for _, s := range []string{"<table><tr><td>a<td>b<tr><td>1<td>2</table>", "<table><table></table><tr><td>x", "<td><td></tr></table></table>", "<table><tr><td><!--", "<TABLE><TR><TH>é&#x41;</th></TR>", "<table><tr><td>" + strings.Repeat("x", 3000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, page string) {
		rows, tables := firstTable(page)
		if len(rows) > 0 && tables == 0 || len(rows) > maxTableRows {
			t.Fatalf("%d rows in %d tables", len(rows), tables)
		}
		for _, r := range rows {
			if len(r) > maxFields {
				t.Fatalf("%d cells", len(r))
			}
			for _, c := range r {
				if len(c) > maxScalar || utf8.ValidString(page) && !utf8.ValidString(c) {
					t.Fatalf("cell %q", c)
				}
			}
		}
		pv := previewChunks(Options{MimeType: "text/html", Budget: 400}, []byte(page), 100)
		if len(pv.Text) > 400 {
			t.Fatalf("%d bytes of text", len(pv.Text))
		}
	})
}
