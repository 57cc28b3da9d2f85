package preview

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Bounds of the text analysis.
const (
	maxLine       = 1024 // bytes of a line kept for analysis; the rest is counted only
	headLines     = 10
	tailLines     = 5
	maxTemplates  = 1024 // distinct line templates counted; later new ones are not
	shownTemplate = 5
	firstErrors   = 3
	maxHeadings   = 40
	excerptBytes  = 400
)

// lineAn reads text line by line: counts, head and tail, log levels,
// repeated templates, first errors; in Markdown mode the heading outline
// and a text excerpt.
type lineAn struct {
	md       bool
	line     []byte
	lines    int64
	head     []string
	tail     [tailLines][]byte // the last lines, a ring of reused buffers
	tbuf     []byte            // the current line's template
	levels   map[string]int64
	leveled  int64
	tmpl     map[string]*tmplCount
	errs     []string
	headings []string
	inFence  bool
	fences   int64
	excerpt  strings.Builder
	title    string
	sawBytes bool
}

type tmplCount struct {
	n, first int64
}

func (a *lineAn) write(p []byte) {
	for len(p) > 0 {
		a.sawBytes = true
		i := indexNL(p)
		if i < 0 {
			a.keep(p)
			return
		}
		a.keep(p[:i])
		a.endLine()
		p = p[i+1:]
	}
}

func indexNL(p []byte) int {
	for i, c := range p {
		if c == '\n' {
			return i
		}
	}
	return -1
}

func (a *lineAn) keep(p []byte) {
	if room := maxLine - len(a.line); room > 0 {
		a.line = append(a.line, p[:min(room, len(p))]...)
	}
}

// endLine analyses the line in a.line. It allocates nothing for a line
// like those before it (a 100 MB log is millions of lines): strings are
// made only for what is kept.
func (a *lineAn) endLine() {
	a.lines++
	line := bytes.TrimRight(a.line, "\r")
	defer func() { a.line = a.line[:0] }()
	if len(a.head) < headLines {
		a.head = append(a.head, clip(validText(line), 200))
	}
	k := (a.lines - 1) % tailLines
	a.tail[k] = append(a.tail[k][:0], line[:min(len(line), 4*200)]...)
	if a.md {
		a.markdown(validText(line))
		return
	}
	if lv := level(line); lv != "" {
		if a.levels == nil {
			a.levels = map[string]int64{}
		}
		a.levels[lv]++
		a.leveled++
		if (lv == "ERROR" || lv == "FATAL" || lv == "PANIC" || lv == "CRITICAL") && len(a.errs) < firstErrors {
			a.errs = append(a.errs, fmt.Sprintf("line %d: %s", a.lines, clip(validText(line), 200)))
		}
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if a.tmpl == nil {
		a.tmpl = map[string]*tmplCount{}
	}
	a.tbuf = template(a.tbuf[:0], line)
	if c, ok := a.tmpl[string(a.tbuf)]; ok {
		c.n++
	} else if len(a.tmpl) < maxTemplates {
		a.tmpl[string(a.tbuf)] = &tmplCount{1, a.lines}
	}
}

// validText returns line as a string, with invalid UTF-8 replaced by
// U+FFFD.
func validText(line []byte) string { return strings.ToValidUTF8(string(line), "\uFFFD") }

func (a *lineAn) markdown(s string) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
		if !a.inFence {
			a.fences++
		}
		a.inFence = !a.inFence
		return
	}
	if a.inFence {
		return
	}
	if lv, text := heading(s); lv > 0 {
		if a.title == "" && lv == 1 {
			a.title = clip(text, 120)
		}
		if len(a.headings) < maxHeadings {
			a.headings = append(a.headings, clip(strings.Repeat("#", lv)+" "+text, 100))
		}
		return
	}
	if t != "" && !strings.HasPrefix(t, "|") && a.excerpt.Len() < excerptBytes {
		if a.excerpt.Len() > 0 {
			a.excerpt.WriteByte(' ')
		}
		a.excerpt.WriteString(t)
	}
}

// levelWords are the log levels recognised, with their canonical names.
var levelWords = map[string]string{
	"TRACE": "TRACE", "DEBUG": "DEBUG", "INFO": "INFO", "NOTICE": "INFO", "WARN": "WARN", "WARNING": "WARN",
	"ERROR": "ERROR", "ERR": "ERROR", "FATAL": "FATAL", "CRITICAL": "CRITICAL", "CRIT": "CRITICAL", "PANIC": "PANIC",
}

