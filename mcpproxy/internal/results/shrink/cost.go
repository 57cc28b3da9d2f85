package shrink

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// The validator (github.com/google/jsonschema-go) checks a value by
// visits: one call of its validate for one subschema and one value of the
// instance. A visit makes its subschema's in-place keywords visit the
// same value ($ref, $dynamicRef, allOf, anyOf, oneOf, not, if, then,
// else, dependentSchemas), each of them whole, with no memory of what an
// earlier visit found: anyOf and oneOf try every branch, allOf stops only
// at a failure. Its applicators visit the values inside (properties,
// patternProperties, additionalProperties, propertyNames,
// unevaluatedProperties, prefixItems, items, additionalItems, contains,
// unevaluatedItems). So its work is the number of paths through the
// schema's graph times the values they reach, which a small schema makes
// exponential. Its errors grow the same way: a failed visit returns
// "validating <path>: " before the error that failed it, anyOf joins the
// errors of all its branches, and several keywords print the whole value
// (type, enum, const, contains, a string's length and pattern).
//
// Validate counts (affordable), before the validator is called, an upper
// bound of what it would do for one value: every visit it could make
// (then and else both, every target a $dynamicRef may reach, every
// branch), the bytes it reads for keywords that read the value (a
// string's code points, each pattern instruction on each byte, enum and
// const comparisons, uniqueItems hashing), and the text of the errors it
// could build, where a keyword may fail (a type, length, count or
// required member is checked; an enum, pattern or oneOf may always
// fail). A pair (subschema, value) is counted once and its sum reused
// wherever the pair recurs, so the count costs what the distinct pairs
// cost, and it stops as soon as one pair's sum passes the bound: a pair's
// visits are part of every validation that reaches it.
//
// The unit of work is about a nanosecond of one core; the constants were
// measured against the library (v0.4.3) on this project's test machine: a
// visit with little to do took about 300 ns and allocated 176 bytes, a
// pattern about 15 ns per byte and instruction (matchAlloc says what a
// match allocates). A byte of error text is built about twice (the
// message, and its copy in the message around it) in buffers fmt grows by
// doubling: textCopies. The property test checks the count against what
// the validator allocates.
const (
	visitWork  = 256
	visitAlloc = 192
	regexWork  = 8
	textCopies = 4
)

// maxCheckWork and maxCheckAlloc bound what Validate lets the validator
// do for one value: 2^26 units is about 260,000 visits, a tenth of a
// second; 16 MiB is what sixteen such checks at once may hold. A real schema checks a
// Shrink result (a few KB) in a few thousand visits. Past either bound
// Validate refuses the schema for that value (ErrSchema).
const (
	maxCheckWork  = 1 << 26
	maxCheckAlloc = 16 << 20
	// memoBytes is what the count holds per distinct pair.
	memoBytes = 128
)

// satMax is where the counts saturate: sums of two stay far from
// overflowing an int64.
const satMax = 1 << 60

func sat(a int64) int64 { return min(a, satMax) }

// nodeInfo is what the count needs of one subschema, found at Compile.
type nodeInfo struct {
	prefix       int64 // "validating <path or $id>: " and a margin
	text         int64 // the most of its own text (enum, const, names...) one of its errors prints
	compare      int64 // the work of comparing a value with its enum and const
	compareAlloc int64 // and what it allocates
	insts        int64 // the instructions of its pattern's program
}

