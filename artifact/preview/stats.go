package preview

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Bounds of a table's statistics.
const (
	maxColumns     = 64  // fields tracked per table; more are counted only
	distinctExact  = 256 // distinct values counted exactly per field, then estimated
	maxValueLen    = 64  // bytes of a value kept for distinct counts and top values
	kmvSize        = 256 // hashes kept by the distinct estimator
	topShown       = 10  // a field with at most this many values lists them all
	sampleRowBytes = 1024
	firstRows      = 3
)

// value types, in the order they are named.
const (
	tNull = iota
	tBool
	tInt
	tFloat
	tString
	tDate
	tDateTime
	tObject
	tArray
	nTypes
)

var typeNames = [nTypes]string{"null", "bool", "int", "number", "string", "date", "datetime", "object", "array"}

// table accumulates per-field statistics over rows. Memory is bounded by
// maxColumns fields of bounded size each.
type table struct {
	rows      int64
	fields    []*field
	byName    map[string]*field
	order     []*field        // the fields of the last row by position
	dropped   map[string]bool // names past maxColumns, up to a bound
	moreNames int64
	kinds     [nTypes]int64 // rows per type (JSON arrays hold any value)
	first     []string      // first rows, as sampled text
	last      string        // the last row's text, if not lastRaw
	lastRaw   []byte        // the last row as JSON
	// lastAt is the last row where it lies in the current write, not
	// yet copied to lastRaw (see keepLast); nil if lastRaw has it.
	lastAt  []byte
	rowWord string // what rows are called; "rows" if empty
}

type field struct {
	name    string
	spelt   spelling
	present int64
	types   [nTypes]int64
	// numbers
	nNum          int64
	min, max, sum float64
	// dates: lexical range of ISO strings of one shape
	tmin, tmax string
	// distinct values: exactly (see exactSet) until past distinctExact,
	// then estimated
	exact      exactSet
	estimating bool
	boolAt     [2]int32 // false's and true's index in exact.vals + 1, 0 if not known
	kmv        kmv
}

func newTable() *table {
	return &table{byName: map[string]*field{}}
}

func (t *table) field(name string) *field {
	if f, ok := t.byName[name]; ok {
		return f
	}
	if len(t.fields) >= maxColumns {
		if t.dropped == nil {
			t.dropped = map[string]bool{}
		}
		if !t.dropped[name] && len(t.dropped) < 1024 {
			t.dropped[name] = true
			t.moreNames++
		}
		return nil
	}
	f := &field{name: name, spelt: spell(name), min: math.Inf(1), max: math.Inf(-1)}
	t.fields = append(t.fields, f)
	t.byName[name] = f
	return f
}

// count counts a row of type typ and reports whether it is one of the
// first rows, whose text the caller then appends to t.first.
func (t *table) count(typ int) bool {
	t.rows++
	t.kinds[typ]++
	return len(t.first) < firstRows
}

// addRow counts a row given as JSON text, compacted only if shown.
func (t *table) addRow(typ int, raw []byte) {
	t.addRowAt(typ, raw)
	t.keepLast()
}

// addRowAt is addRow for a row whose text lies in the current write. It
// keeps a reference to the text instead of a copy; keepLast copies the
// last row's text once the write ends, so only one row per write is
// copied.
func (t *table) addRowAt(typ int, raw []byte) {
	if t.count(typ) {
		t.first = append(t.first, compactJSON(raw))
	}
	t.lastAt = raw
}

// keepLast copies the last row, if it lies in the current write.
func (t *table) keepLast() {
	if t.lastAt != nil {
		t.lastRaw, t.lastAt = append(t.lastRaw[:0], t.lastAt...), nil
	}
}

// lastRow is the text of the last row.
func (t *table) lastRow() string {
	if t.last != "" {
		return t.last
	}
	return compactJSON(t.lastRaw)
}

// add records one value of a field. typ is its JSON-level type; text is
// the value (a string's content, a number's literal) for scalars.
func (f *field) add(typ int, text string) { addValue(f, typ, text) }

// addValue is add for a string or for bytes, which it copies only into a
// new distinct value.
func addValue[T ~string | ~[]byte](f *field, typ int, text T) {
	v := math.Inf(1) // not in the range and mean
	if typ == tInt || typ == tFloat {
		if x, ok := parseNumber(text); ok {
			v = x
		}
	}
	addRead(f, typ, text, v)
}

