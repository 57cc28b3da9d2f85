package preview

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spillway-dev/spillway/artifact/preview/jsonesc"
)

// Bounds of the JSON analysis.
const (
	maxFrames   = 64    // nesting levels analysed; deeper ones are only lexed
	maxNest     = 10000 // nesting levels lexed; deeper is an error
	maxNodes    = 512   // paths recorded (members, and first elements of arrays)
	maxTables   = 4     // arrays whose elements get per-field statistics
	maxScalar   = 256   // bytes kept of a string or number
	maxInterned = 4096  // member names shared between rows
	maxNames    = 30    // tree names kept per level
	maxPath     = 512   // bytes of a recorded path; deeper members are not recorded
	rootReserve = 128   // nodes kept for the root's members
	maxMembers  = 64    // members recorded per object below the root
	maxMaps     = 3     // objects watched as possible maps of objects
	maxMapDepth = 4     // nesting level of the deepest object so watched
	minMapKeys  = 8     // members of the smallest object counted as a map
)

// posNames name the columns of rows given as arrays.
var posNames = func() (n [maxColumns]string) {
	for i := range n {
		n[i] = fmt.Sprintf("[%d]", i)
	}
	return n
}()

// The lexer's states: where it is between tokens (sTop to sAfter), or
// inside which kind of token (sStr to sLit); sErr once the input is not
// JSON.
const (
	sTop      = iota // between top-level values
	sValue           // a value must come
	sArrFirst        // after '[': a value or ']'
	sObjFirst        // after '{': a key or '}'
	sKey             // after ',' in an object: a key
	sColon           // after a key
	sAfter           // after a value in a container
	sStr
	sEsc
	sU
	sNum
	sLit
	sErr
)

// vctx tells what a value is part of, so that its end can count it in
// the right places: its recorded path (if it has one), the table whose
// row it is (if any), and the field of a row it fills (if any).
type vctx struct {
	path    string
	tracked bool
	parent  int    // node index of the container holding it, -1 if none
	row     *table // the value is a row of this table
	fld     *field // the value is this field of a row
	fldName string
	level   int8 // 1: a row's member; 2: a member of an object in a row
	nameOf  bool // the value names a tree node
	inMap   bool // row is the table of an object that may be a map
}

// jframe is the analyser's state for one open container (array or
// object) among the first maxFrames levels.
type jframe struct {
	kind  byte
	start int64
	n     int64  // elements or members so far
	key   string // current member's name
	// keyField is the key's field when a row's member was found by its
	// position.
	keyField *field
	v        vctx
	node     int // node index, -1 if not recorded
	tab      *jtab
	// rowLevel is 1 when the container is a row of rowTab, 2 when it is
	// an object inside such a row (its members are named rowPrefix.key),
	// and 0 otherwise.
	rowLevel  int8
	rowTab    *table
	rowPrefix string
	// capting is set while the container's text is copied into capt,
	// from captFrom in the current write: a row's sample, or the text of
	// a small recorded container.
	capting  bool
	captFrom int
	// Tree detection: nodeDepth is the container's depth as a tree node,
	// isChildren marks a "children" array, hasKids a node with children.
	nodeDepth  int // depth of a tree node, -1 if not a node
	isChildren bool
	hasKids    bool
	// nodesAtOpen is the node count when the node was counted.
	nodesAtOpen int64
	// rowOf is the table whose row rowAt opened in this slot, which it
	// then sets only where rows differ; nil if push set the slot.
	rowOf *table
	// The buffers belong to the frame's slot, not to the frame: they
	// outlive it, so that a million rows reuse one buffer and clearing a
	// frame is quick.
	*frameBufs
}

// frameBufs holds the buffers of one frame slot, reused by every frame
// opened in that slot.
type frameBufs struct {
	capt []byte
	name []byte // the node's "name" or "path", clipped
	// memo records, by position, the members that the last object at
	// this level of a row had (rowLevel 2), so that the next row's
	// object can match them without building their names.
	memo []keyMemo
}

// keyMemo remembers one member of an object in a row: the row's table,
// the object's field name (prefix), the member's key and its field
// ("prefix.key"). Rows mostly repeat their members, so the next row's key
// finds its field here without building and looking up its name.
type keyMemo struct {
	tab         *table
	prefix, key string
	f           *field
	spelt       spelling
}

// jnode is a recorded path: for a container its size in bytes and its
// number of elements or members, for a scalar its JSON text.
type jnode struct {
	path   string
	parent int
	kind   byte // '{', '[' or 's'
	size   int64
	n      int64
	value  string // JSON text of a scalar
}

type jtab struct {
	isMap bool // an object whose members are rows
	path  string
	t     *table
	done  bool
	size  int64
}

// jsonAn tokenizes and analyses JSON incrementally, in one pass with
// bounded state. It reads one value (an array or object) or a sequence
// of them (NDJSON). A token that lies whole in one write is read in
// place, plain bytes in runs, and a row's members at once when they are
// spelt as in the last row (see member). A token cut by the end of a
// write is carried over in buf, so the result does not depend on how the
// input is split into writes.
type jsonAn struct {
	st       uint8
	kinds    []byte // open containers, for matching; at most maxNest
	frames   []jframe
	bufs     [maxFrames]frameBufs // the frames' buffers, by slot
	buf      []byte
	isKey    bool
	uLeft    int
	uVal     rune
	lit      string
	litI     int
	litTyp   int
	off      int64 // offset of the current write's first byte
	err      string
	tops     int64
	topKind  byte
	topText  string
	cur      vctx
	nodes    []jnode
	tabs     []*jtab
	nd       *table // top-level values as rows (NDJSON)
	intern   map[string]string
	keyBuf   []byte
	tree     Tree
	maxDepth int
	names    [2][]string
	subtree  [2][]int64 // nodes under each named node, itself included
	// While rowAt reads a row's members (lazyName), the name a member
	// gives the row is where it lies in the write (pendName), not copied.
	lazyName bool
	pendName []byte
	nodesAt  [2]int64
}

func newJSON() *jsonAn {
	return &jsonAn{nd: newTable(), intern: map[string]string{}}
}

