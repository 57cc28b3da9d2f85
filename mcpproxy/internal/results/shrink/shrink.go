// Package shrink makes a large JSON object small while keeping it valid
// against a JSON Schema: an MCP tool result's structuredContent against
// the tool's outputSchema.
//
// Shrink reads the instance as raw bytes (it may be 100 MB) and decodes
// only keys and small parts. Its strategy, in one pass from the top:
//   - a value that fits its share of the budget, and any member of at most
//     Options.MinCut bytes, is copied byte for byte;
//   - an object shares its budget among its large members (a member small
//     enough keeps all of it, the largest are cut the most), keeps every
//     required member, and drops optional ones (the largest first, then
//     the small ones past those that fit) only when the rest does not fit;
//   - an array keeps its first items (Options.Sample, at least minItems,
//     at most maxItems), each shrunk in turn if it must be;
//   - a long string becomes the text the caller's cut function returns
//     for it (the caller's preview and link), cut to the string's share of
//     the budget and to maxLength, padded with spaces to minLength. A
//     string whose schema pins it (enum, const, pattern, format) is never
//     replaced, nor an array cut whose schema says it must contain some
//     item: the cut happens elsewhere, or nowhere.
//
// The subschema of each member is found by following $ref, allOf, anyOf,
// oneOf, properties, patternProperties, additionalProperties, items and
// prefixItems; where branches differ, every branch's constraints are
// respected. Whatever the walk cannot foresee, the validation of the
// result catches: Shrink returns only a value that validates, or
// ErrNoFit (ErrSchema when validating it would cost too much).
//
// AddProperty edits a schema so that a shrunk value may carry a member of
// the caller's (a note saying it is shrunk) where the schema would refuse
// members it does not name.
//
// Schema and instance come from an upstream that may be hostile: nothing
// is ever fetched, and the work is bounded (the size, nesting, patterns
// and in-place paths of a schema, the bytes scanned, the subschemas
// visited and patterns matched, the depth walked, and what validating a
// result would cost the validator, counted before it runs).
// Everything here is safe for concurrent use.
package shrink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// ErrNoFit is returned by Shrink when no value it can make both fits the
// budget and validates against the schema (a required member with a
// const of 1 MB, minItems 1000 of large items, a budget of 10 bytes).
var ErrNoFit = errors.New("shrink: no valid value fits the budget")

// ErrInvalid is wrapped by Shrink's error for input it cannot work on:
// a budget of 0 or less, or an instance that is not one JSON object.
var ErrInvalid = errors.New("shrink: invalid input")

// Options tune Shrink. Only Budget is required.
type Options struct {
	// Budget is the most bytes the result may have; it must be > 0.
	Budget int
	// MinCut: a member of at most this many bytes is never cut, replaced
	// or dropped for its own sake. 0 means 256.
	MinCut int
	// Sample is the most items a cut array keeps (more when its schema's
	// minItems asks for more). 0 means 5.
	Sample int
}

// Cut describes one place where the result differs from the instance. It
// is passed to Shrink's cut function, once per place, in the order the
// places appear in the result (a container before what is inside it).
type Cut struct {
	// Pointer is the place in the instance, as an RFC 6901 JSON pointer
	// ("" is the whole instance).
	Pointer string
	// Raw is the original value's JSON, a sub-slice of the instance: the
	// caller stores it, it must not modify it.
	Raw []byte
	// Kind says what happened to the value at Pointer:
	//   "string": the string was replaced by the text cut returned;
	//   "array": the array keeps its first Kept items (each may have a
	//   cut of its own);
	//   "object": the object keeps Kept of its members, in their order,
	//   and lost the others (optional members dropped).
	Kind string
	// Kept is the number of items or members kept ("array", "object").
	Kept int
}

// minText is the fewest bytes a replaced string gets: a shorter preview
// says nothing, and the floor bounds how many cuts fit in a budget (a
// string whose share is smaller counts as this large, so that an item or
// member around it goes instead).
const minText = 64

// maxWork bounds the bytes Shrink scans, as a multiple of the instance's
// size: 16 levels of envelopes, each as large as the instance, are still
// descended into.
const maxWork = 16

// maxSteps bounds the subschemas the walk visits (see shrinker.steps).
const maxSteps = 1 << 18

// maxDepth bounds how deep Shrink descends: a value nested deeper is kept
// or dropped whole. It also bounds Shrink's own stack.
const maxDepth = 64

