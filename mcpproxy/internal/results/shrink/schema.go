package shrink

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxSchemaSize is the largest schema Compile accepts, in bytes. A tool's
// outputSchema comes from its upstream, which may be hostile; real ones
// are a few KB. Compile runs when the tool's first large result is
// rewritten, so its time is that response's: the library's work is per
// subschema, and 256 KiB of small subschemas (5,000 of them) took 0.3 to
// 0.6 s of CPU with the index here, 64 KiB 45 to 110 ms.
const MaxSchemaSize = 64 << 10

// MaxSchemaDepth is the deepest nesting of JSON objects and arrays Compile
// accepts, and maxNested bounds the sum of the sizes of all of them. The
// library decodes each level's bytes again for every level around it, so
// its work is that sum: 6 MB of it (64 KiB under 99 levels) took 120 ms
// of CPU, 4,000 levels of 20 bytes 17 s. Real schemas nest a few dozen
// levels at most and are far smaller.
const (
	MaxSchemaDepth = 100
	maxNested      = 2 << 20
)

// The regular expressions of a schema (pattern, patternProperties) are
// compiled by the library and matched at a cost of each byte times each
// instruction of the program (a 4,000-instruction pattern took 0.6 s on
// 10 KB). maxPattern bounds one pattern's text; maxInsts all the
// programs' instructions together (`[a-z]{1000}` alone has 1,002). Real
// patterns are a few dozen instructions.
const (
	maxPattern = 4 << 10
	maxInsts   = 1 << 16
)

// maxFanout bounds the visits the validator makes to one value without
// descending into it: a subschema visits each of its references, allOf,
// anyOf, oneOf, not, if, then, else and dependentSchemas, and visits
// again what they reach, one visit per path. Twenty levels of anyOf, each
// naming the next twice, are four million visits in 1.3 KB (the validator
// took 200 s and 11.8 GB on a 20 KB value). Real schemas (unions of a few
// dozen references, each an allOf of a few) stay in the hundreds.
const maxFanout = 1 << 12

// ErrSchema is wrapped by every error of Compile: the schema is too large,
// not JSON, not a JSON Schema of a draft the library validates (draft-07
// or 2020-12), refers to a schema outside itself, could recurse forever,
// or has more paths or pattern instructions than the bounds above. Shrink
// and Validate wrap it too when checking a value against the schema would
// cost more than Validate allows (see maxCheckWork): the schema is unusable
// for that value, and its message says which bound was hit.
var ErrSchema = errors.New("shrink: unusable schema")

// ErrRemoteRef is wrapped by Compile's error for a $ref to a schema that
// is not part of the compiled one: nothing is ever fetched.
var ErrRemoteRef = errors.New("shrink: $ref to a remote schema")

// Schema is a compiled JSON Schema (draft 2020-12 by default, draft-07
// when its $schema says so) together with what Shrink needs to find the
// subschema of each member. Make one with Compile; the zero value is not
// usable, but a nil *Schema stands for "no schema": any object is valid.
// A Schema is never modified after Compile, so it is safe for concurrent
// use by any number of goroutines.
type Schema struct {
	rs     *jsonschema.Resolved
	draft7 bool
	// refs maps a schema with $ref or $dynamicRef to the schemas they
	// name ($dynamicRef: its lexical target and every $dynamicAnchor of
	// that name, which it may reach at validation time).
	refs map[*jsonschema.Schema][]*jsonschema.Schema
	// patterns holds the compiled patternProperties of each schema.
	patterns map[*jsonschema.Schema][]patternProp
	// info holds what the cost of validating a value counts (cost.go).
	info map[*jsonschema.Schema]*nodeInfo
	// chain is the most in-place edges one path follows (see inPlace).
	chain int
}

type patternProp struct {
	re    *regexp.Regexp
	s     *jsonschema.Schema
	insts int // the instructions of its program
}

