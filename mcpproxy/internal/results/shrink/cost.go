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
// Before it calls the validator, Validate counts (in affordable) an upper
// bound of what the validator would do for one value: every visit it
// could make (then and else both, every target a $dynamicRef may reach,
// every branch), the bytes it reads for keywords that read the value (a
// string's code points, each pattern instruction on each byte, enum and
// const comparisons, uniqueItems hashing), and the text of the errors it
// could build where a keyword may fail (a type, length, count or required
// member is checked; an enum, pattern or oneOf may always fail). Each pair
// of a subschema and a value is counted once and its sum reused wherever
// the pair recurs, so the count costs what the distinct pairs cost. The
// count stops as soon as one pair's sum passes the bound, because a
// pair's visits are part of every validation that reaches it.
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
	name := int64(len("root"))
	if path > 0 {
		name = int64(path)
	}
	if sc.ID != "" {
		name = int64(len(sc.ID))
	}
	in := &nodeInfo{insts: int64(insts), prefix: name + 32}
	// Each message's fixed words, and the values it prints: the value
	// itself, or the schema's own (%v of an enum, %q of required names).
	in.text = 128
	for _, t := range sc.Types {
		in.text += int64(len(t)) + 4
	}
	in.addValues(sc)
	in.text += 4 * int64(len(sc.Pattern))
	if numeric(sc) {
		in.text += 2048 // a number and a bound, each up to a few hundred digits
	}
	in.text += schemaNames(sc.AnyOf...) + schemaNames(sc.OneOf...) + schemaNames(sc.Not, sc.Contains)
	in.text += quoted(sc.Required)
	// A dependency's error names its member and the members it requires.
	in.text = max(in.text, dependencyText(sc.DependentRequired), dependencyText(sc.DependencyStrings))
	return in
}

// addValues counts sc's enum and const values: the text an error prints
// of each, and the cost of comparing a value with each. The library makes
// two big.Rat and reflects on both sides at each level of a comparison
// (measured: 175 ns and 122 bytes a string).
func (in *nodeInfo) addValues(sc *jsonschema.Schema) {
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
}

// schemaNames bounds the text an error prints to name the subschemas ss
// (nil ones are skipped).
func schemaNames(ss ...*jsonschema.Schema) (n int64) {
	for _, s := range ss {
		if s != nil {
			n += int64(len(s.ID)+len(s.Anchor)+len(s.DynamicAnchor)) + 24
		}
	}
	return n
}

// quoted bounds the text of the names ss printed with %q.
func quoted(ss []string) (n int64) {
	for _, s := range ss {
		n += 4*int64(len(s)) + 3
	}
	return n
}

// dependencyText bounds the text of the error of one dependency of deps
// (dependentRequired, or draft-07's dependencies of names): the most any
// one of them prints.
func dependencyText(deps map[string][]string) (most int64) {
	for k, names := range deps {
		most = max(most, 128+4*int64(len(k))+quoted(names))
	}
	return most
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

// A counter bounds the visits the validator would make to check one
// value, and what they would cost.
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
// validate in validate.go), following it keyword by keyword. Its child
// visits are counted in the order the validator makes them, so that a
// count that passes a bound stops where the validator would be.
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
	in := ct.s.info[sc]
	t := tally{ct: ct, c: vcost{work: visitWork, alloc: visitAlloc}}
	var own int64
	t.c.mayFail, own = ct.fails(sc, in, n)
	for _, ref := range ct.s.refs[sc] {
		t.seq(ref, n)
	}
	t.reads(sc, in, n)
	anyErr := t.inPlace(sc, in, n)
	switch n.v.(type) {
	case []any:
		ct.items(sc, n, &t)
	case map[string]any:
		if !ct.properties(sc, n, &t) {
			return vcost{work: satMax}
		}
	}
	c := t.c
	if c.mayFail {
		c.errLen = sat(in.prefix + max(own, t.childErr, anyErr))
		c.failText = sat(c.okText + t.failMore + c.errLen)
	}
	ct.memo[pair{sc, n}] = c
	if w, a := c.total(); w > maxCheckWork || a > maxCheckAlloc {
		ct.over = true // the whole check costs at least this pair
	}
	return c
}