// Shrink returns a copy of instance, a JSON object, that is at most
// o.Budget bytes long and valid against s (nil: any object). If the
// instance fits and validates, it is returned unchanged (copied, without
// the space around it). Otherwise cut is called for every value replaced
// or truncated (see Cut), and cuts lists the same, in the same order; for a string, the text cut returns takes
// the string's place, cut to fit (a nil cut stands for one that returns
// ""). cut is called only for the result returned, once the result is
// known to fit and validate with stand-in texts. An error from cut ends
// Shrink with that error wrapped. Shrink validates its result before
// returning it; when no result fits and validates, the error wraps
// ErrNoFit. When validating a result would cost more than Validate
// allows, the error wraps ErrSchema (the schema is unusable for this
// value). Input that is not a JSON object gives an error wrapping
// ErrInvalid. When ctx is done, the walk stops and the error wraps
// ctx.Err(); every other step is bounded (see the package doc).
//
// Shrink copies no large member: its allocations are proportional to the
// result, the number of large members, and the depth, not the instance
// (20 KB for a 20 MB string member or 50,000 rows).
func Shrink(ctx context.Context, instance []byte, s *Schema, o Options, cut func(Cut) (string, error)) (out []byte, cuts []Cut, err error) {
	body, o, err := prepare(instance, o)
	if err != nil {
		return nil, nil, err
	}
	if cut == nil {
		cut = func(Cut) (string, error) { return "", nil }
	}
	// First try everything; should the result not validate (dropping a
	// member made a oneOf ambiguous, say), try again keeping every member.
	var last error
	for _, keepAll := range []bool{false, true} {
		z := &shrinker{s: s, o: o, keepAll: keepAll}
		r := z.plan(ctx, body)
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("shrink: %w", err)
		}
		if r.size > o.Budget {
			last = fmt.Errorf("the smallest value found has %d bytes, the budget is %d", r.size, o.Budget)
		} else {
			trial, _, _ := r.assemble(nil)
			last = s.Validate(trial)
		}
		if errors.Is(last, ErrSchema) {
			return nil, nil, last // too costly to check: no value can be shown valid
		}
		if last == nil {
			out, cuts, err := r.assemble(cut)
			if err != nil {
				return nil, nil, err
			}
			if err := s.Validate(out); errors.Is(err, ErrSchema) {
				return nil, nil, err
			} else if err != nil {
				return nil, nil, fmt.Errorf("%w: %w", ErrNoFit, err)
			}
			return out, cuts, nil
		}
		if !z.dropped {
			break // keeping every member would give the same result
		}
	}
	return nil, nil, fmt.Errorf("%w: %w", ErrNoFit, last)
}

// prepare checks Shrink's input and returns the instance's object without
// the space around it, and o with its defaults.
func prepare(instance []byte, o Options) ([]byte, Options, error) {
	if o.Budget <= 0 {
		return nil, o, fmt.Errorf("%w: budget %d", ErrInvalid, o.Budget)
	}
	if o.MinCut <= 0 {
		o.MinCut = 256
	}
	if o.Sample <= 0 {
		o.Sample = 5
	}
	if !json.Valid(instance) {
		return nil, o, fmt.Errorf("%w: the instance is not valid JSON", ErrInvalid)
	}
	start := jsonrpc.SkipSpace(instance, 0)
	body := instance[start:jsonrpc.SkipValue(instance, start)]
	if body[0] != '{' {
		return nil, o, fmt.Errorf("%w: the instance is not a JSON object", ErrInvalid)
	}
	return body, o, nil
}

// shrinker is one attempt of Shrink: its settings, and the work it has
// done so far.
type shrinker struct {
	s       *Schema
	o       Options
	keepAll bool // never drop a member
	dropped bool // some member was dropped
	// work counts the bytes the walk scanned, up to limit: each level of
	// nesting scans its value again, and a hostile instance must not turn
	// 64 levels into 64 times its size.
	work, limit int
	// steps counts the subschemas the walk visited and the patterns it
	// matched (an eighth of a step per byte of name and instruction), up
	// to maxSteps: a hostile schema and instance (a thousand anyOf
	// branches for each of a million members, a 1 MB member name) must
	// not make it visit their product.
	steps int
}

// plan shrinks the whole instance, without asking for any text yet.
func (z *shrinker) plan(ctx context.Context, body []byte) result {
	var root view
	if z.s != nil {
		root = z.expand([]*jsonschema.Schema{z.s.rs.Schema()}, "object")
	}
	z.limit = maxWork*len(body) + 1<<20
	return z.value(ctx, body, root, z.o.Budget, "", 0)
}