// addRead is addValue for a value whose number, if it is one, the caller
// has read (v; ±Inf is left out of the range and mean): its type, range,
// mean and distinct count in one call, not one per step, as a row's
// values read where they lie are counted (a call spills what its caller
// holds).
func addRead[T ~string | ~[]byte](f *field, typ int, text T, v float64) {
	if f == nil {
		return
	}
	f.present++
	switch {
	case typ == tInt || typ == tFloat:
		f.num(v)
	case typ == tString && len(text) >= 10 && text[4] == '-' && text[7] == '-':
		// Most strings are told from dates by their dashes, here.
		typ = stringType(text)
	}
	f.types[typ]++
	switch typ {
	case tDate, tDateTime:
		dateRange(f, text)
	case tNull, tObject, tArray:
		return
	}
	dv := truncUTF8(text, maxValueLen)
	h := hash64(dv)
	if f.estimating {
		// Once the estimator is full, most hashes are above the k
		// smallest: rejected here, without a call.
		if len(f.kmv.heap) < kmvSize || h < f.kmv.heap[0] {
			f.kmv.add(h)
		}
		return
	}
	if !addExact(&f.exact, dv, h) {
		f.estimate(h)
	}
}

// num counts a numeric value in the field's range and mean.
func (f *field) num(v float64) {
	if math.IsInf(v, 0) {
		return
	}
	f.nNum++
	f.sum += v
	// math.Min and Max, but inlined: v is never NaN, and -0 is below 0
	// as they have it.
	if v < f.min || v == f.min && math.Signbit(v) {
		f.min = v
	}
	if v > f.max || v == f.max && !math.Signbit(v) {
		f.max = v
	}
}

// dateRange widens f's range of dates by s.
func dateRange[T ~string | ~[]byte](f *field, s T) {
	if f.tmin == "" || string(s) < f.tmin {
		f.tmin = clip(string(s), maxValueLen)
	}
	if string(s) > f.tmax {
		f.tmax = clip(string(s), maxValueLen)
	}
}

// boolText maps 0 and 1 to the JSON text of false and true.
var boolText = [2]string{"false", "true"}

// addBool is addValue for a bool, false (0) or true (1). A field counted
// exactly keeps where each bool is among its distinct values (boolAt),
// so that a row's bool is one count, not a hash and a probe.
func addBool(f *field, v int) {
	if f == nil {
		return
	}
	if i := f.boolAt[v] - 1; i >= 0 && !f.estimating {
		f.present++
		f.types[tBool]++
		f.exact.counts[i]++
		return
	}
	addRead(f, tBool, boolText[v], 0)
	if !f.estimating {
		f.boolAt[v] = int32(slices.Index(f.exact.vals, boolText[v]) + 1)
	}
}

// estimate counts distinct values by estimate from here on, past the
// exact bound, from the exact set and a new value's hash h: the estimator
// depends on the set of values only.
func (f *field) estimate(h uint64) {
	for _, x := range f.exact.vals {
		f.kmv.add(hash64(x))
	}
	f.kmv.add(h)
	f.exact, f.estimating = exactSet{}, true
}

// exactSet counts up to distinctExact distinct values and how often each
// came: an open-addressing table of the values' indexes by their hash64,
// at most half full, so that a value seen before (a bool, a region, one
// of a few hundred prices) is found in a probe or two, without a map's
// own hash of the value besides the estimator's.
type exactSet struct {
	vals   []string
	counts []int64
	slots  []int32 // index in vals + 1, 0 if free; a power of two long
}

// addExact counts v, whose hash64 is h, in s; false if v is new and s is
// full (it is then not counted). Only a new value is copied.
func addExact[T ~string | ~[]byte](s *exactSet, v T, h uint64) bool {
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; len(s.slots) > 0; i = (i + 1) & mask {
		x := s.slots[i]
		if x == 0 {
			break
		}
		if s.vals[x-1] == string(v) {
			s.counts[x-1]++
			return true
		}
	}
	if len(s.vals) >= distinctExact {
		return false
	}
	s.vals = append(s.vals, string(v))
	s.counts = append(s.counts, 1)
	if 2*len(s.vals) > len(s.slots) {
		s.slots = make([]int32, max(16, 2*len(s.slots)))
		for j, x := range s.vals {
			s.put(hash64(x), int32(j+1))
		}
		return true
	}
	s.put(h, int32(len(s.vals)))
	return true
}

