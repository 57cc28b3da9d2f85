package preview

import (
	"fmt"
	"html"
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
	if text != "" {
		secs = append(secs, section{prioSample, "Text: " + text + "\n"})
	}
	return secs
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
		lt := strings.IndexByte(s, '<')
		if lt < 0 {
			lt = len(s)
		}
		chunk := s[:lt]
		s = s[lt:]
		if skip == "" {
			if inTitle || heading > 0 {
				cur.WriteString(chunk)
			}
			if inBody && body.Len() < excerptBytes*2 {
				body.WriteString(chunk)
				body.WriteByte(' ')
			}
		}
		if len(s) == 0 {
			break
		}
		if strings.HasPrefix(s, "<!--") {
			end := strings.Index(s, "-->")
			if end < 0 {
				break
			}
			s = s[end+3:]
			continue
		}
		gt := strings.IndexByte(s, '>')
		if gt < 0 {
			break
		}
		tag := strings.ToLower(s[1:gt])
		s = s[gt+1:]
		closing := strings.HasPrefix(tag, "/")
		name := strings.TrimPrefix(tag, "/")
		if i := strings.IndexAny(name, " \t\r\n/"); i >= 0 {
			name = name[:i]
		}
		switch {
		case skip != "":
			if closing && name == skip {
				skip = ""
			}
		case name == "script" || name == "style" || name == "noscript" || name == "svg" || name == "nav" || name == "footer":
			if !closing {
				skip = name
			}
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