// Compile parses and resolves the JSON Schema raw. A $ref must point
// inside raw: a remote one is an error wrapping ErrRemoteRef, and nothing
// is fetched. A schema that validation could follow around a loop of
// references without descending into the instance (`{"$ref":"#"}`) is
// refused, since it would exhaust the stack; so is one whose in-place
// keywords fan out to more than maxFanout visits of one value. Every
// error wraps ErrSchema, and its text is at most a few hundred bytes.
func Compile(raw []byte) (*Schema, error) {
	if len(raw) > MaxSchemaSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrSchema, len(raw), MaxSchemaSize)
	}
	if d, nested := depth(raw); d > MaxSchemaDepth || nested > maxNested {
		return nil, fmt.Errorf("%w: nested %d levels deep (at most %d), %d bytes inside one another (at most %d)", ErrSchema, d, MaxSchemaDepth, nested, maxNested)
	}
	var root jsonschema.Schema
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrSchema, clip(err.Error()))
	}
	switch root.Schema {
	case "", "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema#",
		"https://json-schema.org/draft/2020-12/schema":
	default:
		return nil, fmt.Errorf("%w: $schema %q: only draft-07 and draft 2020-12 are supported", ErrSchema, clip(root.Schema))
	}
	// The library compiles every pattern as it resolves: count them first.
	insts, err := programs(&root)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrSchema, clip(err.Error()))
	}
	rs, err := root.Resolve(&jsonschema.ResolveOptions{Loader: func(u *url.URL) (*jsonschema.Schema, error) {
		return nil, ErrRemoteRef
	}})
	if err != nil {
		if errors.Is(err, ErrRemoteRef) {
			return nil, fmt.Errorf("%w: %w; %s", ErrSchema, ErrRemoteRef, clip(err.Error()))
		}
		return nil, fmt.Errorf("%w: %s", ErrSchema, clip(err.Error()))
	}
	s := &Schema{rs: rs, draft7: strings.Contains(root.Schema, "draft-07"), refs: map[*jsonschema.Schema][]*jsonschema.Schema{},
		patterns: map[*jsonschema.Schema][]patternProp{}, info: map[*jsonschema.Schema]*nodeInfo{}}
	if err := s.index(&root, insts); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrSchema, clip(err.Error()))
	}
	if err := s.checkInPlace(&root); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	return s, nil
}

// Validate reports whether the JSON value instance is valid against s: nil
// when it is, else an error whose text is at most a few hundred bytes. It
// decodes the whole instance, so it is meant for small values (Shrink's
// output). Before the library sees the value, Validate counts what the
// library would do with it (see maxCheckWork); past the bound it returns an
// error wrapping ErrSchema and the library is not called. A nil s accepts
// any JSON object.
func (s *Schema) Validate(instance []byte) error {
	var v any
	if err := json.Unmarshal(instance, &v); err != nil {
		return fmt.Errorf("shrink: instance: %w", err)
	}
	if s == nil {
		if _, ok := v.(map[string]any); !ok {
			return errors.New("shrink: instance is not a JSON object")
		}
		return nil
	}
	if ok, _ := s.affordable(v); !ok {
		return fmt.Errorf("%w: checking a value of %d bytes against it would cost the validator more than %d units of work or %d bytes",
			ErrSchema, len(instance), maxCheckWork, maxCheckAlloc)
	}
	if err := s.rs.Validate(v); err != nil {
		return fmt.Errorf("shrink: invalid: %s", clip(err.Error()))
	}
	return nil
}

// maxErrText bounds the text of an error of this package taken from the
// library, whose messages can repeat the value and every branch tried.
const maxErrText = 300

// clip returns at most maxErrText bytes of msg (cut on a UTF-8 boundary).
func clip(msg string) string {
	if len(msg) <= maxErrText {
		return msg
	}
	cut := maxErrText
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + fmt.Sprintf("… (%d bytes)", len(msg))
}