// A result is a value being built: bytes copied from the instance or
// written here, and the places where a cut is reported and, for a string,
// its text goes. size bounds the bytes it will have.
type result struct {
	segs []seg
	size int
}

type seg struct {
	b   []byte
	cut *Cut     // reported before b
	str *strSpot // the cut's text goes here
}

// strSpot is where a replaced string's text goes: at most size bytes of
// JSON, minLen to maxLen (-1: any) code points.
type strSpot struct{ size, minLen, maxLen int }

func raw(b []byte) result { return result{segs: []seg{{b: b}}, size: len(b)} }

func (r *result) add(b []byte) {
	r.segs = append(r.segs, seg{b: b})
	r.size += len(b)
}

func (r *result) addResult(c result) {
	r.segs = append(r.segs, c.segs...)
	r.size += c.size
}

// cutAt reports a cut of the container r is building, before its content.
func (r *result) cutAt(c Cut) { r.segs = slices.Insert(r.segs, 0, seg{cut: &c}) }

var (
	lbrace, rbrace = []byte("{"), []byte("}")
	lbrack, rbrack = []byte("["), []byte("]")
	comma, colon   = []byte(","), []byte(":")
)

// assemble writes r. With cut nil it writes a stand-in text for each
// replaced string (distinct, of an allowed length), to validate a trial
// before the caller is asked for anything.
func (r result) assemble(cut func(Cut) (string, error)) ([]byte, []Cut, error) {
	out := make([]byte, 0, r.size)
	var cuts []Cut
	for i, sg := range r.segs {
		if sg.cut != nil {
			text := "#" + strconv.Itoa(i)
			if cut != nil {
				cuts = append(cuts, *sg.cut)
				t, err := cut(*sg.cut)
				if err != nil {
					return nil, nil, fmt.Errorf("shrink: cut %q: %w", sg.cut.Pointer, err)
				}
				text = t
			}
			if sg.str != nil {
				out = appendText(out, text, *sg.str)
			}
		}
		out = append(out, sg.b...)
	}
	return out, cuts, nil
}

// value shrinks the JSON value b to budget bytes if it can; if it cannot,
// the result is the smallest it found, larger than budget.
func (z *shrinker) value(ctx context.Context, b []byte, v view, budget int, ptr string, depth int) result {
	if len(b) <= budget || depth > 0 && len(b) <= z.o.MinCut || depth > maxDepth || z.steps > maxSteps {
		return raw(b)
	}
	if b[0] == '{' || b[0] == '[' {
		if z.work += len(b); z.work > z.limit || ctx.Err() != nil {
			return raw(b) // enough: kept whole, or dropped by its parent
		}
	}
	switch b[0] {
	case '{':
		return z.object(ctx, b, v, budget, ptr, depth)
	case '[':
		return z.array(ctx, b, v, budget, ptr, depth)
	case '"':
		return z.str(b, v, budget, ptr)
	}
	return raw(b) // a number, true, false or null: kept as it is
}

// str replaces the string b by a spot for the cut's text, of its share
// of the budget (at least minText bytes) and of a length its schemas
// allow; a string that fits, or that a schema pins, stays as it is.
func (z *shrinker) str(b []byte, v view, budget int, ptr string) result {
	if v.pinned("string") {
		return raw(b)
	}
	lo, hi := v.lengths()
	size := max(budget, 2+lo, minText)
	if size >= len(b) {
		return raw(b)
	}
	return result{segs: []seg{{cut: &Cut{Pointer: ptr, Raw: b, Kind: "string"}, str: &strSpot{size, lo, hi}}}, size: size}
}

// span is one item of an array, or one member of an object.
type span struct {
	key, val []byte // key: the raw key, quotes included; nil for an item
	at       int    // the offset of val in its object
	name     string // the decoded key, for large members
	res      result
	dropped  bool
}

// firstItems returns the first want items of the array b, and whether
// more follow.
func firstItems(b []byte, want int) (items []span, more bool) {
	i := jsonrpc.SkipSpace(b, 1)
	for len(items) < want && b[i] != ']' {
		end := jsonrpc.SkipValue(b, i)
		items = append(items, span{val: b[i:end]})
		if i = jsonrpc.SkipSpace(b, end); b[i] == ',' {
			i = jsonrpc.SkipSpace(b, i+1)
		}
	}
	return items, b[i] != ']'
}