func (a *jsonAn) fail(i int, what string) {
	if a.st != sErr {
		a.err = fmt.Sprintf("byte %d: %s", a.off+int64(i), what)
		a.st = sErr
	}
}

// numByte tells the bytes that may be part of a number.
var numByte = func() (t [256]bool) {
	for _, c := range []byte("0123456789.eE+-") {
		t[c] = true
	}
	return t
}()

// plainRun returns the index of the first '"' or '\\' in b from i, or
// len(b): eight bytes at a time, then one at a time.
func plainRun(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, e := x^('"'*ones), x^('\\'*ones)
		// The lowest byte flagged is the first that is zero in q or e:
		// a false flag (from a borrow) sits only above a true one.
		if m := ((q-ones)&^q | (e-ones)&^e) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && !strStop[b[i]] {
		i++
	}
	return i
}

// strStop tells the bytes that end a run of a string's plain bytes.
var strStop = [256]bool{'"': true, '\\': true}

func isWS(c byte) bool { return wsByte[c] }

var wsByte = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// write reads the next bytes of the input. Its loop takes one byte at a
// time only between tokens; a token's bytes are read in runs by the
// state's step (strRun, numRun, litRun, comma, member, rowAt).
func (a *jsonAn) write(b []byte) {
	// The last rows that lie in b are copied before b goes back to the
	// writer (rowAt leaves them there).
	defer a.keepLast()
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch a.st {
		case sErr:
			return
		case sStr:
			i = a.strRun(b, i)
		case sEsc, sU:
			a.escape(c, i)
		case sNum:
			i = a.numRun(b, i)
		case sLit:
			i = a.litRun(b, i)
		case sValue:
			if !isWS(c) {
				a.startValue(c, b, i)
			}
		case sAfter:
			switch {
			case isWS(c):
			case c == ',':
				i = a.comma(b, i)
			default:
				a.structural(c, b, i)
			}
		default:
			// The other states between tokens: spaces are skipped here.
			if !isWS(c) {
				i = a.token(c, b, i)
			}
		}
	}
	a.flushCaptures(b)
	a.off += int64(len(b))
}

// token reads the byte c at b[i], not a space, in a state between tokens
// other than sValue and sAfter: after a key (the colon), at an array's or
// object's start, before a key, or between top-level values. It returns
// the index of the last byte read.
func (a *jsonAn) token(c byte, b []byte, i int) int {
	switch a.st {
	case sColon:
		if c == ':' {
			a.st = sValue
		} else {
			a.fail(i, fmt.Sprintf("expected ':', found %q", c))
		}
		return i
	case sArrFirst:
		if e := a.elemValue(b, i); e > 0 {
			return e
		}
	case sObjFirst, sKey:
		if c == '"' {
			if j := a.member(b, i+1); j > 0 {
				return j
			}
		}
	}
	a.structural(c, b, i)
	return i
}

// strRun reads a string's bytes from b[i] up to its closing quote or its
// next escape, and returns the index of the last byte read.
func (a *jsonAn) strRun(b []byte, i int) int {
	j := plainRun(b, i)
	if j < len(b) && b[j] == '"' && len(a.buf) == 0 {
		// The whole string is here, unescaped: no copy.
		a.endString(b[i:min(j, i+maxScalar)])
		if a.st == sColon && j+1 < len(b) && b[j+1] == ':' {
			a.st, j = sValue, j+1 // a key's colon, read at once
		}
		return j
	}
	a.keep(b[i:j])
	if j == len(b) {
		return j
	}
	if b[j] == '"' {
		a.endString(a.buf)
	} else {
		a.st = sEsc
	}
	return j
}

// escape reads byte c (at index i) of an escape in a string: the letter
// after the backslash (sEsc) or a hex digit of a \u escape (sU).
func (a *jsonAn) escape(c byte, i int) {
	if a.st == sEsc {
		a.st = sStr
		switch e := jsonesc.Short(c); {
		case e != 0:
			a.keep([]byte{e})
		case c == 'u':
			a.st, a.uLeft, a.uVal = sU, 4, 0
		default:
			a.fail(i, "bad escape")
		}
		return
	}
	// Each \u escape is one rune: a surrogate, even one of a pair, is
	// kept as U+FFFD.
	d := jsonesc.HexDigit(c)
	if d < 0 {
		a.fail(i, "bad \\u escape")
		return
	}
	a.uVal = a.uVal<<4 | d
	if a.uLeft--; a.uLeft == 0 {
		a.keep(utf8.AppendRune(nil, a.uVal))
		a.st = sStr
	}
}

// numRun reads a number's bytes from b[i]. It returns the index of the
// last byte that is part of the number, so that the byte that ends it is
// read next as a token of its own.
func (a *jsonAn) numRun(b []byte, i int) int {
	j := i
	for j < len(b) && numByte[b[j]] {
		j++
	}
	if j == len(b) {
		a.keep(b[i:j])
		return j
	}
	var text []byte
	if i > 0 && len(a.buf) == 1 {
		// The number began at b[i-1]: it is all here, no copy.
		text = b[i-1 : min(j, i-1+maxScalar)]
	} else {
		a.keep(b[i:j])
		text = a.buf
	}
	if !a.endNumber(text, j) {
		return j
	}
	return j - 1 // b[j] ends the number: read it again
}

// litRun reads the bytes of a literal (true, false, null) from b[i]: the
// rest of it at once if it lies whole in b, else byte by byte. It
// returns the index of the last byte read.
func (a *jsonAn) litRun(b []byte, i int) int {
	if rest := a.lit[a.litI:]; a.litI == 1 && len(b)-i >= len(rest) && string(b[i:i+len(rest)]) == rest {
		a.endScalar(a.litTyp, a.lit)
		return i + len(rest) - 1
	}
	if b[i] != a.lit[a.litI] {
		a.fail(i, "bad literal")
		return i
	}
	if a.litI++; a.litI == len(a.lit) {
		a.endScalar(a.litTyp, a.lit)
	}
	return i
}