// A tally sums the cost of one visit as the count goes through its
// keywords and child visits.
type tally struct {
	ct *counter
	c  vcost
	// failMore is the most text a failing child adds to what it builds
	// when it succeeds, and childErr the longest error a child returns.
	failMore, childErr int64
}

// seq counts a child visit whose failure ends this one: its error is
// returned, and what it builds when it succeeds is built in either case.
func (t *tally) seq(ch *jsonschema.Schema, cn *vnode) {
	x := t.ct.visit(ch, cn)
	c := &t.c
	c.work, c.alloc, c.okText = sat(c.work+x.work), sat(c.alloc+x.alloc), sat(c.okText+x.okText)
	if x.mayFail {
		c.mayFail = true
		t.failMore, t.childErr = max(t.failMore, x.failText-x.okText), max(t.childErr, x.errLen)
	}
}

// branch counts a child visit whose failure this one uses or ignores
// before it goes on (anyOf, oneOf, not, if, contains), and returns it.
func (t *tally) branch(ch *jsonschema.Schema, cn *vnode) vcost {
	x := t.ct.visit(ch, cn)
	c := &t.c
	c.work, c.alloc, c.okText = sat(c.work+x.work), sat(c.alloc+x.alloc), sat(c.okText+max(x.okText, x.failText))
	return x
}