// array shrinks the array b: it keeps its first items (Options.Sample,
// within minItems and maxItems), shrinks each within a share of the
// budget, and drops items past minItems from the end while the rest does
// not fit.
func (z *shrinker) array(ctx context.Context, b []byte, v view, budget int, ptr string, depth int) result {
	if v.pinned("array") {
		return raw(b)
	}
	lo, hi := v.items()
	if 2*lo+1 > budget { // lo items cannot fit: keep the array as it is
		return raw(b)
	}
	want := max(z.o.Sample, lo)
	if hi >= 0 {
		want = min(want, hi)
	}
	items, more := firstItems(b, want)
	// Share the budget: the smallest items first, so what they leave goes
	// to the larger ones.
	rem := budget - 1 - len(items) // brackets and commas
	for j, k := range bySize(items) {
		it := &items[k]
		it.res = z.value(ctx, it.val, z.item(v, k, kindOf(it.val[0])), rem/(len(items)-j), ptr+"/"+strconv.Itoa(k), depth+1)
		rem -= it.res.size
	}
	// Items past minItems go from the end while the array is too large.
	n := len(items)
	for n > lo && rem < 0 {
		n--
		rem += items[n].res.size + 1
	}
	var r result
	if more || n < len(items) {
		r.cutAt(Cut{Pointer: ptr, Raw: b, Kind: "array", Kept: n})
	}
	r.add(lbrack)
	for k := range n {
		if k > 0 {
			r.add(comma)
		}
		r.addResult(items[k].res)
	}
	r.add(rbrack)
	return r
}

// object shrinks the object b: it shrinks its large members within
// shares of the budget, drops optional members (the large ones first,
// the largest first) while the rest does not fit, and keeps the small
// optional ones that fit in what is left.
func (z *shrinker) object(ctx context.Context, b []byte, v view, budget int, ptr string, depth int) result {
	if v.pinned("object") {
		return raw(b)
	}
	k := v.keeps(z.keepAll)
	large, fixed, smalls := z.sizeUp(b, k)
	// The small optional members may keep up to half of what is left;
	// the large members share the rest, and what they leave goes back.
	avail := budget - fixed
	reserve := min(smalls, max(0, avail/2))
	rem := z.shareBudget(ctx, large, v, avail-reserve, ptr, depth) + reserve
	if k.droppable {
		rem = dropLargest(large, k.required, rem)
	}
	r, kept, total := z.writeObject(b, large, k, rem)
	if kept < total {
		z.dropped = true
		r.cutAt(Cut{Pointer: ptr, Raw: b, Kind: "object", Kept: kept})
	}
	return r
}

// keeps returns which members an object of v must keep: all of them
// when none may be dropped (keepAll, or see view.required).
func (v view) keeps(keepAll bool) keep {
	required, droppable := v.required()
	return keep{required: required, droppable: droppable && !keepAll}
}

// keep is which members of an object must stay: the required ones, or
// every one unless droppable.
type keep struct {
	required  map[string]bool
	droppable bool
}

// must reports whether the member with the raw key must stay.
func (k keep) must(key []byte) bool { return !k.droppable || isRequired(k.required, key) }

// sizeUp is object's first pass over b. It returns the large members
// (over MinCut), the bytes the object has whatever happens (the braces,
// the members it must keep whole, each large member's key), and the
// bytes of the small optional members.
func (z *shrinker) sizeUp(b []byte, k keep) (large []span, fixed, smalls int) {
	fixed = 1 // the braces, less the comma the last member does not have
	scan(b, nil, func(key, val []byte, at int) {
		cost := len(key) + 1 + len(val) + 1
		if len(val) > z.o.MinCut {
			name, _ := jsonrpc.Unquote(key)
			large = append(large, span{key: key, val: val, at: at, name: name})
			fixed += len(key) + 2
		} else if k.must(key) {
			fixed += cost
		} else {
			smalls += cost
		}
	})
	return large, fixed, smalls
}

// shareBudget shrinks each large member of an object of v within its
// share of rem bytes, the smallest first, so that what a small one does
// not use goes to the larger ones. It returns the bytes left (negative
// when they do not fit).
func (z *shrinker) shareBudget(ctx context.Context, large []span, v view, rem int, ptr string, depth int) int {
	for j, k := range bySize(large) {
		m := &large[k]
		mv := z.member(v, m.name, kindOf(m.val[0]))
		m.res = z.value(ctx, m.val, mv, rem/(len(large)-j), ptr+"/"+escape(m.name), depth+1)
		rem -= m.res.size
	}
	return rem
}