// comma reads the comma at b[i] after a value in a container, and what
// it can of the next member or element: in an object, the next key and
// maybe its value (member); in an array, the next row (rowAt) or element
// (elemValue). It returns the index of the last byte read.
func (a *jsonAn) comma(b []byte, i int) int {
	if a.kinds[len(a.kinds)-1] != '{' {
		a.st = sValue
		if e := a.rowAt(b, i+1); e > 0 {
			return e
		}
		if e := a.elemValue(b, i+1); e > 0 {
			return e
		}
		return i
	}
	if i+1 >= len(b) || b[i+1] != '"' {
		a.st = sKey
		return i
	}
	if j := a.member(b, i+2); j > 0 {
		return j // the key and its colon too, and maybe its value
	}
	// The next key's quote, read at once.
	a.st, a.isKey, a.buf = sStr, true, a.buf[:0]
	return i + 1
}

// keepLast copies the last row of each table, if it lies in the current
// write.
func (a *jsonAn) keepLast() {
	for _, t := range a.tabs {
		t.t.keepLast()
	}
}

func (a *jsonAn) structural(c byte, b []byte, i int) {
	switch a.st {
	case sArrFirst:
		if c == ']' {
			a.close(c, b, i)
			return
		}
		a.startValue(c, b, i)
	case sTop:
		a.startValue(c, b, i)
	case sObjFirst, sKey:
		switch {
		case c == '"':
			a.st, a.isKey, a.buf = sStr, true, a.buf[:0]
		case c == '}' && a.st == sObjFirst:
			a.close(c, b, i)
		default:
			a.fail(i, fmt.Sprintf("expected a key, found %q", c))
		}
	case sAfter: // a comma is read by write
		top := a.kinds[len(a.kinds)-1]
		switch {
		case c == ']' && top == '[' || c == '}' && top == '{':
			a.close(c, b, i)
		default:
			a.fail(i, fmt.Sprintf("expected ',' or a closing bracket, found %q", c))
		}
	}
}

// flatArray reads an array of scalars whole in b from k, written without
// spaces (a row's tags), as the lexer reads a member's value that is an
// array whose elements are neither recorded nor rows: it counts the array
// in f. It returns the index of its ']', or 0 if there is no such array
// there (the lexer then reads it, to the same result; reading its
// scalars counts nothing).
func (a *jsonAn) flatArray(b []byte, k int, f *field) int {
	if k >= len(b) || b[k] != '[' || len(a.kinds) >= maxNest || len(a.frames) >= maxFrames {
		return 0
	}
	j := k + 1
	if j < len(b) && b[j] == ']' {
		countArray(f)
		return j
	}
	for {
		// An element is only read: a string's end is all there is to
		// find.
		var e int
		if j < len(b) && b[j] == '"' {
			if e = plainRun(b, j+1); e == len(b) || b[e] != '"' {
				return 0
			}
		} else if e = a.scalarAt(b, j, nil, false); e == 0 {
			return 0
		}
		if e+1 >= len(b) {
			return 0
		}
		switch b[e+1] {
		case ']':
			countArray(f)
			return e + 1
		case ',':
			j = e + 2
		default:
			return 0
		}
	}
}

// likelyKey is the key the next member of the row p most likely has: the
// one the last row had at this position, with its field and spelling;
// sp is nil if there is none.
func (p *jframe) likelyKey() (key string, f *field, sp *spelling) {
	n := p.n
	if p.rowLevel == 1 && n < int64(len(p.rowTab.order)) {
		if f = p.rowTab.order[n]; f != nil {
			return f.name, f, &f.spelt
		}
	} else if p.rowLevel == 2 && n < int64(len(p.memo)) {
		if m := &p.memo[n]; m.tab == p.rowTab && m.prefix == p.rowPrefix {
			return m.key, m.f, &m.spelt
		}
	}
	return
}

// countArray is f.add(tArray, ""), without its calls.
func countArray(f *field) {
	if f != nil {
		f.present++
		f.types[tArray]++
	}
}

// member reads, where it lies whole in b from k with its closing quote
// and a colon, the key that a row's object (or an object in a row) most
// likely has at this position: the one the last row had there; as
// endString would, it sets the key and its field. If the key is not
// that one, is not all here or is spelt otherwise, it returns 0, and the
// lexer reads the key, to the same result.
//
// It then reads the member's value too, where it lies whole in b and is
// a scalar (see scalarAt) or an array of them (see flatArray), and
// counts it in the key's field as startValue, beginValue and the value's
// end would. It leaves the value to the lexer if it is of another kind
// or not all here, or if the row's object is recorded as a path or may
// be a map. After a value, it reads the members that follow the same
// way, as long as it can.
//
// It returns the index of the last byte read, a colon's or a value's.
func (a *jsonAn) member(b []byte, k int) int {
	p := a.parentFrame()
	if p == nil || p.rowLevel == 0 {
		return 0
	}
	values := !p.v.tracked && p.tab == nil
	last := 0 // the last value's end
loop:
	for {
		key, f, sp := p.likelyKey()
		if sp == nil {
			break
		}
		e := k + len(key)
		switch {
		case sp.mask != 0 && k+8 <= len(b):
			// A short key: its bytes, quote and colon in one word.
			if le64(b[k:])&sp.mask != sp.word {
				break loop
			}
		case !sp.plain || e+1 >= len(b) || b[e] != '"' || b[e+1] != ':' || string(b[k:e]) != key:
			break loop
		}
		p.key, p.keyField = key, f
		if !values {
			a.st = sValue
			return e + 1
		}
		nameOf := sp.mayName && p.nodeDepth <= 1 && (sp.isName || len(p.name) == 0 && a.pendName == nil)
		end := a.scalarAt(b, e+2, f, nameOf)
		if end == 0 && !sp.isChildren {
			end = a.flatArray(b, e+2, f)
		}
		if end == 0 {
			a.st = sValue
			return e + 1
		}
		p.n++
		// The next member, if a comma and its key's quote follow.
		if end+2 >= len(b) || b[end+1] != ',' || b[end+2] != '"' {
			a.st = sAfter
			return end
		}
		last, k = end, end+3
	}
	if last > 0 {
		a.st = sAfter // a value read, and the next key not
	}
	return last
}