// programs returns the instructions of the program of each pattern and
// patternProperties key in the schema root, checked against maxPattern
// and maxInsts before the library compiles them.
func programs(root *jsonschema.Schema) (map[string]int, error) {
	insts := map[string]int{}
	total := 0
	add := func(pat string) error {
		if _, done := insts[pat]; done {
			return nil
		}
		if len(pat) > maxPattern {
			return fmt.Errorf("a pattern of %d bytes (at most %d)", len(pat), maxPattern)
		}
		re, err := syntax.Parse(pat, syntax.Perl)
		if err != nil {
			return fmt.Errorf("pattern %q: %w", pat, err)
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			return fmt.Errorf("pattern %q: %w", pat, err)
		}
		insts[pat] = len(prog.Inst)
		if total += len(prog.Inst); total > maxInsts {
			return fmt.Errorf("its patterns have more than %d instructions", maxInsts)
		}
		return nil
	}
	var walk func(sc *jsonschema.Schema) error
	walk = func(sc *jsonschema.Schema) error {
		if sc.Pattern != "" {
			if err := add(sc.Pattern); err != nil {
				return err
			}
		}
		for _, pat := range sortedKeys(sc.PatternProperties) {
			if err := add(pat); err != nil {
				return err
			}
		}
		var err error
		eachChild(sc, func(_ int, c *jsonschema.Schema) {
			if err == nil {
				err = walk(c)
			}
		})
		return err
	}
	return insts, walk(root)
}

// depth returns how deep objects and arrays nest in raw (JSON or not),
// and the sum of their sizes.
func depth(raw []byte) (most, nested int) {
	var open []int // where each enclosing object or array starts
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			open = append(open, i)
			most = max(most, len(open))
		case (c == '}' || c == ']') && len(open) > 0:
			nested += i - open[len(open)-1]
			open = open[:len(open)-1]
		}
	}
	return most, nested
}

// index fills s.refs, s.patterns and s.info. References are resolved the
// way the library does (base URIs from $id, anchors, JSON pointers) so
// that Shrink follows the same schema the validator will. insts gives
// each pattern's instructions (see programs).
func (s *Schema) index(root *jsonschema.Schema, insts map[string]int) error {
	x := &indexer{s: s, insts: insts, uris: map[string]*jsonschema.Schema{"": root},
		anchors: map[string]*jsonschema.Schema{}, dynamic: map[string][]*jsonschema.Schema{}}
	if err := x.walk(root, &url.URL{}, 0); err != nil {
		return err
	}
	// Every name is known once the whole schema is walked: a reference
	// may name a subschema that comes after it.
	for _, n := range x.all {
		if err := x.link(n); err != nil {
			return err
		}
	}
	return nil
}

// indexer holds one run of Schema.index: every subschema met, and the
// names a reference may use for them.
type indexer struct {
	s     *Schema
	insts map[string]int
	all   []located
	// uris maps a base URI (from $id) to its schema, anchors a base URI,
	// "#" and an anchor's name to its schema, and dynamic the name of a
	// $dynamicAnchor to every schema that declares it.
	uris    map[string]*jsonschema.Schema
	anchors map[string]*jsonschema.Schema
	dynamic map[string][]*jsonschema.Schema
}

// located is a subschema and the base URI its references resolve against.
type located struct {
	s    *jsonschema.Schema
	base *url.URL
}

// walk indexes sc and every subschema under it. base is the base URI
// around sc, and path the length of sc's path from the root (the
// library's name for sc in its errors).
func (x *indexer) walk(sc *jsonschema.Schema, base *url.URL, path int) error {
	base, err := x.name(sc, base)
	if err != nil {
		return err
	}
	if err := x.compilePatterns(sc); err != nil {
		return err
	}
	x.s.info[sc] = newNodeInfo(sc, path, x.insts[sc.Pattern])
	x.all = append(x.all, located{sc, base})
	eachChild(sc, func(seg int, c *jsonschema.Schema) {
		if err == nil {
			err = x.walk(c, base, path+seg)
		}
	})
	return err
}

// name records the names sc answers to ($id, and $anchor and
// $dynamicAnchor in 2020-12) and returns the base URI of the subschemas
// under it. In draft-07 an $id beside a $ref is ignored, as the $ref's
// siblings are, and an $id that is only "#name" is an anchor.
func (x *indexer) name(sc *jsonschema.Schema, base *url.URL) (*url.URL, error) {
	draft7 := x.s.draft7
	if sc.ID != "" && !(draft7 && sc.Ref != "") {
		id, err := url.Parse(sc.ID)
		if err != nil {
			return nil, err
		}
		if draft7 && id.Fragment != "" && id.Path == "" && id.Host == "" {
			x.anchors[base.String()+"#"+id.Fragment] = sc
		} else {
			base = base.ResolveReference(id)
			x.uris[base.String()] = sc
		}
	}
	if !draft7 {
		if sc.Anchor != "" {
			x.anchors[base.String()+"#"+sc.Anchor] = sc
		}
		if sc.DynamicAnchor != "" {
			x.anchors[base.String()+"#"+sc.DynamicAnchor] = sc
			x.dynamic[sc.DynamicAnchor] = append(x.dynamic[sc.DynamicAnchor], sc)
		}
	}
	return base, nil
}