// put sets the first free slot from h's to x.
func (s *exactSet) put(h uint64, x int32) {
	mask := uint64(len(s.slots) - 1)
	i := h & mask
	for s.slots[i] != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = x
}

// parseNumber is strconv.ParseFloat, without its cost for the numbers
// most tool outputs hold: integers and decimals of up to 15 digits. A
// float64 holds such digits exactly, and a power of ten up to 1e22, so
// one division, correctly rounded, gives ParseFloat's value.
func parseNumber[T ~string | ~[]byte](s T) (float64, bool) {
	i, neg := 0, len(s) > 0 && s[0] == '-'
	if neg {
		i = 1
	}
	if n := len(s) - i; n > 0 && n <= 16 {
		var v int64
		digits, frac := 0, -1 // frac: digits after the point, -1 if none
		for ; i < len(s); i++ {
			c := s[i]
			switch {
			case c >= '0' && c <= '9':
				v = v*10 + int64(c-'0')
				digits++
				if frac >= 0 {
					frac++
				}
				continue
			case c == '.' && frac < 0 && digits > 0:
				frac = 0
				continue
			}
			break
		}
		if i == len(s) && digits <= 15 && frac != 0 {
			f := float64(v)
			if frac > 0 {
				f /= pow10[frac]
			}
			if neg {
				return -f, true // -0 stays -0, as ParseFloat has it
			}
			return f, true
		}
	}
	v, err := strconv.ParseFloat(string(s), 64)
	return v, err == nil
}

// pow10 are the powers of ten parseNumber divides by.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// stringType tells dates and date-times apart from other strings. Most
// strings are told apart by their dashes, read first; a date's digits
// are read as words (digitsAt).
func stringType[T ~string | ~[]byte](s T) int {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' || !digitsAt(le64(s), dateDigits) {
		return tString
	}
	switch {
	case len(s) >= 16:
		// DD, then "THH:MM" or " HH:MM", as one word.
		w := le64(s[8:])
		if sep := byte(w >> 16); digitsAt(w, timeDigits) && byte(w>>40) == ':' && (sep == 'T' || sep == ' ') {
			return tDateTime
		}
	case len(s) == 10 && digit(s[8]) && digit(s[9]):
		return tDate
	}
	return tString
}

// The bytes of a word (as le64 reads it) that must be digits: YYYY-MM-
// and DDTHH:MM.
const (
	dateDigits = 0x00ffff00ffffffff
	timeDigits = 0xffff00ffff00ffff
)

// digitsAt reports whether the bytes of w that mask covers (each 0xff or
// 0) are all ASCII digits: none is below '0' (its w-0x30 borrows into its
// high bit) or above '9' (its w+0x46 has it, or else its w-0x30). A
// borrow or carry between bytes starts only at a byte that fails, so the
// bytes below the first that fails are read right.
func digitsAt(w, mask uint64) bool {
	const zeros, sixes, highs = 0x3030303030303030, 0x4646464646464646, 0x8080808080808080
	return ((w-mask&zeros)|(w+mask&sixes))&mask&highs == 0
}

func digit(c byte) bool { return c-'0' < 10 }

