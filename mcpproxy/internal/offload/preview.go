package offload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// previewer watches an offloaded item's bytes go by on their way to the
// store and keeps what a preview needs: the head, the tail, line count
// and, for JSON, the top-level shape. It never holds the whole item.
type previewer struct {
	head  []byte
	tail  []byte // the last tailSize bytes, rotated
	size  int64
	lines int64

	// Top-level JSON shape, tracked with a small state machine.
	depth     int
	inStr     bool
	esc       bool
	top       byte // '[' or '{' once seen; 0 if not JSON-looking
	notJSON   bool
	items     int64 // top-level array elements or object members
	keys      []keySize
	keyStart  bool // next string at depth 1 in an object is a key
	expectVal bool // next token at depth 1 in an array starts an element
	keyBuf    []byte
	inKey     bool
	valStart  int64 // offset where the current member's value began
}

type keySize struct {
	name string
	size int64
}

const (
	headSize = 16 << 10
	tailSize = 2 << 10
	maxKeys  = 40
)

func (p *previewer) Write(b []byte) (int, error) {
	if room := headSize - len(p.head); room > 0 {
		p.head = append(p.head, b[:min(room, len(b))]...)
	}
	if len(b) >= tailSize {
		p.tail = append(p.tail[:0], b[len(b)-tailSize:]...)
	} else {
		p.tail = append(p.tail, b...)
		if len(p.tail) > tailSize {
			p.tail = append(p.tail[:0], p.tail[len(p.tail)-tailSize:]...)
		}
	}
	p.lines += int64(bytes.Count(b, []byte{'\n'}))
	if !p.notJSON {
		p.scan(b)
	}
	p.size += int64(len(b))
	return len(b), nil
}