// newNodeInfo describes sc, whose path from the root (the library's name
// for it in errors) has path bytes; insts is its pattern's program size.
func newNodeInfo(sc *jsonschema.Schema, path, insts int) *nodeInfo {
	in := &nodeInfo{insts: int64(insts)}
	name := int64(len("root"))
	if path > 0 {
		name = int64(path)
	}
	if sc.ID != "" {
		name = int64(len(sc.ID))
	}
	in.prefix = name + 32
	// Each message's fixed words, and the values it prints: the value
	// itself, or the schema's own (%v of an enum, %q of required names).
	in.text = 128
	for _, t := range sc.Types {
		in.text += int64(len(t)) + 4
	}
	// The library compares the value with each of enum and const, making
	// two big.Rat and reflecting on both sides at each level (measured:
	// 175 ns and 122 bytes a string).
	values := slices.Clone(sc.Enum)
	if sc.Const != nil {
		values = append(values, *sc.Const)
	}
	for _, e := range values {
		b, _ := json.Marshal(e)
		in.text += 4*int64(len(b)) + 32
		in.compare += 2*int64(len(b)) + 128
		in.compareAlloc += 160 * nodes(e)
	}
	in.text += 4 * int64(len(sc.Pattern))
	if numeric(sc) {
		in.text += 2048 // a number and a bound, each up to a few hundred digits
	}
	names := func(ss ...*jsonschema.Schema) (n int64) {
		for _, s := range ss {
			if s != nil {
				n += int64(len(s.ID)+len(s.Anchor)+len(s.DynamicAnchor)) + 24
			}
		}
		return n
	}
	in.text += names(sc.AnyOf...) + names(sc.OneOf...) + names(sc.Not, sc.Contains)
	quoted := func(ss []string) (n int64) {
		for _, s := range ss {
			n += 4*int64(len(s)) + 3
		}
		return n
	}
	in.text += quoted(sc.Required)
	for _, k := range sortedKeys(sc.DependentRequired) {
		in.text = max(in.text, 128+4*int64(len(k))+quoted(sc.DependentRequired[k]))
	}
	for _, k := range sortedKeys(sc.DependencyStrings) {
		in.text = max(in.text, 128+4*int64(len(k))+quoted(sc.DependencyStrings[k]))
	}
	return in
}

// nodes counts the values in the JSON value v.
func nodes(v any) int64 {
	n := int64(1)
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			n += nodes(e)
		}
	case []any:
		for _, e := range v {
			n += nodes(e)
		}
	}
	return n
}

// A vcost bounds what the validator does in one visit and everything it
// calls from there.
type vcost struct {
	work  int64 // units of time
	alloc int64 // bytes allocated apart from error text
	// okText and failText bound the error text built when the visit
	// succeeds (branches of anyOf and oneOf that failed, say) and when it
	// fails; errLen bounds the text of the error it returns. A visit
	// that cannot fail (no keyword of it can, see fails) has neither.
	okText, failText, errLen int64
	mayFail                  bool
}

// total returns the work and the bytes allocated, error text included.
func (c vcost) total() (work, alloc int64) {
	text := max(c.okText, c.failText)
	return sat(c.work + 2*text), sat(c.alloc + textCopies*text)
}

// A vnode is one value of the instance, as the count sees it. Its
// members and items are made as the count first reaches them, so values
// no keyword reaches cost nothing.
type vnode struct {
	v     any
	depth int
	size  int64    // the bytes of its JSON; -1 until needed
	names []string // an object's member names, sorted
	kids  []*vnode // an object's values in names' order, or an array's items
	keys  []*vnode // an object's names, as string values (for propertyNames)
	built bool
}

func newVnode(v any, depth int) *vnode { return &vnode{v: v, depth: depth, size: -1} }

// jsonSize returns the bytes of n's JSON, about.
func (n *vnode) jsonSize() int64 {
	if n.size < 0 {
		n.size = sizeOf(n.v)
	}
	return n.size
}

func sizeOf(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		n := int64(2)
		for k, e := range v {
			n += int64(len(k)) + 4 + sizeOf(e)
		}
		return n
	case []any:
		n := int64(2)
		for _, e := range v {
			n += 1 + sizeOf(e)
		}
		return n
	case string:
		return int64(len(v)) + 2
	case float64:
		return 24 // the longest a float64 prints
	}
	return 5 // true, false, null (printed <nil>)
}

// members makes n's members or items.
func (n *vnode) members() {
	if n.built {
		return
	}
	n.built = true
	switch v := n.v.(type) {
	case map[string]any:
		n.names = slices.Sorted(maps.Keys(v))
		for _, k := range n.names {
			n.kids = append(n.kids, newVnode(v[k], n.depth+1))
		}
	case []any:
		for _, e := range v {
			n.kids = append(n.kids, newVnode(e, n.depth+1))
		}
	}
}