func isDigits[T ~string | ~[]byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// column turns a field's statistics into its public summary.
func (t *table) column(f *field) Column {
	c := Column{Name: f.name, Missing: t.rows - f.present, Nulls: f.types[tNull]}
	c.Type = typeOf(f.types)
	if f.nNum > 0 {
		c.HasNum, c.Min, c.Max, c.Mean = true, f.min, f.max, f.sum/float64(f.nNum)
	}
	c.MinText, c.MaxText = f.tmin, f.tmax
	if !f.estimating {
		n := int64(len(f.exact.vals))
		c.Distinct, c.DistinctExact = n, true
		if n <= topShown && (f.types[tString]+f.types[tBool]) > 0 && n < f.present-f.types[tNull] {
			for i, v := range f.exact.vals {
				c.Top = append(c.Top, ValueCount{v, f.exact.counts[i]})
			}
			slices.SortFunc(c.Top, func(a, b ValueCount) int {
				if a.Count != b.Count {
					return int(b.Count - a.Count)
				}
				return strings.Compare(a.Value, b.Value)
			})
		}
	} else {
		// An estimate past the count of values would read as a mistake.
		c.Distinct = min(f.kmv.estimate(), f.present-f.types[tNull]-f.types[tObject]-f.types[tArray])
	}
	return c
}

// typeOf names the types seen, most frequent first, ints and floats
// together as "number", nulls aside.
func typeOf(counts [nTypes]int64) string {
	if counts[tInt] > 0 && counts[tFloat] > 0 {
		counts[tFloat] += counts[tInt]
		counts[tInt] = 0
	}
	var idx []int
	for i := 1; i < nTypes; i++ {
		if counts[i] > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return "null"
	}
	slices.SortStableFunc(idx, func(a, b int) int { return int(counts[b] - counts[a]) })
	names := make([]string, len(idx))
	for i, t := range idx {
		names[i] = typeNames[t]
	}
	return strings.Join(names, "|")
}

// columns summarises every field.
func (t *table) columns() []Column {
	out := make([]Column, len(t.fields))
	for i, f := range t.fields {
		out[i] = t.column(f)
	}
	return out
}

// describe renders one column as a line: name, type, nulls, range,
// distinct values.
func describe(c Column, rows int64) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "- %s: %s", c.Name, c.Type)
	if c.Missing > 0 {
		fmt.Fprintf(&sb, ", missing %d", c.Missing)
	}
	if c.Nulls > 0 {
		fmt.Fprintf(&sb, ", null %d", c.Nulls)
	}
	if c.HasNum {
		fmt.Fprintf(&sb, ", %s..%s", num(c.Min), num(c.Max))
		if c.Min != c.Max {
			fmt.Fprintf(&sb, " mean %s", meanText(c.Mean, c.Min, c.Max))
		}
	}
	if c.MinText != "" {
		if c.MinText == c.MaxText {
			fmt.Fprintf(&sb, ", %s", c.MinText)
		} else {
			fmt.Fprintf(&sb, ", %s..%s", c.MinText, c.MaxText)
		}
	}
	switch {
	case len(c.Top) > 0:
		sb.WriteString(", values ")
		for i, v := range c.Top {
			if i > 0 {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "%s ×%d", strconv.Quote(clip(v.Value, 40)), v.Count)
		}
	case c.Distinct > 0 && c.Type != "bool":
		switch {
		case c.DistinctExact && c.Distinct == rows-c.Missing-c.Nulls && rows > 1:
			sb.WriteString(", all distinct")
		case c.DistinctExact:
			fmt.Fprintf(&sb, ", %d distinct", c.Distinct)
		default:
			fmt.Fprintf(&sb, ", ~%d distinct", c.Distinct)
		}
	}
	sb.WriteByte('\n')
	return sb.String()
}

// meanText writes a mean of values in lo..hi with 4 significant digits,
// or as many more as its range needs: a mean printed to 4 digits can fall
// outside its own range (timestamps 1795345480..1795905793 have a mean
// that rounds to 1796000000), and says nothing about where in a narrow
// range it lies. So the printed mean lies within lo..hi and is within a
// thousandth of the range's width of the true one.
func meanText(mean, lo, hi float64) string {
	if math.IsNaN(mean) || math.IsInf(mean, 0) {
		return num(mean)
	}
	for digits := 4; digits < 17; digits++ {
		m, _ := strconv.ParseFloat(strconv.FormatFloat(mean, 'g', digits, 64), 64)
		if m >= lo && m <= hi && math.Abs(m-mean) <= (hi-lo)/1000 {
			return num(m)
		}
	}
	return num(mean)
}

// num writes a number as a model reads it best: integers in full.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// tableSections renders a table: what it is, its fields, sample rows.
//
// names, when given, rename the columns of rows given as arrays.
func tableSections(head string, t *table, f *Facts, names []string) []section {
	f.Rows = t.rows
	f.Columns = t.columns()
	for i := range f.Columns {
		if i < len(names) && f.Columns[i].Name == posNames[i] {
			f.Columns[i].Name = clip(names[i], maxValueLen)
		}
	}
	secs := []section{{prioHead, head}}
	if len(f.Columns) > 0 {
		secs = append(secs, section{prioFacts, fieldsText(f.Columns, t)})
	}
	word, one := "rows", "row"
	if t.rowWord != "" {
		word, one = t.rowWord, "entry"
	}
	for i, r := range t.first {
		p := prioExtra
		if i == 0 {
			p = prioSample
		}
		label := ""
		if i == 0 {
			label = "First " + word + ":\n"
		}
		secs = append(secs, section{p, label + r + "\n"})
	}
	if t.rows > int64(len(t.first)) {
		secs = append(secs, section{prioSample - 1, fmt.Sprintf("Last %s (#%d):\n%s\n", one, t.rows, t.lastRow())})
	}
	return secs
}

