package arttools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// maxScanLine is how much of one line grep searches: RE2 is linear, but
// a line is held in memory whole up to here.
const maxScanLine = 1 << 20

// grep answers grep: the lines matching Pattern, numbered ("N:" a match,
// "N-" a context line, "--" between groups, as grep -n prints them).
func (r *Runner) grep(ctx context.Context, c Call, src Source) (string, error) {
	pat := c.Pattern
	if c.IgnoreCase {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return "", invalid("pattern: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	rc, err := src.Open(ctx, 0, -1)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	g := &grepper{c: c, re: re, a: answer{max: r.lim.MaxAnswer}}
	if err := g.scan(ctx, newLineReader(rc)); err != nil {
		return "", err
	}
	head := fmt.Sprintf("%s: %d matching lines for /%s/", src.URI, g.matches, truncate(c.Pattern, 200))
	switch {
	case g.more:
		head += fmt.Sprintf(" (stopped at maxMatches=%d; more match from line %d)", c.MaxMatches, g.n)
	case g.a.cut:
		head += fmt.Sprintf(" (stopped at line %d)", g.last)
	default:
		head += fmt.Sprintf(" in %d lines", g.n)
	}
	return head + "\n" + g.a.String(), nil
}

// grepper is one grep's scan: its answer, and where it is.
type grepper struct {
	c  Call
	re *regexp.Regexp
	a  answer
	// before holds the context lines read since the last one shown (at
	// most c.Context), shown if a match follows; after counts the context
	// lines still to show after the last match.
	before  []numbered
	after   int
	last    int  // the number of the last line shown (0: none yet)
	matches int  // the matching lines shown
	n       int  // the lines read
	more    bool // a match past c.MaxMatches was found: the scan stopped there
}

// scan reads lr's lines until the end, the answer is full or a match
// past MaxMatches, and shows each match with its context.
func (g *grepper) scan(ctx context.Context, lr *lineReader) error {
	for !g.a.cut {
		ln, err := lr.next(ctx, maxScanLine)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		g.n++
		if loc := g.re.FindIndex(ln.text); loc != nil {
			if g.matches == g.c.MaxMatches {
				g.more = true
				return nil
			}
			g.match(ln, loc)
		} else {
			g.other(ln)
		}
	}
	return nil
}

// match shows the matching line ln (the match at loc), after the context
// lines held before it.
func (g *grepper) match(ln line, loc []int) {
	g.matches++
	for _, b := range g.before {
		g.emit(b.n, '-', b.text)
	}
	g.before = g.before[:0]
	g.emit(g.n, ':', around(ln, loc))
	g.after = g.c.Context
}

// other shows the line ln that does not match if it follows a match
// closely enough, else holds it as context for a match to come.
func (g *grepper) other(ln line) {
	switch {
	case g.after > 0:
		g.emit(g.n, '-', ln.shown())
		g.after--
	case g.c.Context > 0:
		if len(g.before) == g.c.Context {
			g.before = append(g.before[:0], g.before[1:]...)
		}
		g.before = append(g.before, numbered{g.n, ln.shown()})
	}
}

// emit adds line num to the answer, sep after its number (':' a match,
// '-' context), with grep's "--" before it when lines were skipped since
// the last one shown.
func (g *grepper) emit(num int, sep byte, text string) {
	if g.c.Context > 0 && g.last != 0 && num > g.last+1 {
		g.a.add("--\n")
	}
	g.a.add(fmt.Sprintf("%d%c%s\n", num, sep, text))
	g.last = num
}

// numbered is a context line held for a match to come, with its number.
type numbered struct {
	n    int
	text string
}

// showLine caps a line grep shows.
const showLine = 1024

// shown is a context line as grep shows it: its first showLine bytes.
func (ln line) shown() string {
	if len(ln.text) > showLine {
		ln.text = []byte(truncate(string(ln.text), showLine))
	}
	return ln.show()
}

// around is a matching line as grep shows it: whole when short, else
// showLine bytes around the match, with the rest named.
func around(ln line, loc []int) string {
	if ln.size <= showLine {
		return ln.show()
	}
	from := max(0, loc[0]-showLine/4)
	for from > 0 && from < len(ln.text) && ln.text[from]&0xC0 == 0x80 {
		from--
	}
	to := from + len(truncate(string(ln.text[from:]), showLine))
	s := strings.ToValidUTF8(string(ln.text[from:to]), "\uFFFD")
	return fmt.Sprintf("[line of %d bytes at byteOffset=%d; bytes %d-%d of it:] %s", ln.size, ln.start, from, to, s)
}