// key returns the name of n's member i as a string value.
func (n *vnode) key(i int) *vnode {
	if n.keys == nil {
		n.keys = make([]*vnode, len(n.names))
	}
	if n.keys[i] == nil {
		n.keys[i] = newVnode(n.names[i], n.depth+1)
	}
	return n.keys[i]
}

// A counter counts the visits of one value by the validator.
type counter struct {
	s    *Schema
	memo map[pair]vcost
	// spent is the work of the pairs counted so far (each at least one
	// visit of the validator's, so it is below the validator's own).
	spent int64
	over  bool // a bound is passed: stop counting
}

type pair struct {
	sc *jsonschema.Schema
	n  *vnode
}

// affordable reports whether checking v against s stays within maxCheckWork
// and maxCheckAlloc, and the work its count spent.
func (s *Schema) affordable(v any) (ok bool, spent int64) {
	ct := &counter{s: s, memo: map[pair]vcost{}}
	work, alloc := ct.visit(s.rs.Schema(), newVnode(v, 0)).total()
	return !ct.over && work <= maxCheckWork && alloc <= maxCheckAlloc, ct.spent
}

// charge adds w to the count's own work, and reports whether it may go on.
func (ct *counter) charge(w int64) bool {
	ct.spent = sat(ct.spent + w)
	if ct.spent > maxCheckWork || int64(len(ct.memo))*memoBytes > maxCheckAlloc {
		ct.over = true
	}
	return !ct.over
}

// visit bounds the validator's visit of the value n for sc (its function
// validate in validate.go), following it keyword by keyword.
func (ct *counter) visit(sc *jsonschema.Schema, n *vnode) vcost {
	if ct.over {
		return vcost{work: satMax}
	}
	if c, ok := ct.memo[pair{sc, n}]; ok {
		return c
	}
	if !ct.charge(visitWork) {
		return vcost{work: satMax}
	}
	s, in := ct.s, ct.s.info[sc]
	c := vcost{work: visitWork, alloc: visitAlloc}
	var failMore, childErr int64
	// A child visit whose failure ends this one: its error is returned,
	// and what it builds when it succeeds is built in either case.
	seq := func(ch *jsonschema.Schema, cn *vnode) {
		x := ct.visit(ch, cn)
		c.work, c.alloc, c.okText = sat(c.work+x.work), sat(c.alloc+x.alloc), sat(c.okText+x.okText)
		if x.mayFail {
			c.mayFail = true
			failMore, childErr = max(failMore, x.failText-x.okText), max(childErr, x.errLen)
		}
	}
	// A child visit whose failure this one uses or ignores, and goes on.
	branch := func(ch *jsonschema.Schema, cn *vnode) vcost {
		x := ct.visit(ch, cn)
		c.work, c.alloc, c.okText = sat(c.work+x.work), sat(c.alloc+x.alloc), sat(c.okText+max(x.okText, x.failText))
		return x
	}
	fails, own := ct.fails(sc, in, n)
	c.mayFail = fails
	for _, t := range s.refs[sc] {
		seq(t, n)
	}
	if sc.DynamicRef != "" { // a search of the stack of visits
		c.work = sat(c.work + int64(n.depth+1)*int64(s.chain+1)*16)
	}
	if sc.Enum != nil || sc.Const != nil {
		c.work, c.alloc = sat(c.work+in.compare), sat(c.alloc+in.compareAlloc)
	}
	if str, ok := n.v.(string); ok && (sc.MinLength != nil || sc.MaxLength != nil || sc.Pattern != "") {
		c.work = sat(c.work + int64(len(str))*(1+in.insts*regexWork))
		if sc.Pattern != "" {
			c.alloc = sat(c.alloc + matchAlloc(len(str), in.insts))
		}
	}
	for _, ch := range sc.AllOf {
		seq(ch, n)
	}
	// anyOf fails when every branch does, with all their errors.
	var anyErr int64
	if sc.AnyOf != nil {
		all, text := true, 128+in.text
		for _, ch := range sc.AnyOf {
			x := branch(ch, n)
			all, text = all && x.mayFail, sat(text+x.errLen+1)
		}
		if all {
			c.mayFail, anyErr = true, text
		}
	}
	for _, ch := range sc.OneOf {
		branch(ch, n)
	}
	for _, ch := range []*jsonschema.Schema{sc.Not, sc.If} {
		if ch != nil {
			branch(ch, n)
		}
	}
	for _, ch := range []*jsonschema.Schema{sc.Then, sc.Else} {
		if ch != nil {
			seq(ch, n)
		}
	}
	switch n.v.(type) {
	case []any:
		ct.items(sc, n, &c, seq, branch)
	case map[string]any:
		if !ct.properties(sc, n, &c, seq) {
			return vcost{work: satMax}
		}
	}
	if c.mayFail {
		c.errLen = sat(in.prefix + max(own, childErr, anyErr))
		c.failText = sat(c.okText + failMore + c.errLen)
	}
	ct.memo[pair{sc, n}] = c
	if w, a := c.total(); w > maxCheckWork || a > maxCheckAlloc {
		ct.over = true // the whole check costs at least this pair
	}
	return c
}

