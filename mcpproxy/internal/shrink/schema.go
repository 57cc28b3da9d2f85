package shrink

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxSchemaSize is the largest schema Compile accepts, in bytes. A tool's
// outputSchema comes from its upstream, which may be hostile; real ones
// are a few KB.
const MaxSchemaSize = 1 << 20

// MaxSchemaDepth is the deepest nesting of JSON objects and arrays Compile
// accepts, and maxNested bounds the sum of the sizes of all of them. The
// library decodes each level's bytes again for every level around it, so
// its work is that sum: 4,000 levels of 20 bytes took it 17 s, 1 MiB
// under 100 levels 2.8 s. Real schemas nest a few dozen levels at most
// and are far smaller.
const (
	MaxSchemaDepth = 100
	maxNested      = 8 << 20
)

// ErrSchema is wrapped by every error of Compile: the schema is too large,
// not JSON, not a JSON Schema of a draft the library validates (draft-07
// or 2020-12), refers to a schema outside itself, or could recurse forever.
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
	rs *jsonschema.Resolved
	// refs maps a schema with $ref or $dynamicRef to the schemas they
	// name ($dynamicRef: its lexical target and every $dynamicAnchor of
	// that name, which it may reach at validation time).
	refs map[*jsonschema.Schema][]*jsonschema.Schema
	// patterns holds the compiled patternProperties of each schema.
	patterns map[*jsonschema.Schema][]patternProp
}

type patternProp struct {
	re *regexp.Regexp
	s  *jsonschema.Schema
}