// rowAt reads, where it lies in b from k (after a comma), the next
// element of an array whose elements are a table's rows, if it is an
// object that begins with a key: it opens the row as push would, reads
// its members (see member) and, if they end at its '}', closes it as
// close would, and then reads the row after the comma that follows the
// same way. So a run of rows costs one call, not a turn of write's loop
// per byte between tokens, and a row's frame is set only where it
// differs from the last row's in the same slot. It returns the index of
// the last byte read (a '}' or a comma after one), 0 if no such row
// begins there (the lexer reads what is there).
// Not for a row that is also recorded, a column of the rows above it or
// a tree node, which the lexer counts as it opens them.
func (a *jsonAn) rowAt(b []byte, k int) int {
	p := a.parentFrame()
	if p == nil || p.tab == nil || p.kind != '[' || p.isChildren || p.rowLevel == 1 && p.n < maxColumns || p.v.tracked && p.n == 0 {
		return 0
	}
	n := len(a.frames)
	if n >= maxFrames || n == cap(a.frames) || len(a.kinds) >= maxNest {
		return 0 // the lexer's push knows these
	}
	t := p.tab.t
	at := 0 // the last byte read: a closed row's '}' or the comma after it
	for {
		j := k
		for j < len(b) && wsByte[b[j]] {
			j++
		}
		if j+1 >= len(b) || b[j] != '{' || b[j+1] != '"' {
			return at
		}
		p.n++ // its index, as beginValue counts it
		a.openRow(t, n, j)
		// The row's name is kept only if the row is not closed here: a
		// row closed here has no children, and is no tree node.
		a.lazyName = true
		end, closed := a.rowObjects(b, a.member(b, j+2))
		if !closed {
			return end
		}
		a.lazyName = false
		if a.st != sAfter || end+1 >= len(b) || b[end+1] != '}' {
			a.keepPendName()
			if end == 0 {
				return j // the first key is not the last row's: the lexer reads it
			}
			return end
		}
		a.pendName = nil
		// Nothing in the row is a tree's: close's work is the row's count.
		a.kinds, a.frames = a.kinds[:n], a.frames[:n]
		t.addRowAt(tObject, b[j:min(end+2, j+sampleRowBytes)])
		a.st, at = sAfter, end+1
		// The next row, if a comma follows: a run of rows is read in one
		// call.
		if at+1 >= len(b) || b[at+1] != ',' {
			return at
		}
		a.st, at, k = sValue, at+1, at+2
	}
}

// objectAt reads, by the lexer's own steps, an object whose '{' is b[k]
// and which begins with a key: it opens it (startValue), reads its
// members (member) and, if they end at its '}', closes it (close). It
// returns the index of the last byte read, and whether the object was
// closed.
func (a *jsonAn) objectAt(b []byte, k int) (int, bool) {
	a.startValue('{', b, k)
	if a.st != sObjFirst {
		return k, false
	}
	m := a.member(b, k+2)
	if m == 0 {
		return k, false
	}
	if a.st != sAfter || m+1 >= len(b) || b[m+1] != '}' {
		return m, false
	}
	a.close('}', b, m+1)
	return m + 1, true
}

// elemValue reads a scalar element of an array whose elements are
// neither recorded nor rows, where it lies whole in b from k (see
// scalarAt), as member reads a value: a scalar there is only read. It
// returns the index of its last byte, 0 if there is no such scalar there.
func (a *jsonAn) elemValue(b []byte, k int) int {
	p := a.parentFrame()
	if p == nil || p.kind != '[' || p.v.tracked || p.tab != nil || p.rowLevel != 0 {
		return 0
	}
	end := a.scalarAt(b, k, nil, false)
	if end > 0 {
		p.n++
		a.st = sAfter
	}
	return end
}

// openRow opens, in frame slot n, the row of t whose '{' is at b[j], as
// push would. A slot whose last frame was a row of t opened here keeps
// what rows share, and only what a row changes in its life is reset.
func (a *jsonAn) openRow(t *table, n, j int) {
	a.kinds = append(a.kinds, '{')
	a.st = sObjFirst
	a.frames = a.frames[:n+1]
	fr := &a.frames[n]
	if fr.rowOf != t {
		*fr = jframe{}
		fr.kind, fr.v, fr.node = '{', vctx{parent: -1, row: t}, -1
		fr.frameBufs = &a.bufs[n]
		fr.rowLevel, fr.rowTab, fr.capting, fr.rowOf = 1, t, true, t
	}
	fr.start, fr.captFrom, fr.n, fr.key, fr.keyField = a.off+int64(j), j, 0, "", nil
	fr.nodeDepth, fr.nodesAtOpen, fr.hasKids = -1, 0, false
	fr.capt, fr.name = fr.capt[:0], fr.name[:0]
}

// rowObjects goes on reading a row after member read up to end: a
// member whose value is an object (a row's "addr") is read here too, by
// the lexer's own steps, and the row's members after it. It returns the
// index of the last byte read, and closed false if an object was not
// closed in b (rowAt then stops there).
func (a *jsonAn) rowObjects(b []byte, end int) (int, bool) {
	for end > 0 && a.st == sValue && end+2 < len(b) && b[end+1] == '{' && b[end+2] == '"' {
		a.keepPendName() // the row's name is the row frame's: kept first
		a.lazyName = false
		e, closed := a.objectAt(b, end+1)
		if !closed {
			return e, false
		}
		a.lazyName = true
		if end = e; end+2 >= len(b) || b[end+1] != ',' || b[end+2] != '"' {
			break
		}
		if m := a.member(b, end+3); m > 0 {
			end = m
		}
	}
	return end, true
}

// keepPendName gives the row its name, if a member gave it one that
// still lies in the write (pendName).
func (a *jsonAn) keepPendName() {
	if a.pendName != nil {
		setName(a, a.pendName)
		a.pendName = nil
	}
}

