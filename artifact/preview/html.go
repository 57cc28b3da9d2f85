package preview

import (
	"fmt"
	"html"
	"slices"
	"strings"
)

// htmlSample is how much of an HTML page is read: title, headings and the
// first text are near the top.
const htmlSample = 256 << 10

// htmlAn keeps the first htmlSample bytes of a page and reads its title,
// heading outline and first text at the end.
type htmlAn struct {
	buf []byte
}

func (a *htmlAn) write(p []byte) {
	if room := htmlSample - len(a.buf); room > 0 {
		a.buf = append(a.buf, p[:min(room, len(p))]...)
	}
}

func (a *htmlAn) finish(pv *Preview) []section {
	f := &pv.Facts
	f.Format = "html"
	title, heads, text := scanHTML(string(a.buf))
	f.Title = title
	secs := []section{{prioHead, fmt.Sprintf("HTML page (%s), %d headings.\n", humanSize(f.Size), len(heads))}}
	if title != "" {
		secs = append(secs, section{prioFacts, "Title: " + title + "\n"})
	}
	if len(heads) > 0 {
		secs = append(secs, section{prioDetail, "Outline:\n" + strings.Join(heads, "\n") + "\n"})
	}
	rows, tables := firstTable(string(a.buf))
	if len(rows) < 2 {
		if text != "" {
			secs = append(secs, section{prioSample, "Text: " + text + "\n"})
		}
		return secs
	}
	// A page that holds a table (an Excel server's sheet, a report) is
	// previewed as the table: its header, columns and rows say more than
	// its text run together.
	t := newCSV(',')
	for _, r := range rows {
		t.record(r)
	}
	if t.t.rows > 0 {
		t.t.last = t.sample(t.lastRec)
	}
	where := ""
	if f.Size > htmlSample {
		where = fmt.Sprintf(" (in its first %s)", humanSize(htmlSample))
	}
	head := fmt.Sprintf("Table 1 of %d%s: %d rows × %d columns, header: %s.\n", tables, where, t.t.rows, len(t.header), clip(strings.Join(t.header, ", "), 300))
	tsecs := tableSections(head, t.t, f, nil)
	tsecs[0].prio = prioFacts
	return append(secs, tsecs...)
}

// Bounds of the table reader.
const (
	maxTableRows = 100_000 // rows of the first table read; later ones are not counted
	maxCell      = 1024    // bytes of a cell's text kept
)

// firstTable reads the first table of a page, tag by tag as scanHTML
// does: its rows of cell texts (entities decoded, white space collapsed;
// a table nested in a cell is part of that cell's text), and how many
// tables the page has at its top level. Rows end at </tr> or at the next
// <tr>, cells at </td>, </th> or the next cell, as browsers read them.
func firstTable(s string) (rows [][]string, tables int) {
	var (
		t     tableRows
		depth int // <table> nesting
		done  bool
		skip  string
	)
	for len(s) > 0 {
		text, name, closing, rest, ok := nextTag(s)
		if skip == "" {
			t.addText(text)
		}
		if !ok {
			break
		}
		s = rest
		if skipped(&skip, name, closing, "script", "style") {
			continue
		}
		switch {
		case name == "table" && !closing:
			if depth == 0 {
				tables++
			}
			depth++
		case name == "table" && closing && depth > 0:
			depth--
			if depth == 0 && !done {
				t.endRow()
				done = true
			}
		case done || depth != 1:
			// Outside the first table, or inside a table nested in it.
		case name == "tr":
			t.endRow()
			t.inRow = !closing
		case name == "td" || name == "th":
			t.endCell()
			if !closing {
				t.inRow, t.inCell = true, true
			}
		}
	}
	if !done {
		t.endRow()
	}
	return t.rows, tables
}

// tableRows gathers a table's rows of cells as firstTable meets them.
type tableRows struct {
	rows      [][]string
	row       []string
	inRow     bool
	cell      strings.Builder
	inCell    bool
	cellTrunc bool // the cell has reached maxCell bytes
}