// Compile parses and resolves the JSON Schema raw. A $ref must point
// inside raw: a remote one is an error wrapping ErrRemoteRef, and nothing
// is fetched. A schema that validation could follow around a loop of
// references without descending into the instance (`{"$ref":"#"}`) is
// refused, since it would exhaust the stack. Every error wraps ErrSchema.
func Compile(raw []byte) (*Schema, error) {
	if len(raw) > MaxSchemaSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrSchema, len(raw), MaxSchemaSize)
	}
	if d, nested := depth(raw); d > MaxSchemaDepth || nested > maxNested {
		return nil, fmt.Errorf("%w: nested %d levels deep (at most %d), %d bytes inside one another (at most %d)", ErrSchema, d, MaxSchemaDepth, nested, maxNested)
	}
	var root jsonschema.Schema
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	switch root.Schema {
	case "", "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema#",
		"https://json-schema.org/draft/2020-12/schema":
	default:
		return nil, fmt.Errorf("%w: $schema %q: only draft-07 and draft 2020-12 are supported", ErrSchema, root.Schema)
	}
	rs, err := root.Resolve(&jsonschema.ResolveOptions{Loader: func(u *url.URL) (*jsonschema.Schema, error) {
		return nil, ErrRemoteRef
	}})
	if err != nil {
		if errors.Is(err, ErrRemoteRef) {
			return nil, fmt.Errorf("%w: %w", ErrSchema, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	s := &Schema{rs: rs, refs: map[*jsonschema.Schema][]*jsonschema.Schema{}, patterns: map[*jsonschema.Schema][]patternProp{}}
	if err := s.index(&root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	if err := s.checkLoops(&root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	return s, nil
}

// Validate reports whether the JSON value instance is valid against s: nil
// when it is, else the library's error. It decodes the whole instance, so
// it is meant for small values (Shrink's output). A nil s accepts any
// JSON object.
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
	return s.rs.Validate(v)
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

// index fills s.refs and s.patterns. References are resolved the way the
// library does (base URIs from $id, anchors, JSON pointers) so that
// Shrink follows the same schema the validator will.
func (s *Schema) index(root *jsonschema.Schema) error {
	draft7 := strings.Contains(root.Schema, "draft-07")
	type node struct {
		s    *jsonschema.Schema
		base *url.URL
	}
	var all []node
	uris := map[string]*jsonschema.Schema{"": root}
	anchors := map[string]*jsonschema.Schema{}   // base URI + "#" + name
	dynamic := map[string][]*jsonschema.Schema{} // $dynamicAnchor name
	var walk func(sc *jsonschema.Schema, base *url.URL) error
	walk = func(sc *jsonschema.Schema, base *url.URL) error {
		if sc.ID != "" && !(draft7 && sc.Ref != "") {
			id, err := url.Parse(sc.ID)
			if err != nil {
				return err
			}
			if draft7 && id.Fragment != "" && id.Path == "" && id.Host == "" {
				anchors[base.String()+"#"+id.Fragment] = sc
			} else {
				base = base.ResolveReference(id)
				uris[base.String()] = sc
			}
		}
		if !draft7 {
			if sc.Anchor != "" {
				anchors[base.String()+"#"+sc.Anchor] = sc
			}
			if sc.DynamicAnchor != "" {
				anchors[base.String()+"#"+sc.DynamicAnchor] = sc
				dynamic[sc.DynamicAnchor] = append(dynamic[sc.DynamicAnchor], sc)
			}
		}
		for pat, ps := range sc.PatternProperties {
			re, err := regexp.Compile(pat)
			if err != nil {
				return err
			}
			s.patterns[sc] = append(s.patterns[sc], patternProp{re, ps})
		}
		all = append(all, node{sc, base})
		for _, c := range children(sc) {
			if err := walk(c, base); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root, &url.URL{}); err != nil {
		return err
	}
	resolve := func(n node, ref string) (*jsonschema.Schema, error) {
		u, err := url.Parse(ref)
		if err != nil {
			return nil, err
		}
		u = n.base.ResolveReference(u)
		frag := u.Fragment
		u.Fragment, u.RawFragment = "", ""
		doc := uris[u.String()]
		switch {
		case doc == nil:
			return nil, fmt.Errorf("$ref %q: %w", ref, ErrRemoteRef)
		case frag == "":
			return doc, nil
		case strings.HasPrefix(frag, "/"):
			return pointer(doc, frag)
		}
		if a := anchors[u.String()+"#"+frag]; a != nil {
			return a, nil
		}
		return nil, fmt.Errorf("$ref %q: no such anchor", ref)
	}
	for _, n := range all {
		if n.s.Ref != "" {
			t, err := resolve(n, n.s.Ref)
			if err != nil {
				return err
			}
			s.refs[n.s] = append(s.refs[n.s], t)
		}
		if n.s.DynamicRef != "" {
			t, err := resolve(n, n.s.DynamicRef)
			if err != nil {
				return err
			}
			s.refs[n.s] = append(s.refs[n.s], t)
			if i := strings.IndexByte(n.s.DynamicRef, '#'); i >= 0 {
				s.refs[n.s] = append(s.refs[n.s], dynamic[n.s.DynamicRef[i+1:]]...)
			}
		}
	}
	return nil
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

// checkLoops refuses a schema whose in-place edges form a cycle.
func (s *Schema) checkLoops(root *jsonschema.Schema) error {
	const (
		visiting = 1
		done     = 2
	)
	state := map[*jsonschema.Schema]int{}
	var visit func(sc *jsonschema.Schema) error
	visit = func(sc *jsonschema.Schema) error {
		switch state[sc] {
		case visiting:
			return errors.New("a loop of references that never descends into the instance")
		case done:
			return nil
		}
		state[sc] = visiting
		for _, c := range s.inPlace(sc) {
			if err := visit(c); err != nil {
				return err
			}
		}
		state[sc] = done
		return nil
	}
	var all []*jsonschema.Schema
	var collect func(sc *jsonschema.Schema)
	collect = func(sc *jsonschema.Schema) {
		all = append(all, sc)
		for _, c := range children(sc) {
			collect(c)
		}
	}
	collect(root)
	for _, sc := range all {
		if err := visit(sc); err != nil {
			return err
		}
	}
	return nil
}

// schemaFields are the fields of jsonschema.Schema that hold subschemas,
// with their JSON names (for JSON pointers into a schema).
var schemaFields = func() map[string][]int {
	m := map[string][]int{}
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
				m[name] = append(m[name], f.Index...)
			}
		}
	}
	return m
}()

// children returns the direct subschemas of sc, in a fixed order.
func children(sc *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	v := reflect.ValueOf(sc).Elem()
	for _, name := range sortedKeys(schemaFields) {
		for _, i := range schemaFields[name] {
			switch f := v.Field(i).Interface().(type) {
			case *jsonschema.Schema:
				if f != nil {
					out = append(out, f)
				}
			case []*jsonschema.Schema:
				out = append(out, f...)
			case map[string]*jsonschema.Schema:
				for _, k := range sortedKeys(f) {
					out = append(out, f[k])
				}
			}
		}
	}
	return out
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
			for _, i := range schemaFields[seg] {
				f := reflect.ValueOf(c).Elem().Field(i)
				if !f.IsZero() {
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