// dropLargest drops optional large members, the largest first, while rem
// is below zero, and returns rem with the bytes they freed.
func dropLargest(large []span, required map[string]bool, rem int) int {
	order := bySize(large)
	for j := len(order) - 1; j >= 0 && rem < 0; j-- {
		m := &large[order[j]]
		if !required[m.name] {
			m.dropped = true
			rem += len(m.key) + 2 + m.res.size
		}
	}
	return rem
}

// writeObject is object's second pass over b: it writes the members in
// their order, each large one as shrunk unless dropped, and the small
// optional ones while they fit in rem (past the first that does not, no
// other). It returns how many of the total members it kept.
func (z *shrinker) writeObject(b []byte, large []span, k keep, rem int) (r result, kept, total int) {
	r.add(lbrace)
	li, full := 0, false
	scan(b, large, func(key, val []byte, _ int) {
		total++
		var res result
		switch {
		case len(val) > z.o.MinCut:
			m := large[li]
			li++
			if m.dropped {
				return
			}
			res = m.res
		case k.must(key):
			res = raw(val)
		default:
			cost := len(key) + 2 + len(val)
			if full || cost > rem {
				full = true
				return
			}
			rem -= cost
			res = raw(val)
		}
		if kept > 0 {
			r.add(comma)
		}
		r.add(key)
		r.add(colon)
		r.addResult(res)
		kept++
	})
	r.add(rbrace)
	return r, kept, total
}

// members calls f with the raw key and value of each member of the JSON
// object b, in order.
func members(b []byte, f func(key, val []byte)) {
	scan(b, nil, func(key, val []byte, _ int) { f(key, val) })
}

// scan calls f with the raw key, value and value offset of each member of
// the JSON object b, in order. Where a member of known (in order) starts,
// its end is known too and the value is not scanned again.
func scan(b []byte, known []span, f func(key, val []byte, at int)) {
	for i := jsonrpc.SkipSpace(b, 1); b[i] != '}'; {
		kend := jsonrpc.SkipValue(b, i)
		v := jsonrpc.SkipSpace(b, jsonrpc.SkipSpace(b, kend)+1)
		var vend int
		if len(known) > 0 && known[0].at == v {
			vend, known = v+len(known[0].val), known[1:]
		} else {
			vend = jsonrpc.SkipValue(b, v)
		}
		f(b[i:kend], b[v:vend], v)
		if i = jsonrpc.SkipSpace(b, vend); b[i] == ',' {
			i = jsonrpc.SkipSpace(b, i+1)
		}
	}
}

// isRequired reports whether the member with the raw key is required.
func isRequired(required map[string]bool, key []byte) bool {
	if len(required) == 0 {
		return false
	}
	if !slices.Contains(key, '\\') {
		return required[string(key[1:len(key)-1])] // no copy: a map lookup
	}
	name, _ := jsonrpc.Unquote(key)
	return required[name]
}

// bySize returns the indexes of spans ordered by the size of their value,
// smallest first (in their order when equal).
func bySize(s []span) []int {
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return len(s[a].val) - len(s[b].val) })
	return idx
}

func kindOf(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	}
	return ""
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escape makes a member name a JSON pointer token (RFC 6901).
func escape(name string) string { return pointerEscaper.Replace(name) }

// appendText appends text as a JSON string that fits sp: at most sp.size
// bytes, at most sp.maxLen code points, padded with spaces to sp.minLen
// (sp.size leaves room for those).
func appendText(out []byte, text string, sp strSpot) []byte {
	room := sp.size - 2
	out = append(out, '"')
	n := 0
	for _, c := range text {
		if sp.maxLen >= 0 && n >= sp.maxLen {
			break
		}
		w := escapedLen(c)
		if w+max(0, sp.minLen-n-1) > room {
			break
		}
		out = appendRune(out, c)
		room -= w
		n++
	}
	for ; n < sp.minLen; n++ {
		out = append(out, ' ')
	}
	return append(out, '"')
}

func escapedLen(c rune) int {
	switch {
	case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
		return 2
	case c < 0x20:
		return 6
	}
	return utf8.RuneLen(c)
}

func appendRune(out []byte, c rune) []byte {
	switch c {
	case '"', '\\':
		return append(out, '\\', byte(c))
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	case '\t':
		return append(out, '\\', 't')
	}
	if c < 0x20 {
		return fmt.Appendf(out, `\u%04x`, c)
	}
	return utf8.AppendRune(out, c)
}