// scalarAt reads a scalar whole in b from k, a string without escapes, a
// number or a literal, and counts it in f (which may be nil); nameOf: a
// string names the innermost container. It returns the index of the
// scalar's last byte, 0 if there is no such scalar there.
func (a *jsonAn) scalarAt(b []byte, k int, f *field, nameOf bool) int {
	if k >= len(b) {
		return 0
	}
	switch c := b[k]; {
	case c == '"':
		j := plainRun(b, k+1)
		if j == len(b) || b[j] != '"' {
			return 0
		}
		s := b[k+1 : min(j, k+1+maxScalar)]
		addRead(f, tString, s, 0)
		switch {
		case !nameOf:
		case a.lazyName:
			a.pendName = s // rowAt keeps it if it must
		default:
			setName(a, s)
		}
		return j
	case c == '-' || digit(c):
		if nameOf {
			return 0
		}
		j, isFloat, v := plainNumber(b, k)
		if j == 0 {
			// Not a number plainNumber reads: an exponent, more than 15
			// digits, or one cut by b's end.
			if j, isFloat, v = otherNumber(b, k); j == 0 {
				return 0
			}
		}
		typ := tInt
		if isFloat {
			typ = tFloat
		}
		addRead(f, typ, b[k:j], v)
		return j - 1
	}
	return literalAt(b, k, f)
}

// literalAt reads a literal (true, false, null) whole in b from k, and
// counts it in f (which may be nil). It returns the index of its last
// byte, or 0 if there is none there. It reads the literal's first four
// bytes as one word, and false's e; it needs a byte after the literal,
// so that one cut by b's end is left to the lexer.
func literalAt(b []byte, k int, f *field) int {
	if len(b)-k < 5 {
		return 0
	}
	switch le32(b[k:]) {
	case wordTrue:
		addBool(f, 1)
		return k + 3
	case wordFals:
		if b[k+4] == 'e' {
			addBool(f, 0)
			return k + 4
		}
	case wordNull:
		if f != nil {
			f.present++
			f.types[tNull]++
		}
		return k + 3
	}
	return 0
}

// otherNumber reads a number whole in b from k that plainNumber does
// not: it returns the index of the byte after it, whether it has a
// fraction or an exponent, and its value; j is 0 if there is no number
// there or it may go on past b's end.
func otherNumber(b []byte, k int) (j int, isFloat bool, v float64) {
	j = k + 1
	for j < len(b) && numByte[b[j]] {
		j++
	}
	if j == len(b) || j-k >= maxScalar {
		return 0, false, 0
	}
	ok, isFloat, v := scanNumber(b[k:j])
	if !ok {
		return 0, false, 0
	}
	return j, isFloat, v
}

// The first four bytes of the literals as le32 reads them.
var wordTrue, wordFals, wordNull = le32("true"), le32("fals"), le32("null")

// plainNumber reads a number whole in b from k in the shape most tool
// outputs hold, -?(0|[1-9][0-9]*)(\.[0-9]+)? with at most 15 digits, and
// values it as scanNumber does, in one pass: it returns the index after
// it, whether it has a fraction, and its value. It returns 0 for any
// other number, or one not ended in b (scanNumber reads those).
func plainNumber(b []byte, k int) (end int, isFloat bool, v float64) {
	j := k
	if b[j] == '-' {
		j++
	}
	start := j
	var m int64
	for ; j < len(b) && digit(b[j]); j++ {
		m = m*10 + int64(b[j]-'0')
	}
	n, frac := j-start, 0
	if n == 0 || n > 1 && b[start] == '0' {
		return 0, false, 0
	}
	if j < len(b) && b[j] == '.' {
		j++
		f := j
		for ; j < len(b) && digit(b[j]); j++ {
			m = m*10 + int64(b[j]-'0')
		}
		if frac = j - f; frac == 0 {
			return 0, false, 0
		}
	}
	if j == len(b) || numByte[b[j]] || n+frac > 15 {
		return 0, false, 0
	}
	v = float64(m)
	if frac > 0 {
		v /= pow10[frac]
	}
	if b[k] == '-' {
		v = -v // -0 stays -0, as ParseFloat has it
	}
	return j, frac > 0, v
}

// spelling is how member finds a key in JSON text: plain if the key
// needs no escape (its text is then the key itself); for a plain key of
// at most 6 bytes, word holds its text with the closing quote and a colon
// as le64 reads them, and mask covers those bytes. isName and isPath tell
// the keys whose value may name a tree node, isChildren the one whose
// value may hold its children.
type spelling struct {
	plain                      bool
	isName, isPath, isChildren bool
	mayName                    bool // isName or isPath, one test for most keys
	word, mask                 uint64
}

func spell(key string) spelling {
	sp := spelling{plain: !strings.ContainsAny(key, "\"\\"), isName: key == "name", isPath: key == "path", isChildren: key == "children"}
	sp.mayName = sp.isName || sp.isPath
	if sp.plain && len(key) <= 6 {
		var w [8]byte
		n := copy(w[:], key)
		w[n], w[n+1] = '"', ':'
		sp.word, sp.mask = le64(w[:]), ^uint64(0)>>(64-8*(n+2))
	}
	return sp
}

// keep appends to the current scalar, up to maxScalar bytes.
func (a *jsonAn) keep(p []byte) {
	if room := maxScalar - len(a.buf); room > 0 {
		a.buf = append(a.buf, p[:min(room, len(p))]...)
	}
}

// parentFrame is the innermost analysed container, nil at the top level
// or below maxFrames.
func (a *jsonAn) parentFrame() *jframe {
	if len(a.frames) == 0 || len(a.frames) != len(a.kinds) {
		return nil
	}
	return &a.frames[len(a.frames)-1]
}

// beginValue does the bookkeeping of a value starting: its place in its
// container, its path, the table and field it belongs to, set in v.
func (a *jsonAn) beginValue(v *vctx) {
	*v = vctx{parent: -1}
	if len(a.kinds) == 0 {
		v.row = a.nd
		if a.tops == 0 {
			v.tracked = true
		}
		return
	}
	p := a.parentFrame()
	if p == nil {
		return
	}
	idx := p.n
	p.n++
	// The root's members may use every node; deeper ones leave room for
	// them, and record the first members of an object only (a map of
	// thousands would take them all).
	room := len(a.nodes) < maxNodes
	if len(a.kinds) > 1 {
		room = len(a.nodes) < maxNodes-rootReserve && idx < maxMembers
	}
	if p.kind == '[' {
		beginElement(v, p, idx, room)
		return
	}
	if p.tab != nil {
		v.row, v.inMap = p.tab.t, true
	}
	if p.v.tracked && room && len(p.v.path) < maxPath {
		v.path, v.tracked, v.parent = joinPath(p.v.path, p.key), true, p.node
	}
	switch p.rowLevel {
	case 1:
		v.fld, v.fldName, v.level = p.rowField(idx), p.key, 1
	case 2:
		v.fld, v.fldName = a.nestedField(p, idx)
		v.level = 2
	}
	if p.nodeDepth <= 1 && (p.key == "name" || p.key == "path" && len(p.name) == 0) {
		v.nameOf = true
	}
}