// fails reports whether a keyword of sc itself (not of a subschema) may
// fail for n, and the most text its error may have. Where the check is
// cheap (type, lengths, counts, required members) it is made; where it
// is not (enum, const, pattern, uniqueItems, contains, numbers, oneOf,
// not), the keyword may fail. The value's text counts where a failing
// keyword prints it.
func (ct *counter) fails(sc *jsonschema.Schema, in *nodeInfo, n *vnode) (fails bool, text int64) {
	prints, names := false, int64(0)
	note := func(p bool) { fails, prints = true, prints || p }
	if (sc.Type != "" || sc.Types != nil) && !typeOK(sc, n.v) {
		note(true)
	}
	if sc.Enum != nil || sc.Const != nil {
		note(true)
	}
	if len(sc.OneOf) > 0 || sc.Not != nil || sc.DynamicRef != "" {
		note(false)
	}
	outside := func(k int, lo, hi *int) bool { return lo != nil && k < *lo || hi != nil && k > *hi }
	switch v := n.v.(type) {
	case string:
		if sc.Pattern != "" || outside(utf8.RuneCountInString(v), sc.MinLength, sc.MaxLength) {
			note(true)
		}
	case float64:
		if numeric(sc) {
			note(false)
		}
	case []any:
		if sc.Contains != nil {
			note(true)
		}
		if sc.UniqueItems || outside(len(v), sc.MinItems, sc.MaxItems) {
			note(false)
		}
	case map[string]any:
		if outside(len(v), sc.MinProperties, sc.MaxProperties) || missing(v, sc.Required) {
			note(false)
		}
		for k, names := range sc.DependentRequired {
			if _, ok := v[k]; ok && missing(v, names) {
				note(false)
			}
		}
		for k, names := range sc.DependencyStrings {
			if _, ok := v[k]; ok && missing(v, names) {
				note(false)
			}
		}
		if sc.AdditionalProperties != nil && isFalse(sc.AdditionalProperties) {
			for k := range v { // the names it may list (patterns aside)
				if _, ok := sc.Properties[k]; !ok {
					note(false)
					names += 4*int64(len(k)) + 3
				}
			}
		}
	}
	if fails {
		text = in.text + names
	}
	if prints {
		text += 4*n.jsonSize() + 32
	}
	return fails, text
}

// typeOK reports whether v has a type sc's type keyword allows, as the
// library decides it ("integer" for a float64 with no fraction).
func typeOK(sc *jsonschema.Schema, v any) bool {
	var t string
	switch v := v.(type) {
	case map[string]any:
		t = "object"
	case []any:
		t = "array"
	case string:
		t = "string"
	case bool:
		t = "boolean"
	case float64:
		t = "number"
		if _, f := math.Modf(v); f == 0 {
			t = "integer"
		}
	case nil:
		t = "null"
	}
	ok := func(want string) bool { return want == t || want == "number" && t == "integer" }
	return sc.Type != "" && ok(sc.Type) || slices.ContainsFunc(sc.Types, ok)
}

func missing(v map[string]any, names []string) bool {
	for _, k := range names {
		if _, ok := v[k]; !ok {
			return true
		}
	}
	return false
}