// level finds a log level among the first words of a line: an uppercase
// word (INFO, [ERROR]), or a lowercase one after level= or "level":".
func level(line []byte) string {
	s := line[:min(len(line), 120)]
	for i := 0; i < len(s); {
		if !isLetter(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isLetter(s[j]) {
			j++
		}
		w := s[i:j]
		if lv, ok := levelWords[string(w)]; ok {
			return lv
		}
		if bytes.HasSuffix(s[:i], []byte("level=")) || bytes.HasSuffix(s[:i], []byte(`"level":"`)) || bytes.HasSuffix(s[:i], []byte("lvl=")) || i > 0 && s[i-1] == '[' && j < len(s) && s[j] == ']' {
			if lv, ok := levelWords[strings.ToUpper(string(w))]; ok {
				return lv
			}
		}
		i = j
	}
	return ""
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// template appends to b the line with what varies masked: any word
// holding a digit (numbers, ids, times, hex) becomes '#'.
func template(b, s []byte) []byte {
	start := len(b)
	for i := 0; i < len(s) && len(b)-start < 200; {
		c := s[i]
		if !isWordByte(c) {
			b = append(b, c)
			i++
			continue
		}
		j, digit := i, false
		for j < len(s) && isWordByte(s[j]) {
			digit = digit || s[j] >= '0' && s[j] <= '9'
			j++
		}
		if digit {
			b = append(b, '#')
		} else {
			b = append(b, s[i:j]...)
		}
		i = j
	}
	return b
}

func isWordByte(c byte) bool { return isLetter(c) || c >= '0' && c <= '9' || c == '_' }

func (a *lineAn) finish(pv *Preview) []section {
	if len(a.line) > 0 || a.sawBytes && a.lines == 0 {
		a.endLine()
	}
	f := &pv.Facts
	f.Lines = a.lines
	if a.md {
		return a.markdownSections(f)
	}
	var secs []section
	if a.leveled > 0 && a.leveled*10 >= a.lines {
		secs = a.logSections(f)
	} else {
		f.Format = "text"
		secs = append(secs, section{prioHead, fmt.Sprintf("Text, %d lines (%s).\n", a.lines, humanSize(f.Size))})
	}
	if top := a.topTemplates(); len(top) > 0 {
		secs = append(secs, section{prioDetail, "Most repeated lines (# masks numbers and ids):\n" + strings.Join(top, "\n") + "\n"})
	}
	shown := int64(len(a.head))
	secs = append(secs, section{prioSample, "First lines:\n" + strings.Join(a.head[:min(len(a.head), 4)], "\n") + "\n"})
	if len(a.head) > 4 {
		secs = append(secs, section{prioExtra, strings.Join(a.head[4:], "\n") + "\n"})
	}
	if rest := a.lines - shown; rest > 0 {
		n := min(rest, tailLines)
		var tail []string
		for i := a.lines - n; i < a.lines; i++ {
			tail = append(tail, clip(validText(a.tail[i%tailLines]), 200))
		}
		secs = append(secs, section{prioSample - 1, fmt.Sprintf("Last lines (of %d):\n%s\n", a.lines, strings.Join(tail, "\n"))})
	}
	return secs
}

// markdownSections describe a Markdown file: its size, title, outline
// and an excerpt.
func (a *lineAn) markdownSections(f *Facts) []section {
	f.Format, f.Title = "markdown", a.title
	secs := []section{{prioHead, fmt.Sprintf("Markdown, %d lines (%s), %d headings, %d code blocks.\n", a.lines, humanSize(f.Size), len(a.headings), a.fences)}}
	if a.title != "" {
		secs = append(secs, section{prioFacts, "Title: " + a.title + "\n"})
	}
	if len(a.headings) > 0 {
		secs = append(secs, section{prioDetail, "Outline:\n" + strings.Join(a.headings, "\n") + "\n"})
	}
	if a.excerpt.Len() > 0 {
		secs = append(secs, section{prioSample, "Excerpt: " + clip(a.excerpt.String(), excerptBytes) + "\n"})
	}
	return secs
}

// logSections head the description of a log (a text whose lines mostly
// carry a level): its size, how many lines each level has, most severe
// first, and the first errors.
func (a *lineAn) logSections(f *Facts) []section {
	f.Format, f.Levels = "log", a.levels
	var lv []string
	for _, k := range []string{"FATAL", "PANIC", "CRITICAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"} {
		if n := a.levels[k]; n > 0 {
			lv = append(lv, fmt.Sprintf("%s %d", k, n))
		}
	}
	secs := []section{{prioHead, fmt.Sprintf("Log, %d lines (%s). Levels: %s.\n", a.lines, humanSize(f.Size), strings.Join(lv, ", "))}}
	if len(a.errs) > 0 {
		secs = append(secs, section{prioFacts, "First errors:\n" + strings.Join(a.errs, "\n") + "\n"})
	}
	return secs
}

// topTemplates lists the templates seen more than once, most first.
func (a *lineAn) topTemplates() []string {
	type kv struct {
		t string
		c *tmplCount
	}
	var all []kv
	for t, c := range a.tmpl {
		if c.n > 1 {
			all = append(all, kv{t, c})
		}
	}
	slices.SortFunc(all, func(x, y kv) int {
		if x.c.n != y.c.n {
			return int(y.c.n - x.c.n)
		}
		return int(x.c.first - y.c.first)
	})
	var out []string
	for _, x := range all[:min(len(all), shownTemplate)] {
		out = append(out, fmt.Sprintf("%d× %s", x.c.n, clip(strings.ToValidUTF8(x.t, "\uFFFD"), 160)))
	}
	return out
}