// beginElement is beginValue for element idx of the array p: its path
// if it is the first and p is recorded, the table it is a row of, and
// its column if p is a row given as an array.
func beginElement(v *vctx, p *jframe, idx int64, room bool) {
	if p.v.tracked && idx == 0 && room && len(p.v.path) < maxPath {
		v.path, v.tracked, v.parent = p.v.path+"[0]", true, p.node
	}
	if p.tab != nil {
		v.row = p.tab.t
	}
	if p.rowLevel == 1 && idx < maxColumns {
		// A row given as an array: its columns are its positions.
		t, name := p.rowTab, posNames[idx]
		var f *field
		if idx < int64(len(t.order)) && t.order[idx] != nil && t.order[idx].name == name {
			f = t.order[idx]
		} else {
			f = t.field(name)
			t.order = setAt(t.order, idx, f)
		}
		v.fld, v.fldName, v.level = f, name, 1
	}
}

// rowField is the field of member idx of the row p, named p.key: the
// one found by its position, or else the table's field of that name,
// which the row's order then remembers at idx.
func (p *jframe) rowField(idx int64) *field {
	if p.keyField != nil {
		return p.keyField
	}
	f := p.rowTab.field(p.key)
	if idx < maxColumns {
		p.rowTab.order = setAt(p.rowTab.order, idx, f)
	}
	return f
}

// nestedField is the field and its name ("prefix.key") of member idx of
// an object in a row (p, of rowLevel 2): the one found by its position,
// or else the table's field of that name, which p's memo then remembers
// at idx.
func (a *jsonAn) nestedField(p *jframe, idx int64) (*field, string) {
	if f := p.keyField; f != nil {
		return f, f.name
	}
	a.keyBuf = append(append(append(a.keyBuf[:0], p.rowPrefix...), '.'), p.key...)
	name := a.internName(a.keyBuf)
	f := p.rowTab.field(name)
	if f != nil && idx < maxColumns {
		p.memo = setAt(p.memo, idx, keyMemo{p.rowTab, p.rowPrefix, p.key, f, spell(p.key)})
	}
	return f, name
}

// internName returns b as a string, the same string for the same bytes
// while the intern table has room, so that rows share their members'
// names.
func (a *jsonAn) internName(b []byte) string {
	name, ok := a.intern[string(b)]
	if !ok {
		name = string(b)
		if len(a.intern) < maxInterned {
			a.intern[name] = name
		}
	}
	return name
}

