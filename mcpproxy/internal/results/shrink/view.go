package shrink

import (
	"maps"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// A view is every schema whose constraints Shrink respects for one value:
// the subschemas that apply to it, with references and allOf, anyOf,
// oneOf, then, else and dependentSchemas followed. Branches (of anyOf,
// oneOf, if, dependentSchemas) are all included, whichever one applies to
// the value: that is conservative (a string a branch pins with a pattern
// is never replaced), and the final validation catches what a view cannot
// see. A nil view is "no schema".
type view []*jsonschema.Schema

// expand returns the view of the schemas roots for a value of JSON type
// kind ("object", "array", "string", or "" for other values). Branches
// whose type excludes kind are left out: the value cannot match them.
func (z *shrinker) expand(roots []*jsonschema.Schema, kind string) view {
	s := z.s
	if s == nil {
		return nil
	}
	var v view
	seen := map[*jsonschema.Schema]bool{}
	var add func(sc *jsonschema.Schema, branch bool)
	add = func(sc *jsonschema.Schema, branch bool) {
		if sc == nil {
			return
		}
		z.steps++
		if seen[sc] || isFalse(sc) || branch && !admits(sc, kind) {
			return
		}
		seen[sc] = true
		v = append(v, sc)
		for _, r := range s.refs[sc] {
			add(r, false)
		}
		for _, c := range sc.AllOf {
			add(c, false)
		}
		for _, c := range slices.Concat(sc.AnyOf, sc.OneOf, []*jsonschema.Schema{sc.Then, sc.Else}) {
			add(c, true)
		}
		for _, k := range sortedKeys(sc.DependentSchemas) {
			add(sc.DependentSchemas[k], true)
		}
		for _, k := range sortedKeys(sc.DependencySchemas) {
			add(sc.DependencySchemas[k], true)
		}
	}
	for _, r := range roots {
		add(r, false)
	}
	return v
}

// isFalse reports whether sc is the schema false, which nothing matches.
func isFalse(sc *jsonschema.Schema) bool {
	return sc.Not != nil && reflect.ValueOf(*sc.Not).IsZero()
}

// admits reports whether sc's own type keyword allows kind.
func admits(sc *jsonschema.Schema, kind string) bool {
	if kind == "" || sc.Type == "" && sc.Types == nil {
		return true
	}
	return sc.Type == kind || slices.Contains(sc.Types, kind)
}

// pinned reports whether the value must stay exactly as it is: a schema
// names its values (enum, const); for a string, its shape (pattern,
// format), which free text would break; for an array, an item it must
// contain, which the items kept might not be.
func (v view) pinned(kind string) bool {
	for _, sc := range v {
		if sc.Enum != nil || sc.Const != nil {
			return true
		}
		if kind == "string" && (sc.Pattern != "" || sc.Format != "") {
			return true
		}
		if kind == "array" && sc.Contains != nil {
			return true
		}
	}
	return false
}

// lengths returns the tightest minLength and maxLength (-1: none).
func (v view) lengths() (lo, hi int) {
	return v.bounds(func(sc *jsonschema.Schema) (*int, *int) { return sc.MinLength, sc.MaxLength })
}

// items returns the tightest minItems and maxItems (-1: none).
func (v view) items() (lo, hi int) {
	return v.bounds(func(sc *jsonschema.Schema) (*int, *int) { return sc.MinItems, sc.MaxItems })
}

// bounds returns the largest of the lower bounds and the smallest of the
// upper ones (-1: none) that f reads from each schema.
func (v view) bounds(f func(*jsonschema.Schema) (lower, upper *int)) (lo, hi int) {
	hi = -1
	for _, sc := range v {
		l, u := f(sc)
		if l != nil {
			lo = max(lo, *l)
		}
		if u != nil && (hi < 0 || *u < hi) {
			hi = *u
		}
	}
	return lo, hi
}

// item returns the schemas of the array item at index i.
func (z *shrinker) item(v view, i int, kind string) view {
	if z.steps > maxSteps {
		return nil // the walk stops here: see shrinker.value
	}
	var roots []*jsonschema.Schema
	for _, sc := range v {
		switch {
		case i < len(sc.PrefixItems):
			roots = append(roots, sc.PrefixItems[i])
		case sc.ItemsArray != nil && i < len(sc.ItemsArray):
			roots = append(roots, sc.ItemsArray[i])
		case sc.ItemsArray != nil && sc.AdditionalItems != nil:
			roots = append(roots, sc.AdditionalItems)
		case sc.ItemsArray == nil && sc.Items != nil:
			roots = append(roots, sc.Items)
		case sc.UnevaluatedItems != nil:
			roots = append(roots, sc.UnevaluatedItems)
		}
	}
	return z.expand(roots, kind)
}

// member returns the schemas of the object member key.
func (z *shrinker) member(v view, key, kind string) view {
	if z.steps > maxSteps {
		return nil // the walk stops here: see shrinker.value
	}
	var roots []*jsonschema.Schema
	for _, sc := range v {
		found := false
		if p, ok := sc.Properties[key]; ok {
			roots, found = append(roots, p), true
		}
		for _, pp := range z.s.patterns[sc] {
			// A match reads each byte of the name with each instruction
			// of the program, about an eighth of a step each.
			if z.steps += 1 + (len(key)+1)*pp.insts/8; z.steps > maxSteps {
				return nil // the walk stops here: see shrinker.value
			}
			if pp.re.MatchString(key) {
				roots, found = append(roots, pp.s), true
			}
		}
		switch {
		case found:
		case sc.AdditionalProperties != nil:
			roots = append(roots, sc.AdditionalProperties)
		case sc.UnevaluatedProperties != nil:
			roots = append(roots, sc.UnevaluatedProperties)
		}
	}
	return z.expand(roots, kind)
}

// required returns the names no member of the object may lose, and
// whether the object may lose any member at all (not when a schema counts
// them with minProperties).
func (v view) required() (names map[string]bool, droppable bool) {
	names = map[string]bool{}
	droppable = true
	for _, sc := range v {
		for _, r := range sc.Required {
			names[r] = true
		}
		// A member another one depends on stays; so does any member
		// when the schema counts them.
		for _, deps := range sc.DependentRequired {
			for _, r := range deps {
				names[r] = true
			}
		}
		for _, deps := range sc.DependencyStrings {
			for _, r := range deps {
				names[r] = true
			}
		}
		if sc.MinProperties != nil {
			droppable = false
		}
	}
	return names, droppable
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
