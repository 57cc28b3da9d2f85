package offload

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"io"
	"strconv"
	"strings"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/preview/jsonesc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Spills resolves the string literals the transport moved out of memory
// while a result streamed in (package spill): such a literal is a marker,
// a short string that stands for bytes waiting on disk. The offloader
// stores them from there, so an output of any size is never held whole.
// Implementations must be safe for concurrent use.
type Spills interface {
	// Lookup returns the string a marker literal (quotes included) stands
	// for; ok is false for any other literal.
	Lookup(lit []byte) (s Spilled, ok bool)
	// ExpandedLen is len(raw) with every marker counted at the size of
	// the literal it stands for.
	ExpandedLen(raw []byte) int64
	// Expand writes raw with every marker replaced by its literal.
	Expand(w io.Writer, raw []byte) error
	// Release frees the spilled string of a marker literal now.
	Release(lit []byte)
}

// Spilled is one spilled value: a string, or an array the transport moved
// out whole (many small items: rows, content items).
type Spilled interface {
	// Len is the value's length as sent (a string: escaped, without
	// quotes).
	Len() int64
	// Kind is "string" or "array".
	Kind() string
	// Text returns a new reader of a string's value (escapes decoded).
	Text() io.Reader
	// Base64 returns a new reader of a string's value decoded as
	// standard base64 (padded or not, line breaks ignored); a malformed
	// encoding is a read error.
	Base64() io.Reader
	// Raw returns a new reader of the value as sent (a string: without
	// its quotes).
	Raw() io.Reader
	// First is an array's first elements as a JSON array, small (tens of
	// KiB at most); nil for a string.
	First() []byte
}

// lits reads the string literals of results, spilled or not. The zero
// value reads only literals held in memory.
type lits struct{ s Spills }

// spilled returns the spilled value lit stands for, if lit is a marker.
func (l lits) spilled(lit []byte) (Spilled, bool) {
	if l.s == nil {
		return nil, false
	}
	return l.s.Lookup(lit)
}

// array returns the spilled array v stands for.
func (l lits) array(v []byte) (Spilled, bool) {
	s, ok := l.spilled(v)
	return s, ok && s.Kind() == "array"
}

// str returns the spilled string lit stands for.
func (l lits) str(lit []byte) (Spilled, bool) {
	s, ok := l.spilled(lit)
	return s, ok && s.Kind() != "array"
}

// open returns a reader of the value of lit (quotes included).
func (l lits) open(lit []byte) io.Reader {
	if s, ok := l.str(lit); ok {
		if r := earlyOf(s).open(false); r != nil {
			return r
		}
		return s.Text()
	}
	return newStringReader(lit)
}

// binary returns a reader of lit's value decoded from base64.
func (l lits) binary(lit []byte) io.Reader {
	if s, ok := l.str(lit); ok {
		if r := earlyOf(s).open(true); r != nil {
			return r
		}
		return s.Base64()
	}
	return base64Decoder(newStringReader(lit))
}

// Registry is the spill package's process-wide registry of spilled
// strings, as a Rewriter asks it (Options.Spills). The zero value is
// ready; it is safe for concurrent use.
type Registry struct{}

// Lookup is spill.Lookup.
func (Registry) Lookup(lit []byte) (Spilled, bool) {
	if s, ok := spill.Lookup(lit); ok {
		return s, true
	}
	return nil, false
}

// Release releases the string lit stands for, if it is one.
func (Registry) Release(lit []byte) {
	if s, ok := spill.Lookup(lit); ok {
		s.Release()
	}
}

// ExpandedLen is spill.ExpandedLen.
func (Registry) ExpandedLen(raw []byte) int64 { return spill.ExpandedLen(raw) }

// Expand is spill.Expand.
func (Registry) Expand(w io.Writer, raw []byte) error { return spill.Expand(w, raw) }

// early returns the early work of lit, a spilled string, if it has any.
func (l lits) early(lit []byte) *early {
	s, ok := l.str(lit)
	if !ok {
		return nil
	}
	return earlyOf(s)
}

// earlyOf returns the early work of a spilled string, nil if none.
func earlyOf(s Spilled) *early {
	t, ok := s.(interface{ Tap() spill.Tap })
	if !ok {
		return nil
	}
	e, _ := t.Tap().(*early)
	return e
}

// open returns a reader of the string's value as staged while it
// arrived: its text, or with b64 its bytes decoded from base64. nil when
// there is no such copy (the caller decodes the spilled string).
func (e *early) open(b64 bool) io.Reader {
	if e == nil || e.base64 != b64 {
		return nil
	}
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stg == nil {
		return nil
	}
	return artifact.StagedReader(e.stg.w)
}

// base64Decoder decodes standard base64, the encoding MCP gives binary
// data.
func base64Decoder(r io.Reader) io.Reader { return base64.NewDecoder(base64.StdEncoding, r) }

// len is lit's length as sent, without quotes.
func (l lits) len(lit []byte) int64 {
	if s, ok := l.str(lit); ok {
		return s.Len()
	}
	return int64(len(lit) - 2)
}

// rawLen is what raw (a value of the result) weighs as the client would
// receive it.
func (l lits) rawLen(raw []byte) int64 {
	if l.s == nil {
		return int64(len(raw))
	}
	return l.s.ExpandedLen(raw)
}

// reader returns a reader of raw as the client would receive it.
func (l lits) reader(raw []byte) io.Reader {
	if l.s == nil || l.s.ExpandedLen(raw) == int64(len(raw)) {
		return bytes.NewReader(raw)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(l.s.Expand(pw, raw)) }()
	return pr
}