// compilePatterns compiles sc's patternProperties into s.patterns, in
// the order of their keys.
func (x *indexer) compilePatterns(sc *jsonschema.Schema) error {
	for _, pat := range sortedKeys(sc.PatternProperties) {
		re, err := regexp.Compile(pat)
		if err != nil {
			return err
		}
		x.s.patterns[sc] = append(x.s.patterns[sc], patternProp{re, sc.PatternProperties[pat], x.insts[pat]})
	}
	return nil
}

// link records in s.refs the schemas n's $ref and $dynamicRef reach: a
// $dynamicRef reaches its lexical target and, at validation time, any
// $dynamicAnchor of the same name.
func (x *indexer) link(n located) error {
	refs := x.s.refs
	if n.s.Ref != "" {
		t, err := x.resolve(n, n.s.Ref)
		if err != nil {
			return err
		}
		refs[n.s] = append(refs[n.s], t)
	}
	if n.s.DynamicRef != "" {
		t, err := x.resolve(n, n.s.DynamicRef)
		if err != nil {
			return err
		}
		refs[n.s] = append(refs[n.s], t)
		if i := strings.IndexByte(n.s.DynamicRef, '#'); i >= 0 {
			refs[n.s] = append(refs[n.s], x.dynamic[n.s.DynamicRef[i+1:]]...)
		}
	}
	return nil
}

// resolve returns the schema ref names, from the subschema n: a whole
// document, a JSON pointer into one, or an anchor. A document that is
// not part of the schema is an error wrapping ErrRemoteRef.
func (x *indexer) resolve(n located, ref string) (*jsonschema.Schema, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return nil, err
	}
	u = n.base.ResolveReference(u)
	frag := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	doc := x.uris[u.String()]
	switch {
	case doc == nil:
		return nil, fmt.Errorf("$ref %q: %w", ref, ErrRemoteRef)
	case frag == "":
		return doc, nil
	case strings.HasPrefix(frag, "/"):
		return pointer(doc, frag)
	}
	if a := x.anchors[u.String()+"#"+frag]; a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("$ref %q: no such anchor", ref)
}

// inPlace returns the schemas that apply to the same instance as sc:
// references and the logic keywords. Validation recurses through these
// without consuming any of the instance.
func (s *Schema) inPlace(sc *jsonschema.Schema) []*jsonschema.Schema {
	out := append([]*jsonschema.Schema(nil), s.refs[sc]...)
	out = append(out, sc.AllOf...)
	out = append(out, sc.AnyOf...)
	out = append(out, sc.OneOf...)
	for _, c := range []*jsonschema.Schema{sc.Not, sc.If, sc.Then, sc.Else} {
		if c != nil {
			out = append(out, c)
		}
	}
	for _, k := range sortedKeys(sc.DependentSchemas) {
		out = append(out, sc.DependentSchemas[k])
	}
	for _, k := range sortedKeys(sc.DependencySchemas) {
		out = append(out, sc.DependencySchemas[k])
	}
	return out
}