// fieldsText lists a table's columns, one line each.
func fieldsText(cols []Column, t *table) string {
	var sb strings.Builder
	sb.WriteString("Fields:\n")
	for i, c := range cols {
		// An object whose members follow as "name.member" lines needs
		// no line of its own unless it is sometimes absent or null.
		if c.Type == "object" && c.Missing == 0 && c.Nulls == 0 && i+1 < len(cols) && strings.HasPrefix(cols[i+1].Name, c.Name+".") {
			continue
		}
		sb.WriteString(describe(c, t.rows))
	}
	if t.moreNames > 0 {
		fmt.Fprintf(&sb, "- and %d more fields\n", t.moreNames)
	}
	return sb.String()
}

// kmv estimates a count of distinct values from the k smallest hashes
// seen ("k minimum values"). Deterministic: the hash has no seed.
type kmv struct {
	heap []uint64 // a max-heap of the smallest hashes
	in   map[uint64]struct{}
}

func (k *kmv) add(h uint64) {
	// Once full, most hashes are above the k smallest: the set need not
	// be asked (a hash in it is at most the largest kept).
	if len(k.heap) == kmvSize && h >= k.heap[0] {
		return
	}
	if _, ok := k.in[h]; ok {
		return
	}
	if k.in == nil {
		k.in = map[uint64]struct{}{}
	}
	if len(k.heap) < kmvSize {
		k.in[h] = struct{}{}
		k.heap = append(k.heap, h)
		for i := len(k.heap) - 1; i > 0; {
			p := (i - 1) / 2
			if k.heap[p] >= k.heap[i] {
				break
			}
			k.heap[p], k.heap[i] = k.heap[i], k.heap[p]
			i = p
		}
		return
	}
	if h >= k.heap[0] {
		return
	}
	delete(k.in, k.heap[0])
	k.in[h] = struct{}{}
	k.heap[0] = h
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(k.heap) && k.heap[l] > k.heap[m] {
			m = l
		}
		if r < len(k.heap) && k.heap[r] > k.heap[m] {
			m = r
		}
		if m == i {
			break
		}
		k.heap[i], k.heap[m] = k.heap[m], k.heap[i]
		i = m
	}
}

func (k *kmv) estimate() int64 {
	if len(k.heap) < kmvSize {
		return int64(len(k.heap))
	}
	frac := float64(k.heap[0]) / math.MaxUint64
	return int64(float64(kmvSize-1) / frac)
}

// hash64 hashes a value for the distinct-count estimator, eight bytes
// at a time: each word is folded in by a 64×64→128-bit multiply whose
// halves are xored (the mixing step of wyhash and its kin). The constants
// are fixed, not a per-process seed as hash/maphash has: a preview is the
// same on every run.
func hash64[T ~string | ~[]byte](s T) uint64 {
	const k0, k1, k2 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3
	n := len(s)
	h := k0 ^ uint64(n)
	for i := 0; n-i > 8; i += 8 {
		h = mix64(h^le64(s[i:]), k1)
	}
	// The last 1 to 8 bytes, read without a loop: a word that overlaps
	// the one before when there is one (the length tells the cases
	// apart), two halves that may overlap, or three bytes.
	var w uint64
	switch {
	case n >= 8:
		w = le64(s[len(s)-8:])
	case n >= 4:
		w = le32(s)<<32 | le32(s[n-4:])
	case n > 0:
		w = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return mix64(mix64(h^w, k1), k2)
}

// mix64 multiplies a by b and folds the 128-bit product's halves.
func mix64(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// le64 and le32 read the first eight and four bytes of s, little-endian
// (the compiler makes each one load).
func le64[T ~string | ~[]byte](s T) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32[T ~string | ~[]byte](s T) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}
