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
	lr := newLineReader(rc)
	a := answer{max: r.lim.MaxAnswer}
	var before []numbered // the context lines held before a match
	after, last, matches, n := 0, 0, 0, 0
	emit := func(num int, sep byte, text string) {
		if c.Context > 0 && last != 0 && num > last+1 { // grep's group separator
			a.add("--\n")
		}
		a.add(fmt.Sprintf("%d%c%s\n", num, sep, text))
		last = num
	}
	more := false
	for !a.cut {
		ln, err := lr.next(ctx, maxScanLine)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		n++
		if loc := re.FindIndex(ln.text); loc != nil {
			if matches == c.MaxMatches {
				more = true
				break
			}
			matches++
			for _, b := range before {
				emit(b.n, '-', b.text)
			}
			before = before[:0]
			emit(n, ':', around(ln, loc))
			after = c.Context
			continue
		}
		switch {
		case after > 0:
			emit(n, '-', ln.shown())
			after--
		case c.Context > 0:
			if len(before) == c.Context {
				before = append(before[:0], before[1:]...)
			}
			before = append(before, numbered{n, ln.shown()})
		}
	}
	head := fmt.Sprintf("%s: %d matching lines for /%s/", src.URI, matches, truncate(c.Pattern, 200))
	switch {
	case more:
		head += fmt.Sprintf(" (stopped at maxMatches=%d; more match from line %d)", c.MaxMatches, n)
	case a.cut:
		head += fmt.Sprintf(" (stopped at line %d)", last)
	default:
		head += fmt.Sprintf(" in %d lines", n)
	}
	return head + "\n" + a.String(), nil
}

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