// same reports whether two literals hold the same value (a server that
// repeats its text in structuredContent), comparing spilled ones from
// disk.
func (l lits) same(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	sa, oka := l.str(a)
	sb, okb := l.str(b)
	if !oka || !okb || sa.Len() != sb.Len() {
		return false
	}
	return readersEqual(sa.Text(), sb.Text())
}

// readersEqual reports whether a and b read the same bytes.
func readersEqual(a, b io.Reader) bool {
	var ba, bb [32 << 10]byte
	for {
		na, ea := io.ReadFull(a, ba[:])
		nb, eb := io.ReadFull(b, bb[:])
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF)
		}
	}
}

// maxWalkDepth bounds how deep spilledValues looks: the transport
// bounds nesting far below it, and past it a marker stays as it is.
const maxWalkDepth = 512

// spilledValues calls f with the span and JSON pointer (below ptr) of
// every spilled value in v (valid JSON): strings, and arrays moved out
// whole.
func (l lits) spilledValues(v []byte, ptr string, depth int, f func(span [2]int, ptr string)) {
	if l.s == nil || len(v) == 0 || depth > maxWalkDepth {
		return
	}
	i := jsonrpc.SkipSpace(v, 0)
	switch v[i] {
	case '"':
		e := jsonrpc.SkipValue(v, i)
		if _, ok := l.spilled(v[i:e]); ok {
			f([2]int{i, e}, ptr)
		}
	case '{':
		for k := jsonrpc.SkipSpace(v, i+1); k < len(v) && v[k] == '"'; {
			kend := jsonrpc.SkipValue(v, k)
			name, _ := jsonrpc.Unquote(v[k:kend])
			s := jsonrpc.SkipSpace(v, jsonrpc.SkipSpace(v, kend)+1)
			e := jsonrpc.SkipValue(v, s)
			l.spilledValues(v[s:e], ptr+"/"+escapePointer(name), depth+1, func(sp [2]int, p string) {
				f([2]int{s + sp[0], s + sp[1]}, p)
			})
			k = jsonrpc.SkipSpace(v, e)
			if k < len(v) && v[k] == ',' {
				k = jsonrpc.SkipSpace(v, k+1)
			}
		}
	case '[':
		for n, el := range jsonrpc.Elements(v, [2]int{i, jsonrpc.SkipValue(v, i)}) {
			l.spilledValues(v[el[0]:el[1]], ptr+"/"+strconv.Itoa(n), depth+1, func(sp [2]int, p string) {
				f([2]int{el[0] + sp[0], el[0] + sp[1]}, p)
			})
		}
	}
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(s string) string { return pointerEscaper.Replace(s) }

// valueAt returns the value at a JSON pointer in doc (valid JSON), nil if
// there is none.
func valueAt(doc []byte, ptr string) []byte {
	v := doc[jsonrpc.SkipSpace(doc, 0):]
	v = v[:jsonrpc.SkipValue(v, 0)]
	if ptr == "" {
		return v
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch v[0] {
		case '{':
			v = jsonrpc.RawMember(v, tok)
		case '[':
			n, err := strconv.Atoi(tok)
			els := jsonrpc.Elements(v, [2]int{0, len(v)})
			if err != nil || n < 0 || n >= len(els) {
				return nil
			}
			v = v[els[n][0]:els[n][1]]
		default:
			return nil
		}
		if v == nil {
			return nil
		}
	}
	return v
}

// eachText calls f with the text of each item of a content array read
// from r, ok false for an item that is not a text item, until f returns
// false. text is valid until f returns; nothing is allocated per item
// (a content may hold millions).
func eachText(r io.Reader, f func(text []byte, ok bool) bool) {
	br := bufio.NewReaderSize(r, 32<<10)
	var el, text []byte
	if c, err := skipSpace(br); err != nil || c != '[' {
		return
	}
	for {
		c, err := skipSpace(br)
		if err != nil || c == ']' {
			return
		}
		br.UnreadByte()
		if el, err = nextValue(br, el[:0]); err != nil {
			f(nil, false)
			return
		}
		lit := jsonrpc.RawMember(el, "text")
		ok := bytes.Equal(jsonrpc.RawMember(el, "type"), []byte(`"text"`)) && len(lit) >= 2 && lit[0] == '"'
		text = text[:0]
		if ok {
			text = appendDecoded(text, lit)
		}
		if !f(text, ok) {
			return
		}
		if c, err = skipSpace(br); err != nil || c != ',' {
			return
		}
	}
}

// appendDecoded appends the value of the string literal lit to b.
func appendDecoded(b []byte, lit []byte) []byte {
	r := newStringReader(lit)
	var chunk [4096]byte
	for {
		n, err := r.Read(chunk[:])
		b = append(b, chunk[:n]...)
		if err != nil {
			return b
		}
	}
}

func skipSpace(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err != nil || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return c, err
		}
	}
}

// nextValue appends the next JSON value of br (valid JSON: the transport
// checked it) to b, without the byte that ends a number or literal.
func nextValue(br *bufio.Reader, b []byte) ([]byte, error) {
	depth, str := 0, jsonesc.Strings{}
	for {
		c, err := br.ReadByte()
		if err != nil {
			return b, err
		}
		switch {
		case str.Step(c):
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			br.UnreadByte()
			return b, nil
		}
		b = append(b, c)
		if depth == 0 && !str.In() && (c == '}' || c == ']' || c == '"') {
			return b, nil
		}
		if depth < 0 {
			return b, io.ErrUnexpectedEOF
		}
	}
}