// scan follows the JSON nesting to count top-level items and, for an
// object, the size of each member.
func (p *previewer) scan(b []byte) {
	for i, c := range b {
		off := p.size + int64(i)
		if p.inStr {
			if p.inKey && !p.esc && c != '"' && c != '\\' && len(p.keyBuf) < 128 {
				p.keyBuf = append(p.keyBuf, c)
			}
			switch {
			case p.esc:
				p.esc = false
			case c == '\\':
				p.esc = true
			case c == '"':
				p.inStr = false
				if p.inKey {
					p.inKey = false
					if len(p.keys) < maxKeys {
						p.keys = append(p.keys, keySize{name: string(p.keyBuf), size: -1})
					}
				}
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		if p.top == 0 {
			if c != '[' && c != '{' {
				p.notJSON = true
				return
			}
			p.top, p.depth, p.keyStart, p.expectVal = c, 1, c == '{', c == '['
			continue
		}
		if p.expectVal && p.depth == 1 && c != ']' {
			p.items++ // a top-level array element starts here
			p.expectVal = false
		}
		switch c {
		case '"':
			p.inStr = true
			if p.depth == 1 && p.top == '{' && p.keyStart {
				p.inKey, p.keyStart, p.keyBuf = true, false, p.keyBuf[:0]
				p.items++
			}
		case ':':
			if p.depth == 1 {
				p.valStart = off + 1
			}
		case '{', '[':
			p.depth++
		case '}', ']':
			p.depth--
			if p.depth == 0 {
				p.closeMember(off)
			}
		case ',':
			if p.depth == 1 {
				p.closeMember(off)
				p.keyStart, p.expectVal = p.top == '{', p.top == '['
				p.valStart = 0
			}
		}
	}
}

func (p *previewer) closeMember(off int64) {
	if p.top == '{' && len(p.keys) > 0 && p.keys[len(p.keys)-1].size < 0 && p.valStart > 0 {
		p.keys[len(p.keys)-1].size = off - p.valStart
	}
}

// jsonComplete reports whether the bytes were one JSON array or object.
func (p *previewer) jsonComplete() bool { return !p.notJSON && p.top != 0 && p.depth == 0 }

// body renders what the preview says of the stored bytes, within about
// budget bytes. kind is the content kind the item had.
func (p *previewer) body(kind, mime, sha256 string, budget int) string {
	var b strings.Builder
	switch {
	case kind == "image" || kind == "audio" || (kind == "resource" && !IsText(mime) && !utf8.Valid(p.head)):
		fmt.Fprintf(&b, "[%s offloaded: %s, %s, sha256 %s]\n", kind, mime, humanSize(p.size), sha256)
	case p.jsonComplete() && p.top == '[':
		fmt.Fprintf(&b, "JSON array of %d items (%s). First items:\n", p.items, humanSize(p.size))
		b.WriteString(firstItems(p.head, budget-b.Len()))
	case p.jsonComplete() && p.top == '{':
		fmt.Fprintf(&b, "JSON object with %d keys (%s):\n", p.items, humanSize(p.size))
		for _, k := range p.keys {
			fmt.Fprintf(&b, "  %q: %s\n", k.name, humanSize(max(k.size, 0)))
		}
		if p.items > int64(len(p.keys)) {
			fmt.Fprintf(&b, "  … and %d more keys\n", p.items-int64(len(p.keys)))
		}
	case isDelimited(mime, p.head):
		lines := splitLines(p.head, 6)
		rows := p.lines
		if p.size > 0 && !bytes.HasSuffix(p.tail, []byte("\n")) {
			rows++ // the last row has no newline
		}
		fmt.Fprintf(&b, "Table (%s) with %d data rows, %s. Header and first rows:\n", mimeOr(mime, "text/csv"), max(rows-1, 0), humanSize(p.size))
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	default:
		head := splitLines(p.head, 12)
		tail := lastLines(p.tail, 5)
		total := p.lines
		if !bytes.HasSuffix(p.tail, []byte("\n")) {
			total++
		}
		omitted := total - int64(len(head)) - int64(len(tail))
		fmt.Fprintf(&b, "Text, %d lines, %s. First lines:\n", total, humanSize(p.size))
		for _, l := range head {
			b.WriteString(l + "\n")
		}
		if omitted > 0 {
			fmt.Fprintf(&b, "[… %d lines omitted …]\nLast lines:\n", omitted)
			for _, l := range tail {
				b.WriteString(l + "\n")
			}
		}
	}
	if b.Len() <= budget {
		return b.String()
	}
	out := truncUTF8(b.String(), budget)
	if i := strings.LastIndexByte(out, '\n'); i > 0 {
		out = out[:i+1]
	}
	return out + "[…]\n"
}

// sentence says where the whole of what a preview shows is, and how to
// get it.
func sentence(size int64, mime, url string, expires time.Time, uri string) string {
	return fmt.Sprintf("The full content (%s, %s) is at %s until %s: fetch it with a plain HTTP GET (no MCP session needed), or read %s.",
		humanSize(size), mimeOr(mime, "application/octet-stream"), url, expires.UTC().Format(timeFormat), uri)
}

const timeFormat = time.RFC3339

// firstItems renders the first elements of a JSON array head within
// budget bytes, each compacted to one line.
func firstItems(head []byte, budget int) string {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return ""
	}
	var b strings.Builder
	for dec.More() && b.Len() < budget {
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			break // the head ends inside this item
		}
		var c bytes.Buffer
		if json.Compact(&c, raw) != nil {
			break
		}
		line := c.String()
		if len(line) > 400 {
			line = truncUTF8(line, 400) + "…"
		}
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

// isDelimited guesses CSV/TSV from the mime type or the first lines.
func isDelimited(mime string, head []byte) bool {
	mime, _, _ = strings.Cut(mime, ";")
	if mime == "text/csv" || mime == "text/tab-separated-values" {
		return true
	}
	if mime != "" && mime != "text/plain" {
		return false
	}
	lines := splitLines(head, 3)
	if len(lines) < 2 {
		return false
	}
	for _, sep := range []string{",", "\t"} {
		n := strings.Count(lines[0], sep)
		if n >= 1 && strings.Count(lines[1], sep) == n {
			return true
		}
	}
	return false
}

func splitLines(b []byte, n int) []string {
	var out []string
	for len(b) > 0 && len(out) < n {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		if len(rest) == 0 && len(b) == headSize {
			break // possibly cut short by the head's size
		}
		out = append(out, truncUTF8(strings.TrimSuffix(string(line), "\r"), 300))
		b = rest
	}
	return out
}

func lastLines(b []byte, n int) []string {
	b = bytes.TrimSuffix(b, []byte("\n"))
	lines := strings.Split(string(b), "\n")
	if len(lines) > 0 && len(b) == tailSize {
		lines = lines[1:] // the first is probably cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = truncUTF8(strings.TrimSuffix(l, "\r"), 300)
	}
	return lines
}

// truncUTF8 cuts s to at most n bytes without splitting a character.
func truncUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func mimeOr(m, def string) string {
	if m == "" {
		return def
	}
	return m
}