// reads counts sc's keywords that read the value n itself: a
// $dynamicRef's search of the stack of visits, the comparisons with enum
// and const, and a string's length and pattern.
func (t *tally) reads(sc *jsonschema.Schema, in *nodeInfo, n *vnode) {
	c := &t.c
	if sc.DynamicRef != "" {
		c.work = sat(c.work + int64(n.depth+1)*int64(t.ct.s.chain+1)*16)
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
}

// inPlace counts the visits of the same value n by sc's allOf, anyOf,
// oneOf, not, if, then and else. anyOf fails when every branch does, with
// all their errors: anyErr is the text of that error when every branch
// may fail, else 0.
func (t *tally) inPlace(sc *jsonschema.Schema, in *nodeInfo, n *vnode) (anyErr int64) {
	for _, ch := range sc.AllOf {
		t.seq(ch, n)
	}
	if sc.AnyOf != nil {
		all, text := true, 128+in.text
		for _, ch := range sc.AnyOf {
			x := t.branch(ch, n)
			all, text = all && x.mayFail, sat(text+x.errLen+1)
		}
		if all {
			t.c.mayFail, anyErr = true, text
		}
	}
	for _, ch := range sc.OneOf {
		t.branch(ch, n)
	}
	for _, ch := range []*jsonschema.Schema{sc.Not, sc.If} {
		if ch != nil {
			t.branch(ch, n)
		}
	}
	for _, ch := range []*jsonschema.Schema{sc.Then, sc.Else} {
		if ch != nil {
			t.seq(ch, n)
		}
	}
	return anyErr
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
		var objectFails bool
		if objectFails, names = memberFails(sc, v); objectFails {
			note(false)
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

// memberFails reports whether sc's keywords on the members of the object
// v may fail (a count, a required or dependent member, a member
// additionalProperties false refuses), and the text of the names the
// last may list (patterns aside). None of them prints the value.
func memberFails(sc *jsonschema.Schema, v map[string]any) (fails bool, names int64) {
	fails = outside(len(v), sc.MinProperties, sc.MaxProperties) || missing(v, sc.Required) ||
		missingDependency(v, sc.DependentRequired) || missingDependency(v, sc.DependencyStrings)
	if sc.AdditionalProperties != nil && isFalse(sc.AdditionalProperties) {
		for k := range v {
			if _, ok := sc.Properties[k]; !ok {
				fails = true
				names += 4*int64(len(k)) + 3
			}
		}
	}
	return fails, names
}

// outside reports whether k is below lo or above hi (nil: no bound).
func outside(k int, lo, hi *int) bool { return lo != nil && k < *lo || hi != nil && k > *hi }

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

// missing reports whether the object v lacks one of names.
func missing(v map[string]any, names []string) bool {
	for _, k := range names {
		if _, ok := v[k]; !ok {
			return true
		}
	}
	return false
}

// missingDependency reports whether the object v has a member of deps
// but lacks one of the names it requires.
func missingDependency(v map[string]any, deps map[string][]string) bool {
	for k, names := range deps {
		if _, ok := v[k]; ok && missing(v, names) {
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
func (ct *counter) items(sc *jsonschema.Schema, n *vnode, t *tally) {
	n.members()
	c := &t.c
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
			t.seq(sc.ItemsArray[i], it)
		case ct.s.draft7 && sc.ItemsArray != nil && sc.AdditionalItems != nil:
			t.seq(sc.AdditionalItems, it)
		case !ct.s.draft7 && i < len(sc.PrefixItems):
			t.seq(sc.PrefixItems[i], it)
		case sc.ItemsArray == nil && sc.Items != nil:
			t.seq(sc.Items, it)
		}
		if sc.Contains != nil {
			t.branch(sc.Contains, it)
		}
		if sc.UnevaluatedItems != nil {
			t.seq(sc.UnevaluatedItems, it)
		}
	}
}

// properties counts the object keywords of sc for the object n; false
// when a bound is passed while matching patterns.
func (ct *counter) properties(sc *jsonschema.Schema, n *vnode, t *tally) bool {
	n.members()
	c := &t.c
	m := int64(len(n.names))
	// Each property of the schema is looked up; the members evaluated are
	// noted in maps merged into the caller's annotations (measured: 530
	// bytes more for a visit that evaluates one member).
	look := int64(len(sc.Properties) + len(sc.Required) + len(sc.DependentRequired) + len(sc.DependencyStrings))
	c.work = sat(c.work + 32*look + 64*m)
	c.alloc = sat(c.alloc + 16*look + 16*m)
	pats := ct.s.patterns[sc]
	evaluated := int64(0)
	for i, name := range n.names {
		kid := n.kids[i]
		matched, ok := ct.member(sc, pats, name, kid, t)
		if !ok {
			return false
		}
		if matched || sc.UnevaluatedProperties != nil {
			evaluated++
		}
		if sc.PropertyNames != nil {
			t.seq(sc.PropertyNames, n.key(i))
		}
		if sc.UnevaluatedProperties != nil {
			t.seq(sc.UnevaluatedProperties, kid)
		}
		if d := sc.DependentSchemas[name]; d != nil {
			t.seq(d, n)
		}
		if d := sc.DependencySchemas[name]; d != nil {
			t.seq(d, n)
		}
	}
	if evaluated > 0 {
		c.alloc = sat(c.alloc + 640 + 64*evaluated)
	}
	return true
}

// member counts the visits of the member name, of value kid, by the
// subschemas sc gives it: its property, each pattern of pats (sc's
// patternProperties) it matches, and else additionalProperties. Each
// pattern costs its match. matched reports whether any of them applies;
// ok is false when a bound is passed while matching.
func (ct *counter) member(sc *jsonschema.Schema, pats []patternProp, name string, kid *vnode, t *tally) (matched, ok bool) {
	c := &t.c
	if p, found := sc.Properties[name]; found {
		t.seq(p, kid)
		matched = true
	}
	for _, pp := range pats {
		w := (int64(len(name)) + 1) * int64(pp.insts) * regexWork
		c.work, c.alloc = sat(c.work+w), sat(c.alloc+matchAlloc(len(name), int64(pp.insts)))
		if !ct.charge(w) {
			return matched, false
		}
		if pp.re.MatchString(name) {
			t.seq(pp.s, kid)
			matched = true
		}
	}
	if ap := sc.AdditionalProperties; ap != nil && !matched && !isFalse(ap) {
		t.seq(ap, kid)
		matched = true
	}
	return matched, true
}