// matchAlloc bounds what one match of a program of insts instructions
// on n bytes allocates: the backtracker's bit vector of instructions
// times positions (at most 32 KiB), or the automaton's queues of threads.
func matchAlloc(n int, insts int64) int64 {
	return 2*min(insts*(int64(n)+1)/8, 32<<10) + 64*insts
}

func numeric(sc *jsonschema.Schema) bool {
	return sc.MultipleOf != nil || sc.Minimum != nil || sc.Maximum != nil || sc.ExclusiveMinimum != nil || sc.ExclusiveMaximum != nil
}

// items counts the array keywords of sc for the array n.
func (ct *counter) items(sc *jsonschema.Schema, n *vnode, c *vcost, seq func(*jsonschema.Schema, *vnode), branch func(*jsonschema.Schema, *vnode) vcost) {
	n.members()
	// Annotations: the items evaluated, merged into the caller's.
	c.work = sat(c.work + 16*int64(len(n.kids)))
	c.alloc = sat(c.alloc + 16*int64(len(n.kids)))
	if sc.UniqueItems { // each item hashed, equal hashes compared
		c.work = sat(c.work + 2*n.jsonSize() + 64*int64(len(n.kids)))
		c.alloc = sat(c.alloc + 64*int64(len(n.kids)))
	}
	for i, it := range n.kids {
		switch {
		case ct.s.draft7 && sc.ItemsArray != nil && i < len(sc.ItemsArray):
			seq(sc.ItemsArray[i], it)
		case ct.s.draft7 && sc.ItemsArray != nil && sc.AdditionalItems != nil:
			seq(sc.AdditionalItems, it)
		case !ct.s.draft7 && i < len(sc.PrefixItems):
			seq(sc.PrefixItems[i], it)
		case sc.ItemsArray == nil && sc.Items != nil:
			seq(sc.Items, it)
		}
		if sc.Contains != nil {
			branch(sc.Contains, it)
		}
		if sc.UnevaluatedItems != nil {
			seq(sc.UnevaluatedItems, it)
		}
	}
}

// properties counts the object keywords of sc for the object n; false
// when a bound is passed while matching patterns.
func (ct *counter) properties(sc *jsonschema.Schema, n *vnode, c *vcost, seq func(*jsonschema.Schema, *vnode)) bool {
	n.members()
	m := int64(len(n.names))
	// Each property of the schema is looked up; the members evaluated are
	// noted in maps merged into the caller's annotations (measured: 530
	// bytes more for a visit that evaluates one member).
	look := int64(len(sc.Properties) + len(sc.Required) + len(sc.DependentRequired) + len(sc.DependencyStrings))
	evaluated := int64(0)
	defer func() {
		if evaluated > 0 {
			c.alloc = sat(c.alloc + 640 + 64*evaluated)
		}
	}()
	c.work = sat(c.work + 32*look + 64*m)
	c.alloc = sat(c.alloc + 16*look + 16*m)
	pats := ct.s.patterns[sc]
	ap := sc.AdditionalProperties
	for i, name := range n.names {
		kid := n.kids[i]
		matched := false
		if p, ok := sc.Properties[name]; ok {
			seq(p, kid)
			matched = true
		}
		for _, pp := range pats {
			w := (int64(len(name)) + 1) * int64(pp.insts) * regexWork
			c.work, c.alloc = sat(c.work+w), sat(c.alloc+matchAlloc(len(name), int64(pp.insts)))
			if !ct.charge(w) {
				return false
			}
			if pp.re.MatchString(name) {
				seq(pp.s, kid)
				matched = true
			}
		}
		if ap != nil && !matched && !isFalse(ap) {
			seq(ap, kid)
			matched = true
		}
		if matched || sc.UnevaluatedProperties != nil {
			evaluated++
		}
		if sc.PropertyNames != nil {
			seq(sc.PropertyNames, n.key(i))
		}
		if sc.UnevaluatedProperties != nil {
			seq(sc.UnevaluatedProperties, kid)
		}
		if d := sc.DependentSchemas[name]; d != nil {
			seq(d, n)
		}
		if d := sc.DependencySchemas[name]; d != nil {
			seq(d, n)
		}
	}
	return true
}