// addText adds text that lies between tags to the open cell, if any.
func (t *tableRows) addText(text string) {
	if !t.inCell || t.cellTrunc {
		return
	}
	if t.cell.Len()+len(text) > maxCell {
		t.cellTrunc = true
	}
	t.cell.WriteString(truncUTF8(text, maxCell-t.cell.Len()))
	t.cell.WriteByte(' ')
}

// endCell closes the open cell, if any: its text, unescaped and with its
// spaces folded, is the row's next cell.
func (t *tableRows) endCell() {
	if !t.inCell {
		return
	}
	if len(t.row) < maxFields {
		t.row = append(t.row, clip(strings.Join(strings.Fields(html.UnescapeString(t.cell.String())), " "), maxScalar))
	}
	t.cell.Reset()
	t.inCell, t.cellTrunc = false, false
}

// endRow closes the open row, if any, and keeps it if it has cells.
func (t *tableRows) endRow() {
	t.endCell()
	if t.inRow && len(t.row) > 0 && len(t.rows) < maxTableRows {
		t.rows = append(t.rows, t.row)
	}
	t.row, t.inRow = nil, false
}

// nextTag splits s at its next tag: the text before it, the tag's name
// (lower case) and whether it closes, and what follows it. A comment is
// passed over, as a tag without a name. ok is false when no whole tag
// follows: text is then what s has before the cut one.
func nextTag(s string) (text, name string, closing bool, rest string, ok bool) {
	lt := strings.IndexByte(s, '<')
	if lt < 0 {
		return s, "", false, "", false
	}
	text, s = s[:lt], s[lt:]
	if strings.HasPrefix(s, "<!--") {
		end := strings.Index(s, "-->")
		if end < 0 {
			return text, "", false, "", false
		}
		return text, "", false, s[end+3:], true
	}
	gt := strings.IndexByte(s, '>')
	if gt < 0 {
		return text, "", false, "", false
	}
	name = strings.ToLower(s[1:gt])
	name, closing = strings.CutPrefix(name, "/")
	if i := strings.IndexAny(name, " \t\r\n/"); i >= 0 {
		name = name[:i]
	}
	return text, name, closing, s[gt+1:], true
}

// skipped reports whether a tag is one of an element whose content is
// not read (skip, which names it until its end tag: a script, a style),
// or starts or ends one of names.
func skipped(skip *string, name string, closing bool, names ...string) bool {
	if *skip != "" {
		if closing && name == *skip {
			*skip = ""
		}
		return true
	}
	if !slices.Contains(names, name) {
		return false
	}
	if !closing {
		*skip = name
	}
	return true
}

// scanHTML is a small tag scanner: it is not a parser, and does not need
// to be for a title, the h1-h6 texts and the body's first words.
func scanHTML(s string) (title string, heads []string, text string) {
	var body, cur strings.Builder
	// A page without <body> (a fragment) is all body.
	inTitle, heading, skip, inBody := false, 0, "", !strings.Contains(strings.ToLower(s), "<body")
	flush := func() string {
		t := strings.Join(strings.Fields(html.UnescapeString(cur.String())), " ")
		cur.Reset()
		return t
	}
	for len(s) > 0 {
		chunk, name, closing, rest, ok := nextTag(s)
		if skip == "" {
			if inTitle || heading > 0 {
				cur.WriteString(chunk)
			}
			if inBody && body.Len() < excerptBytes*2 {
				body.WriteString(chunk)
				body.WriteByte(' ')
			}
		}
		if !ok {
			break
		}
		s = rest
		if skipped(&skip, name, closing, "script", "style", "noscript", "svg", "nav", "footer") {
			continue
		}
		switch {
		case name == "title":
			if closing && inTitle && title == "" {
				title = clip(flush(), 150)
			}
			inTitle = !closing
		case len(name) == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6':
			if !closing {
				heading = int(name[1] - '0')
				cur.Reset()
			} else if heading > 0 {
				if t := flush(); t != "" && len(heads) < maxHeadings {
					heads = append(heads, clip(strings.Repeat("#", heading)+" "+t, 100))
				}
				heading = 0
			}
		case name == "body":
			inBody = !closing
		}
	}
	text = clip(strings.Join(strings.Fields(html.UnescapeString(body.String())), " "), excerptBytes)
	return title, heads, text
}