// setAt sets s[i] to x, first growing s with zero values to hold it.
func setAt[T any](s []T, i int64, x T) []T {
	for int64(len(s)) <= i {
		var zero T
		s = append(s, zero)
	}
	s[i] = x
	return s
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func (a *jsonAn) startValue(c byte, b []byte, i int) {
	if len(a.kinds) == 0 && a.tops == 0 {
		a.topKind = c
	}
	a.beginValue(&a.cur)
	switch {
	case c == '{' || c == '[':
		a.push(c, b, i, &a.cur)
		a.cur = vctx{}
	case c == '"':
		a.st, a.isKey, a.buf = sStr, false, a.buf[:0]
	case c == '-' || c >= '0' && c <= '9':
		a.st, a.buf = sNum, append(a.buf[:0], c)
	case c == 't':
		a.st, a.lit, a.litI, a.litTyp = sLit, "true", 1, tBool
	case c == 'f':
		a.st, a.lit, a.litI, a.litTyp = sLit, "false", 1, tBool
	case c == 'n':
		a.st, a.lit, a.litI, a.litTyp = sLit, "null", 1, tNull
	default:
		a.fail(i, fmt.Sprintf("unexpected %q", c))
		return
	}
}

func (a *jsonAn) push(c byte, b []byte, i int, v *vctx) {
	if len(a.kinds) >= maxNest {
		a.fail(i, "nested too deep")
		return
	}
	n := len(a.frames)
	if n == cap(a.frames) && n < maxFrames {
		// Grown before parent points into it: the frame is built in
		// its slot.
		a.frames = slices.Grow(a.frames, 1)
	}
	parent := a.parentFrame()
	a.kinds = append(a.kinds, c)
	a.st = sArrFirst
	if c == '{' {
		a.st = sObjFirst
	}
	if parent == nil && len(a.kinds) > 1 || len(a.frames) >= maxFrames {
		return
	}
	// The slot's last frame is gone, and what kept its capture kept a
	// copy: its buffers serve the next row (millions of rows, one
	// buffer).
	fr := &a.frames[:n+1][n]
	// Cleared, then set field by field: a composite literal of this
	// size is built aside and copied, at twice the cost.
	*fr = jframe{}
	fr.kind, fr.start, fr.v, fr.node, fr.nodeDepth = c, a.off+int64(i), *v, -1, -1
	fr.frameBufs = &a.bufs[n]
	fr.capt, fr.name = fr.capt[:0], fr.name[:0]
	if v.tracked {
		fr.node = len(a.nodes)
		a.nodes = append(a.nodes, jnode{path: v.path, parent: v.parent, kind: c})
	}
	if c == '{' && v.level == 1 && parent != nil {
		fr.rowLevel, fr.rowTab, fr.rowPrefix = 2, parent.rowTab, v.fldName
	}
	if v.row != nil {
		fr.rowLevel, fr.rowTab = 1, v.row
	}
	if v.tracked && v.level < 2 && (v.row == nil || v.row == a.nd || v.inMap) {
		fr.tab = a.tabFor(c, v.path)
	}
	if v.row != nil || v.tracked {
		// A row's text is its sample; a recorded container's text is
		// shown whole when it is small.
		fr.capting, fr.captFrom = true, i
	}
	if parent != nil {
		a.treeNode(fr, parent, c)
	}
	a.frames = a.frames[:n+1]
}

// tabFor returns the table of a recorded container opened by c at path:
// an array's elements may be rows, and any object not too deep may be a
// map of objects keyed by id or name (it keeps its table if it turns out
// to be one). It returns nil for a deeper object.
func (a *jsonAn) tabFor(c byte, path string) *jtab {
	switch {
	case c == '[':
		return a.newTab(path, false)
	case len(a.kinds) <= maxMapDepth:
		return a.newTab(path, true)
	}
	return nil
}

// treeNode counts the container fr, opened by c in parent, as a tree's:
// an object in a "children" array is a node one level below its
// parent's, and a "children" array makes the object that holds it a
// node (the root, if it was not one yet).
func (a *jsonAn) treeNode(fr, parent *jframe, c byte) {
	if c == '{' && parent.isChildren {
		fr.nodeDepth = parent.nodeDepth + 1
		a.countNode(fr.nodeDepth)
		fr.nodesAtOpen = a.tree.Nodes
	}
	if c == '[' && parent.kind == '{' && parent.key == "children" {
		if parent.nodeDepth < 0 {
			parent.nodeDepth = 0
			a.countNode(0)
			parent.nodesAtOpen = a.tree.Nodes
		}
		fr.isChildren, fr.nodeDepth = true, parent.nodeDepth
	}
}

func (a *jsonAn) countNode(depth int) {
	a.tree.Nodes++
	a.maxDepth = max(a.maxDepth, depth)
	if depth < 2 {
		a.nodesAt[depth]++
	}
}

// newTab gives an array, or an object that may be a map, a table,
// evicting the smallest finished one of its kind when all are taken.
func (a *jsonAn) newTab(path string, isMap bool) *jtab {
	t := &jtab{path: path, t: newTable(), isMap: isMap}
	limit, n := maxTables, 0
	if isMap {
		limit = maxMaps
	}
	evict := -1
	for i, x := range a.tabs {
		if x.isMap != isMap {
			continue
		}
		n++
		if x.done && (evict < 0 || x.size < a.tabs[evict].size) {
			evict = i
		}
	}
	if n < limit {
		a.tabs = append(a.tabs, t)
		return t
	}
	if evict < 0 {
		return nil
	}
	a.tabs[evict] = t
	return t
}

// isMap tells a map of objects (many members, nearly all objects) from
// a record.
func (t *jtab) isMapOf(members int64) bool {
	return members >= minMapKeys && t.t.kinds[tObject]*10 >= members*9
}

func (a *jsonAn) close(c byte, b []byte, i int) {
	a.kinds = a.kinds[:len(a.kinds)-1]
	if len(a.frames) > len(a.kinds) {
		// fr stays in its slot, which the next frame pushed there takes
		// its buffers from.
		fr := &a.frames[len(a.frames)-1]
		a.frames = a.frames[:len(a.frames)-1]
		size := a.off + int64(i) + 1 - fr.start
		if fr.node >= 0 {
			a.nodes[fr.node].size, a.nodes[fr.node].n = size, fr.n
		}
		typ := tObject
		if c == ']' {
			typ = tArray
		}
		if fr.v.fld != nil {
			fr.v.fld.add(typ, "")
		}
		if fr.capting {
			a.keepText(fr, typ, b[fr.captFrom:i+1], size)
		}
		if fr.tab != nil {
			fr.tab.done, fr.tab.size = true, size
			if fr.tab.isMap && !fr.tab.isMapOf(fr.n) {
				a.tabs = slices.DeleteFunc(a.tabs, func(t *jtab) bool { return t == fr.tab })
			}
		}
		if fr.nodeDepth >= 0 && c == '}' {
			a.closeNode(fr)
		}
		if fr.isChildren && fr.n > 0 && len(a.frames) > 0 {
			a.frames[len(a.frames)-1].hasKids = true
		}
	}
	a.endValue()
}

// keepText gives the text of the container fr, closed as typ (its last
// part in the write is last, its size size), to whom captured it: the
// table it is a row of, and its recorded node if it is small. A
// container begun in this write (nothing captured yet) is read where it
// lies; those who keep its text copy it.
func (a *jsonAn) keepText(fr *jframe, typ int, last []byte, size int64) {
	text := last
	if len(fr.capt) > 0 {
		fr.capt = appendCapped(fr.capt, text)
		text = fr.capt
	}
	text = text[:min(len(text), sampleRowBytes)]
	if fr.v.row != nil {
		fr.v.row.addRow(typ, a.withKey(text))
	}
	if fr.node >= 0 && size < sampleRowBytes {
		a.nodes[fr.node].value = compactJSON(text)
	}
}

// closeNode counts the tree node fr as it closes: a leaf if it had no
// children, and its name and the size of its subtree if it is one of
// the first levels' first nodes.
func (a *jsonAn) closeNode(fr *jframe) {
	if !fr.hasKids {
		a.tree.Leaves++
	}
	if fr.nodeDepth < 2 && len(fr.name) > 0 && len(a.names[fr.nodeDepth]) < maxNames {
		a.names[fr.nodeDepth] = append(a.names[fr.nodeDepth], string(fr.name))
		a.subtree[fr.nodeDepth] = append(a.subtree[fr.nodeDepth], a.tree.Nodes-fr.nodesAtOpen+1)
	}
}

func (a *jsonAn) endValue() {
	if len(a.kinds) == 0 {
		a.tops++
		a.st = sTop
		return
	}
	a.st = sAfter
}

// endString ends a string whose text (unescaped, at most maxScalar
// bytes) is s.
func (a *jsonAn) endString(s []byte) {
	if a.isKey {
		a.st = sColon
		if p := a.parentFrame(); p != nil {
			// Rows mostly repeat their members in one order: the field
			// at this position in the last row is the likely one.
			p.keyField = nil
			if key, f, sp := p.likelyKey(); sp != nil && key == string(s) {
				p.key, p.keyField = key, f
				return
			}
			p.key = a.internName(s)
		}
		return
	}
	// A row's field takes the bytes: most strings need no copy.
	v := &a.cur
	addValue(v.fld, tString, s)
	if v.row == nil && !v.tracked && len(a.kinds) > 0 {
		if v.nameOf {
			setName(a, s)
		}
		a.cur = vctx{}
		a.endValue()
		return
	}
	a.cur.fld = nil // counted
	a.endScalar(tString, string(s))
}

// setName names the innermost analysed container, a possible tree node,
// without a copy per row: its buffer is reused.
func setName[T ~string | ~[]byte](a *jsonAn, text T) {
	if p := a.parentFrame(); p != nil {
		p.name = appendClip(p.name[:0], text, 60)
	}
}

// endNumber ends a number whose text (at most maxScalar bytes) is s, at
// byte i of the write; false if it is not one.
func (a *jsonAn) endNumber(s []byte, i int) bool {
	typ, val, read := tInt, 0.0, false
	if len(s) < maxScalar {
		ok, isFloat, v := scanNumber(s)
		if !ok {
			a.fail(i, fmt.Sprintf("bad number %q", clip(string(s), 20)))
			return false
		}
		if isFloat {
			typ = tFloat
		}
		val, read = v, true
	} else if bytes.ContainsAny(s, ".eE") {
		typ = tFloat
	}
	// A row's field takes the bytes, as for strings: no copy; and the
	// value read, if it was: no second reading.
	if v := &a.cur; v.row == nil && !v.tracked && !v.nameOf && len(a.kinds) > 0 {
		if read {
			addRead(v.fld, typ, s, val)
		} else {
			addValue(v.fld, typ, s)
		}
		a.cur = vctx{}
		a.endValue()
		return true
	}
	a.endScalar(typ, string(s))
	return true
}

// jsonNumber reports whether b is a number as JSON spells it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumber(b []byte) bool {
	ok, _, _ := scanNumber(b)
	return ok
}