// checkInPlace refuses a schema whose in-place edges form a cycle, or
// where one subschema reaches more than maxFanout paths through them
// (each path is one visit of the value by the validator). It sets
// s.chain.
func (s *Schema) checkInPlace(root *jsonschema.Schema) error {
	const visiting = -1
	paths := map[*jsonschema.Schema]int{} // done: the paths from the schema, itself included
	chain := map[*jsonschema.Schema]int{}
	var visit func(sc *jsonschema.Schema) error
	visit = func(sc *jsonschema.Schema) error {
		switch paths[sc] {
		case visiting:
			return errors.New("a loop of references that never descends into the instance")
		case 0:
		default:
			return nil
		}
		paths[sc] = visiting
		n, long := 1, 0
		for _, c := range s.inPlace(sc) {
			if err := visit(c); err != nil {
				return err
			}
			n, long = min(n+paths[c], maxFanout+1), max(long, chain[c]+1)
		}
		if n > maxFanout {
			return fmt.Errorf("one value would be checked against more than %d of its subschemas at once (anyOf, oneOf, allOf, $ref...)", maxFanout)
		}
		paths[sc], chain[sc] = n, long
		s.chain = max(s.chain, long)
		return nil
	}
	var err error
	var each func(sc *jsonschema.Schema)
	each = func(sc *jsonschema.Schema) {
		if err == nil {
			err = visit(sc)
		}
		eachChild(sc, func(_ int, c *jsonschema.Schema) { each(c) })
	}
	each(root)
	return err
}

// schemaField is a field of jsonschema.Schema that holds subschemas,
// with its JSON name (for JSON pointers into a schema).
type schemaField struct {
	name  string
	index []int
}

// schemaFields are the fields of jsonschema.Schema that hold subschemas,
// ordered by name.
var schemaFields = func() []schemaField {
	var fs []schemaField
	t := reflect.TypeFor[jsonschema.Schema]()
	for _, f := range reflect.VisibleFields(t) {
		switch f.Type {
		case reflect.TypeFor[*jsonschema.Schema](), reflect.TypeFor[[]*jsonschema.Schema](), reflect.TypeFor[map[string]*jsonschema.Schema]():
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch f.Name {
			case "Items", "ItemsArray":
				name = "items"
			case "DependencySchemas":
				name = "dependencies"
			}
			if name != "-" && name != "" {
				fs = append(fs, schemaField{name, f.Index})
			}
		}
	}
	slices.SortStableFunc(fs, func(a, b schemaField) int { return strings.Compare(a.name, b.name) })
	return fs
}()

// eachChild calls f with each direct subschema of sc, in a fixed order,
// and the length of the segment the library adds to its path for it
// ("/properties/name", "/allOf/2").
func eachChild(sc *jsonschema.Schema, f func(seg int, c *jsonschema.Schema)) {
	v := reflect.ValueOf(sc).Elem()
	for _, fd := range schemaFields {
		switch c := v.FieldByIndex(fd.index).Interface().(type) {
		case *jsonschema.Schema:
			if c != nil {
				f(1+len(fd.name), c)
			}
		case []*jsonschema.Schema:
			for i, e := range c {
				f(2+len(fd.name)+len(strconv.Itoa(i)), e)
			}
		case map[string]*jsonschema.Schema:
			for _, k := range sortedKeys(c) {
				f(2+len(fd.name)+len(k), c[k])
			}
		}
	}
}

// pointer follows the JSON pointer ptr (a URI fragment, already
// percent-decoded) from sc.
func pointer(sc *jsonschema.Schema, ptr string) (*jsonschema.Schema, error) {
	segs := strings.Split(ptr[1:], "/")
	var cur any = sc
	for _, seg := range segs {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		switch c := cur.(type) {
		case *jsonschema.Schema:
			var next any
			for _, fd := range schemaFields {
				if f := reflect.ValueOf(c).Elem().FieldByIndex(fd.index); fd.name == seg && !f.IsZero() {
					next = f.Interface()
				}
			}
			if next == nil {
				return nil, fmt.Errorf("JSON pointer %q: no %q", ptr, seg)
			}
			cur = next
		case []*jsonschema.Schema:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(c) {
				return nil, fmt.Errorf("JSON pointer %q: no item %q", ptr, seg)
			}
			cur = c[n]
		case map[string]*jsonschema.Schema:
			next, ok := c[seg]
			if !ok {
				return nil, fmt.Errorf("JSON pointer %q: no %q", ptr, seg)
			}
			cur = next
		}
	}
	if t, ok := cur.(*jsonschema.Schema); ok {
		return t, nil
	}
	return nil, fmt.Errorf("JSON pointer %q does not name a schema", ptr)
}