// scanNumber is jsonNumber, and tells whether the number has a fraction
// or an exponent, and its value as strconv.ParseFloat reads it (±Inf past
// the range of a float64). It reads the value as parseNumber does, in
// the same pass for the numbers most tool outputs hold.
func scanNumber(b []byte) (ok, isFloat bool, v float64) {
	i, neg := 0, len(b) > 0 && b[0] == '-'
	if neg {
		i = 1
	}
	var m int64 // the digits, while there are at most 15
	start := i
	for ; i < len(b) && digit(b[i]); i++ {
		m = m*10 + int64(b[i]-'0')
	}
	n := i - start // digits
	if n == 0 || n > 1 && b[start] == '0' {
		return false, false, 0
	}
	frac := 0
	if i < len(b) && b[i] == '.' {
		i++
		for ; i < len(b) && digit(b[i]); i++ {
			m = m*10 + int64(b[i]-'0')
			frac++
		}
		if frac == 0 {
			return false, false, 0
		}
		isFloat = true
	}
	if i == len(b) && n+frac <= 15 {
		v = float64(m)
		if frac > 0 {
			v /= pow10[frac]
		}
		if neg {
			v = -v // -0 stays -0, as ParseFloat has it
		}
		return true, isFloat, v
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i = exponentEnd(b, i+1); i < 0 {
			return false, false, 0
		}
		isFloat = true
	}
	if i != len(b) {
		return false, false, 0
	}
	v, _ = strconv.ParseFloat(string(b), 64)
	return true, isFloat, v
}

// exponentEnd reads the rest of a number's exponent from b[i], after its
// 'e': a sign, then digits. It returns the index after the last digit,
// or -1 if there is none.
func exponentEnd(b []byte, i int) int {
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	e := i
	for i < len(b) && digit(b[i]) {
		i++
	}
	if i == e {
		return -1
	}
	return i
}

func (a *jsonAn) endScalar(typ int, text string) {
	v := a.cur
	a.cur = vctx{}
	v.fld.add(typ, text)
	if v.row != nil {
		v.row.field("(value)").add(typ, text)
		v.row.addRow(typ, a.withKey([]byte(scalarText(typ, text))))
	}
	if v.tracked && len(a.nodes) < maxNodes {
		a.nodes = append(a.nodes, jnode{path: v.path, parent: v.parent, kind: 's', value: scalarText(typ, text)})
	}
	if v.nameOf && typ == tString {
		setName(a, text)
	}
	if len(a.kinds) == 0 {
		a.topText = scalarText(typ, text)
	}
	a.endValue()
}

// scalarText is a scalar as JSON text.
func scalarText(typ int, text string) string {
	if typ == tString {
		return quoteJSON(text)
	}
	return text
}

// quoteJSON quotes a string as JSON does, without escaping HTML.
func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\ufffd") {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// withKey prefixes a map entry's text with its key.
func (a *jsonAn) withKey(raw []byte) []byte {
	p := a.parentFrame()
	if p == nil || p.kind != '{' {
		return raw
	}
	return append([]byte(quoteJSON(clip(p.key, 80))+":"), raw...)
}

func appendCapped(dst, p []byte) []byte {
	if room := sampleRowBytes - len(dst); room > 0 {
		dst = append(dst, p[:min(room, len(p))]...)
	}
	return dst
}

func (a *jsonAn) flushCaptures(b []byte) {
	for i := range a.frames {
		fr := &a.frames[i]
		if fr.capting {
			fr.capt = appendCapped(fr.capt, b[fr.captFrom:])
			fr.captFrom = 0
		}
	}
}

// compactJSON drops the whitespace between tokens of JSON text, which may
// be cut short, and marks a cut.
func compactJSON(p []byte) string {
	out := make([]byte, 0, len(p))
	var str jsonesc.Strings
	for _, c := range p {
		if !str.Step(c) && isWS(c) {
			continue
		}
		out = append(out, c)
	}
	s := string(out)
	if len(p) >= sampleRowBytes {
		s = truncUTF8(s, len(s)-1) + "…"
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "�")
	}
	return s
}

// finishLex ends a number at the end of the input and notes truncation.
func (a *jsonAn) finishLex() {
	if a.st == sNum {
		a.endNumber(a.buf, 0)
	}
	if a.err == "" && (len(a.kinds) > 0 || a.st != sTop) {
		a.err = fmt.Sprintf("byte %d: the input ends inside a value", a.off)
	}
}
