package shrink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// gen makes a random schema and an instance valid against it, from a
// seed: the same seed always gives the same pair.
type gen struct {
	r      *rand.Rand
	draft7 bool
	defs   map[string]any
}

var propNames = []string{"a", "b", "content", "rows", "data", "x/y", "t~1", "é", "q\"\u0001"}

// schema returns a random schema for a value of kind ("" any kind).
func (g *gen) schema(kind string, depth int) map[string]any {
	if kind == "" {
		kinds := []string{"object", "array", "string", "string", "integer", "number", "boolean", "null", "anyOf", "oneOf", "ref"}
		if depth > 3 {
			kinds = kinds[2:8]
		}
		kind = kinds[g.r.IntN(len(kinds))]
	}
	s := map[string]any{}
	switch kind {
	case "object":
		s["type"] = "object"
		props := map[string]any{}
		var required []string
		for _, name := range propNames {
			if g.r.IntN(3) > 0 {
				continue
			}
			props[name] = g.schema("", depth+1)
			if g.r.IntN(2) == 0 {
				required = append(required, name)
			}
		}
		s["properties"] = props
		if required != nil {
			s["required"] = required
		}
		switch g.r.IntN(4) {
		case 0:
			s["additionalProperties"] = false
		case 1:
			s["additionalProperties"] = map[string]any{"type": "string"}
		case 2:
			s["patternProperties"] = map[string]any{"^p": g.schema("", depth+1)}
		}
		if g.r.IntN(8) == 0 {
			s["minProperties"] = 1
		}
		// A member that needs another: four ways to say it.
		if names := sortedKeys(props); len(names) >= 2 {
			a, b := names[0], names[len(names)-1]
			switch g.r.IntN(8) {
			case 0:
				s["dependentRequired"] = map[string]any{a: []string{b}}
			case 1:
				s["if"] = map[string]any{"required": []string{a}}
				s["then"] = map[string]any{"required": []string{b}}
			case 2:
				s["dependentSchemas"] = map[string]any{a: map[string]any{"required": []string{b}}}
			case 3:
				return map[string]any{"allOf": []any{s, map[string]any{"required": []string{a}}}}
			}
		}
	case "array":
		s["type"] = "array"
		switch {
		case g.r.IntN(4) > 0:
			s["items"] = g.schema("", depth+1)
		case g.draft7:
			s["items"] = []any{g.schema("", depth+1), g.schema("", depth+1)}
		default:
			s["prefixItems"] = []any{g.schema("", depth+1), g.schema("", depth+1)}
			s["items"] = g.schema("", depth+1)
		}
		if g.r.IntN(3) == 0 {
			s["minItems"] = g.r.IntN(4)
		}
		if g.r.IntN(4) == 0 {
			s["maxItems"] = 4 + g.r.IntN(40)
		}
		if g.r.IntN(4) == 0 {
			s["uniqueItems"] = true
		}
		if g.r.IntN(8) == 0 {
			s = map[string]any{"type": "array", "contains": map[string]any{"type": "integer"}}
		}
	case "string":
		s["type"] = "string"
		switch g.r.IntN(8) {
		case 0:
			s["minLength"] = g.r.IntN(80)
		case 1:
			s["maxLength"] = 100 + g.r.IntN(3000)
		case 2:
			s["pattern"] = "^[a-z ]*$"
		case 3:
			s["enum"] = []any{"red", strings.Repeat("long ", 100)}
		case 4:
			s["const"] = strings.Repeat("pinned ", g.r.IntN(100))
		}
	case "integer", "number", "boolean", "null":
		s["type"] = kind
	case "anyOf", "oneOf":
		pairs := [][2]string{{"object", "array"}, {"string", "integer"}, {"array", "string"}, {"object", "null"}}
		p := pairs[g.r.IntN(len(pairs))]
		s[kind] = []any{g.schema(p[0], depth+1), g.schema(p[1], depth+1)}
	case "ref":
		name := "d" + strconv.Itoa(len(g.defs))
		g.defs[name] = nil // taken: the subschema may make refs of its own
		g.defs[name] = g.schema("", depth+1)
		if g.draft7 {
			return map[string]any{"$ref": "#/definitions/" + name}
		}
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	return s
}

// instance returns a value for the schema s (valid unless chance made,
// say, two items of a uniqueItems array equal; the caller checks).
func (g *gen) instance(s map[string]any, depth int) any {
	if ref, ok := s["$ref"].(string); ok {
		return g.instance(g.defs[ref[strings.LastIndexByte(ref, '/')+1:]].(map[string]any), depth)
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok {
		return e[g.r.IntN(len(e))]
	}
	if all, ok := s["allOf"].([]any); ok {
		// The object schema, with the second one's required members.
		base := maps.Clone(all[0].(map[string]any))
		required, _ := base["required"].([]string)
		base["required"] = append(slices.Clone(required), all[1].(map[string]any)["required"].([]string)...)
		return g.instance(base, depth)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if bs, ok := s[k].([]any); ok {
			return g.instance(bs[g.r.IntN(len(bs))].(map[string]any), depth)
		}
	}
	switch s["type"] {
	case "object":
		o := map[string]any{}
		props := s["properties"].(map[string]any)
		required, _ := s["required"].([]string)
		for _, name := range sortedKeys(props) {
			if slices.Contains(required, name) || g.r.IntN(2) == 0 {
				o[name] = g.instance(props[name].(map[string]any), depth+1)
			}
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok && g.r.IntN(2) == 0 {
			o["extra"] = g.instance(ap, depth+1)
		}
		if pp, ok := s["patternProperties"].(map[string]any); ok && g.r.IntN(2) == 0 {
			o["p1"] = g.instance(pp["^p"].(map[string]any), depth+1)
		}
		if _, ok := s["minProperties"]; ok && len(o) == 0 && s["additionalProperties"] == nil {
			o["free"] = g.text(g.r.IntN(600), false)
		}
		if a, b, ok := implies(s); ok && o[a] != nil && o[b] == nil {
			o[b] = g.instance(props[b].(map[string]any), depth+1)
		}
		return o
	case "array":
		n := g.r.IntN(6)
		if g.r.IntN(3) == 0 {
			n = g.r.IntN(60)
		}
		if m, ok := s["minItems"].(int); ok {
			n = max(n, m)
		}
		if m, ok := s["maxItems"].(int); ok {
			n = min(n, m)
		}
		prefix, _ := s["prefixItems"].([]any)
		if tuple, ok := s["items"].([]any); ok {
			prefix = tuple
			n = min(n, len(tuple)) // draft-07 items array, no additionalItems: keep to the tuple
		}
		var a []any
		if _, ok := s["contains"]; ok {
			for range n {
				a = append(a, g.text(g.r.IntN(400), false))
			}
			return slices.Insert(a, g.r.IntN(n+1), any(g.r.IntN(100)))
		}
		for i := range n {
			is, _ := s["items"].(map[string]any)
			if i < len(prefix) {
				is = prefix[i].(map[string]any)
			}
			a = append(a, g.instance(is, depth+1))
		}
		return a
	case "string":
		n := g.r.IntN(20)
		if g.r.IntN(3) == 0 {
			n = g.r.IntN(5000)
		}
		if m, ok := s["minLength"].(int); ok {
			n = max(n, m)
		}
		if m, ok := s["maxLength"].(int); ok {
			n = min(n, m)
			if g.r.IntN(2) == 0 {
				// Wide characters: more bytes than code points, so a
				// preview cut to the string's bytes may still be too long.
				return strings.Repeat("€😀", n/2)
			}
		}
		return g.text(n, s["pattern"] != nil)
	case "integer":
		return g.r.IntN(1000000)
	case "number":
		return float64(g.r.IntN(100000)) / 8
	case "boolean":
		return g.r.IntN(2) == 0
	case "null":
		return nil
	}
	return g.text(g.r.IntN(400), false) // no type: any value
}

// implies returns the members a and b of an object schema that says "a
// needs b", in any of the ways schema generates.
func implies(s map[string]any) (a, b string, ok bool) {
	if dr, ok := s["dependentRequired"].(map[string]any); ok {
		for a, bs := range dr {
			return a, bs.([]string)[0], true
		}
	}
	if ds, ok := s["dependentSchemas"].(map[string]any); ok {
		for a, d := range ds {
			return a, d.(map[string]any)["required"].([]string)[0], true
		}
	}
	if cond, ok := s["if"].(map[string]any); ok {
		return cond["required"].([]string)[0], s["then"].(map[string]any)["required"].([]string)[0], true
	}
	return "", "", false
}

func (g *gen) text(n int, plain bool) string {
	const letters = "abcdefghij klmnopqrstuvwxyz"
	const fancy = "\"\\\n\t\x01é€😀<>&"
	var b strings.Builder
	for range n {
		if !plain && g.r.IntN(20) == 0 {
			r := []rune(fancy)
			b.WriteRune(r[g.r.IntN(len(r))])
		} else {
			b.WriteByte(letters[g.r.IntN(len(letters))])
		}
	}
	return b.String()
}

// newCase makes the schema and instance of seed; g goes on from there.
func newCase(seed uint64) (g *gen, schemaJSON, instance []byte) {
	g = &gen{r: rand.New(rand.NewPCG(seed, seed^0x5eed)), draft7: seed%3 == 0, defs: map[string]any{}}
	root := g.schema("object", 0)
	if g.draft7 {
		root["$schema"] = "http://json-schema.org/draft-07/schema#"
		root["definitions"] = g.defs
	} else {
		root["$defs"] = g.defs
	}
	v := g.instance(root, 0)
	if seed%5 == 0 { // pretty-printed, as some servers send it
		b, _ := json.MarshalIndent(v, " ", "\t")
		return g, mustJSON(root), b
	}
	return g, mustJSON(root), mustJSON(v)
}

// checkSeed generates one schema and instance from seed, shrinks the
// instance with a random budget and checks Shrink's promises.
func checkSeed(t *testing.T, seed uint64) {
	g, schemaJSON, instance := newCase(seed)
	var s *Schema
	if seed%7 != 0 { // every seventh: no schema
		var err error
		if s, err = Compile(schemaJSON); err != nil {
			t.Fatalf("seed %d: Compile(%s): %v", seed, schemaJSON, err)
		}
	}
	if s.Validate(instance) != nil {
		return // the guarantee holds where the original validated
	}
	budget := 1 + g.r.IntN(len(instance)+len(instance)/4+1)
	o := Options{Budget: budget, MinCut: []int{0, 16, 64}[g.r.IntN(3)], Sample: []int{0, 1, 3}[g.r.IntN(3)]}
	// The walk alone must make a valid value whenever it fits: the final
	// validation is a safety net, not the way to find one.
	body, od, _ := prepare(instance, o)
	r := (&shrinker{s: s, o: od}).plan(context.Background(), body)
	if r.size <= budget {
		trial, _, _ := r.assemble(nil)
		if err := s.Validate(trial); err != nil {
			t.Fatalf("seed %d: the walk made an invalid value: %v\nschema %s\ninstance %.2000s\nresult %s", seed, err, schemaJSON, instance, trial)
		}
	}
	calls := 0
	out, cuts, err := Shrink(context.Background(), instance, s, o, func(c Cut) (string, error) {
		calls++
		// Previews of many lengths, with what JSON must escape.
		return fmt.Sprintf("cut %d: %d bytes at https://spillway.test/%d é\n\" %s", calls, len(c.Raw), calls, strings.Repeat("preview ", calls*37%500)), nil
	})
	if err != nil {
		// ErrNoFit is allowed only where the walk found nothing small enough.
		if !errors.Is(err, ErrNoFit) || r.size <= budget {
			t.Fatalf("seed %d: budget %d of %d: %v\nschema %s\ninstance %.2000s", seed, budget, len(instance), err, schemaJSON, instance)
		}
		return
	}
	if len(out) > budget {
		t.Fatalf("seed %d: %d bytes, budget %d", seed, len(out), budget)
	}
	if err := s.Validate(out); err != nil {
		t.Fatalf("seed %d: result does not validate: %v\nschema %s\nresult %s", seed, err, schemaJSON, out)
	}
	if calls != len(cuts) {
		t.Fatalf("seed %d: %d calls, %d cuts", seed, calls, len(cuts))
	}
	cutAt := map[string]Cut{}
	for _, c := range cuts {
		if got := at(instance, c.Pointer); !bytes.Equal(got, c.Raw) || !within(c.Raw, instance) {
			t.Fatalf("seed %d: cut %q: Raw is not the instance's value there", seed, c.Pointer)
		}
		cutAt[c.Pointer] = c
	}
	if err := kept(instance, out, "", cutAt); err != nil {
		t.Fatalf("seed %d: %v\ninstance %.2000s\nresult %s", seed, err, instance, out)
	}
}

// kept checks that out, at pointer p, is the instance's value there:
// byte for byte for a string, number, true, false or null; the same
// members or items for an object or array (the space between them may
// differ), except where a cut says otherwise.
func kept(instance, out []byte, p string, cuts map[string]Cut) error {
	orig := at(instance, p)
	c, isCut := cuts[p]
	switch {
	case orig == nil:
		return fmt.Errorf("%q is not in the instance", p)
	case isCut && c.Kind == "string":
		return nil
	case out[0] != '[' && out[0] != '{':
		if !bytes.Equal(orig, out) {
			return fmt.Errorf("%q changed without a cut: %.200s became %.200s", p, orig, out)
		}
		return nil
	}
	var n, want int
	var err error
	if out[0] == '[' {
		items := jsonrpc.Elements(out, [2]int{0, len(out)})
		for i, sp := range items {
			if err == nil {
				err = kept(instance, out[sp[0]:sp[1]], p+"/"+strconv.Itoa(i), cuts)
			}
		}
		n, want = len(items), len(jsonrpc.Elements(orig, [2]int{0, len(orig)}))
	} else {
		members(out, func(key, val []byte) {
			n++
			if name, _ := jsonrpc.Unquote(key); err == nil {
				err = kept(instance, val, p+"/"+escape(name), cuts)
			}
		})
		members(orig, func(_, _ []byte) { want++ })
	}
	if isCut {
		want = c.Kept
	}
	if err == nil && n != want {
		err = fmt.Errorf("%q keeps %d of %d members or items (cut: %v)", p, n, want, isCut)
	}
	return err
}

// at returns the value at the JSON pointer p in the JSON value b.
func at(b []byte, p string) []byte {
	b = bytes.TrimSpace(b)
	if p == "" {
		return b
	}
	tok, rest, _ := strings.Cut(p[1:], "/")
	if rest != "" || strings.Contains(p[1:], "/") {
		rest = "/" + rest
	}
	tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
	if b[0] == '[' {
		i, _ := strconv.Atoi(tok)
		items := jsonrpc.Elements(b, [2]int{0, len(b)})
		if i >= len(items) {
			return nil
		}
		return at(b[items[i][0]:items[i][1]], rest)
	}
	var v []byte
	members(b, func(key, val []byte) {
		if name, _ := jsonrpc.Unquote(key); name == tok {
			v = val
		}
	})
	if v == nil {
		return nil
	}
	return at(v, rest)
}

func TestShrinkProperty(t *testing.T) {
	for seed := range uint64(2000) {
		checkSeed(t, seed)
	}
}

// FuzzShrink runs the property test on seeds the fuzzer picks; `make
// test` runs only the committed ones (testdata/fuzz/FuzzShrink and those
// below).
func FuzzShrink(f *testing.F) {
	for _, seed := range []uint64{0, 1, 2, 3, 7, 42, 1000, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(checkSeed)
}

// FuzzShrinkRaw shrinks any bytes, without a schema and with one: a
// hostile upstream's structuredContent must give a valid result or an
// error, never a panic.
func FuzzShrinkRaw(f *testing.F) {
	for _, seed := range []string{
		`{"a":"` + strings.Repeat("x", 300) + `"}`,
		" {\n \"a\" : [ 1 , \"" + strings.Repeat("é", 200) + "\" , { \"b\" : null } ] ,\"c\":\"\\u0041\\\"\" } ",
		`{"k\"\u00e9/~":{"x":[` + strings.Repeat(`"abc",`, 100) + `1]}}`,
		strings.Repeat(`{"a":`, 200) + `"` + strings.Repeat("z", 400) + `"` + strings.Repeat(`}`, 200),
		`{"a":1,"a":"` + strings.Repeat("d", 500) + `"}`,
		`{"n":1e400,"s":"` + strings.Repeat("y", 300) + `"}`,
		"{\"bad\":\"\xff\xfe" + strings.Repeat("w", 300) + "\"}",
		`[1]`, `{`, ``, `{}`,
	} {
		f.Add([]byte(seed), uint16(100))
	}
	s := mustCompile(f, readGraph)
	f.Fuzz(func(t *testing.T, instance []byte, budget uint16) {
		for _, s := range []*Schema{nil, s} {
			out, cuts, err := Shrink(context.Background(), instance, s, Options{Budget: int(budget)}, func(c Cut) (string, error) { return "preview " + c.Pointer, nil })
			if err != nil {
				if !errors.Is(err, ErrNoFit) && !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v", err)
				}
				continue
			}
			if len(out) > int(budget) || s.Validate(out) != nil {
				t.Fatalf("%d bytes for a budget of %d: %s", len(out), budget, out)
			}
			for _, c := range cuts {
				if !within(c.Raw, instance) {
					t.Fatalf("cut %q: Raw is not a part of the instance", c.Pointer)
				}
			}
		}
	})
}

// The generator itself must make valid instances most of the time, or
// the property test checks little.
func TestGeneratorMakesValidInstances(t *testing.T) {
	valid, shrunk := 0, 0
	for seed := range uint64(300) {
		_, schemaJSON, instance := newCase(seed)
		if mustCompile(t, string(schemaJSON)).Validate(instance) == nil {
			valid++
			if len(instance) > 1000 {
				shrunk++
			}
		}
	}
	if valid < 240 || shrunk < 60 {
		t.Fatalf("%d of 300 instances valid, %d of them over 1000 bytes", valid, shrunk)
	}
}

// hostile makes, from a seed, a schema of the shapes an upstream may send
// to exhaust a validator or a shrinker, and an object roughly after it
// (valid or not): DAGs of anyOf, oneOf and allOf whose branches name the
// same definitions again (paths double at each level), objects that name
// themselves (values nested hundreds deep), patternProperties matched by
// member names of up to 100 KB, patterns of a thousand instructions, and
// enums of thousands of values. The root is Zod's (a $ref into
// definitions), pydantic's (allOf of a $ref) or an object closed at its
// top.
type hostile struct {
	r    *rand.Rand
	defs []map[string]any
	left int // bytes the instance may still grow by
}

func (h *hostile) ref(i int) map[string]any {
	return map[string]any{"$ref": "#/$defs/d" + strconv.Itoa(i)}
}

// def makes definition i, naming only definitions after it (and itself,
// under a member).
func (h *hostile) def(i, n int) map[string]any {
	later := func() int { return min(n-1, i+1+h.r.IntN(3)) }
	kind := h.r.IntN(8)
	switch {
	case i == n-1:
		kind = 7
	case i == 0:
		kind = []int{0, 1, 2, 6, 6}[h.r.IntN(5)]
	}
	switch kind {
	case 0: // branches naming the next definitions, some twice
		var bs []any
		for range 2 + h.r.IntN(3) {
			bs = append(bs, h.ref(later()))
		}
		return map[string]any{[]string{"anyOf", "oneOf", "allOf"}[h.r.IntN(3)]: bs}
	case 1, 2: // an object, closed half the time, naming itself in "next"
		d := map[string]any{"type": "object", "properties": map[string]any{
			"rows": map[string]any{"type": "array", "items": h.ref(later())},
			"item": h.ref(later()),
			"next": h.ref(i),
			"text": map[string]any{"type": "string"},
		}}
		if h.r.IntN(2) == 0 {
			d["additionalProperties"] = false
		}
		if h.r.IntN(3) == 0 {
			d["patternProperties"] = map[string]any{"^k[a-z]*$": map[string]any{"type": "string"}}
		}
		if h.r.IntN(4) == 0 {
			d["patternProperties"] = map[string]any{"[a-z]{1000}$|^q": map[string]any{"type": "string"}}
		}
		return d
	case 3: // a huge enum
		var e []any
		for j := range 100 + h.r.IntN(6000) {
			e = append(e, "v"+strconv.Itoa(j))
		}
		return map[string]any{"enum": e}
	case 4:
		return map[string]any{"type": "string", "pattern": []string{"^[a-z ]*$", "[a-z]{500}$|^x", "^(a|b|c|d)*e?$"}[h.r.IntN(3)]}
	case 5:
		return map[string]any{"type": "array", "items": h.ref(later()), "uniqueItems": h.r.IntN(2) == 0}
	case 6: // an object naming itself twice in anyOf: paths double at each level of the value
		next := map[string]any{"properties": map[string]any{"next": h.ref(i), "text": map[string]any{"type": "string"}}}
		return map[string]any{"type": "object", "properties": map[string]any{"next": h.ref(i), "text": map[string]any{"type": "string"}},
			"anyOf": []any{next, next}}
	}
	return map[string]any{"type": []string{"string", "integer"}[h.r.IntN(2)]}
}

// value makes a value for s, at depth, within h.left bytes.
func (h *hostile) value(s map[string]any, depth int) any {
	if h.left -= 8; h.left <= 0 || depth > 400 {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		i, _ := strconv.Atoi(ref[strings.LastIndexByte(ref, 'd')+1:])
		return h.value(h.defs[i], depth)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if bs, ok := s[k].([]any); ok && s["type"] == nil {
			return h.value(bs[h.r.IntN(len(bs))].(map[string]any), depth)
		}
	}
	if e, ok := s["enum"].([]any); ok {
		return e[h.r.IntN(len(e))]
	}
	switch s["type"] {
	case "object":
		props := s["properties"].(map[string]any)
		o := map[string]any{"text": h.text(h.r.IntN(3000))}
		for _, name := range []string{"item", "data"} {
			if p, ok := props[name].(map[string]any); ok && h.r.IntN(4) > 0 {
				o[name] = h.value(p, depth+1)
			}
		}
		if p, ok := props["next"].(map[string]any); ok && depth < 300 && h.r.IntN(20) < 19 { // chains of tens to hundreds
			o["next"] = h.value(p, depth+1)
		}
		if p, ok := props["rows"].(map[string]any); ok && h.r.IntN(2) == 0 {
			var rows []any
			for range h.r.IntN(300) {
				if h.left <= 0 {
					break
				}
				rows = append(rows, h.value(p["items"].(map[string]any), depth+2))
			}
			o["rows"] = rows
		}
		if _, ok := s["patternProperties"]; ok {
			for range h.r.IntN(4) {
				name := "k" + strings.Repeat(string(rune('a'+h.r.IntN(26))), h.r.IntN(100000))
				o[name] = h.text(h.r.IntN(400))
				h.left -= len(name)
			}
		}
		return o
	case "array":
		var a []any
		for j := range h.r.IntN(100) {
			if h.left <= 0 {
				break
			}
			a = append(a, h.value(s["items"].(map[string]any), depth+1))
			if s["uniqueItems"] == true {
				a[j] = []any{j, a[j]}
			}
		}
		return a
	case "string":
		return h.text(h.r.IntN(2000))
	case "integer":
		return h.r.IntN(1000)
	}
	return h.text(h.r.IntN(50))
}

func (h *hostile) text(n int) string {
	n = min(n, max(h.left, 0))
	h.left -= n + 8
	return strings.Repeat(string(rune('a'+h.r.IntN(5))), n)
}

// newHostileCase makes the schema and instance of seed.
func newHostileCase(seed uint64) (h *hostile, schemaJSON, instance []byte) {
	h = &hostile{r: rand.New(rand.NewPCG(seed, seed^0xbad)), left: 256 << 10}
	n := 2 + h.r.IntN(30)
	h.defs = make([]map[string]any, n)
	defs := map[string]any{}
	for i := n - 1; i >= 0; i-- {
		h.defs[i] = h.def(i, n)
		defs["d"+strconv.Itoa(i)] = h.defs[i]
	}
	var root map[string]any
	switch h.r.IntN(3) {
	case 0:
		root = map[string]any{"$ref": "#/$defs/d0"}
	case 1:
		root = map[string]any{"allOf": []any{h.ref(0)}, "title": "pydantic"}
	default:
		root = map[string]any{"type": "object", "properties": map[string]any{"data": h.ref(0), "text": map[string]any{"type": "string"}}, "additionalProperties": false}
	}
	root["$defs"] = defs
	v, ok := h.value(root, 0).(map[string]any)
	if !ok {
		v = map[string]any{"data": v, "text": h.text(h.r.IntN(5000))}
	}
	return h, mustJSON(root), mustJSON(v)
}

// shrinkAlloc bounds what one Shrink allocates, from the instance's size:
// the walk's share (see Shrink) and what each of at most three checks of
// a value by Validate may cost (maxCheckAlloc, for its count and the
// validator together).
func shrinkAlloc(instance int) uint64 { return 3*maxCheckAlloc + 16*uint64(instance) + 1<<20 }

// checkHostile shrinks the hostile case of seed, as the offloader does
// with the schema it shows clients (NoteMember added by AddProperty), and
// checks what issue 38 asks: each Compile and Shrink returns within a
// minute (it would never finish otherwise), Shrink allocates at most
// shrinkAlloc and its walk at most maxSteps steps and one match, a refused
// schema says so with ErrSchema, and every value the offloader would
// send validates against the schema shown. Validating it costs the
// validator no more than the count said (what makes the count a bound).
func checkHostile(t *testing.T, seed uint64, stats map[string]int) {
	h, raw, instance := newHostileCase(seed)
	const note = `{"type":"string"}`
	shown, _ := AddProperty(raw, "_spillway", []byte(note))
	var s *Schema
	var err error
	measured(t, time.Minute, func() { s, err = Compile(shown) })
	if err != nil {
		if !errors.Is(err, ErrSchema) || len(err.Error()) > 2*maxErrText {
			t.Fatalf("seed %d: Compile: %v", seed, err)
		}
		stats["schema refused"]++
		return
	}
	budget := 256 + h.r.IntN(8<<10)
	var out []byte
	var cuts []Cut
	alloc := measured(t, time.Minute, func() {
		out, cuts, err = Shrink(context.Background(), instance, s, Options{Budget: budget}, func(c Cut) (string, error) {
			return "preview of " + c.Pointer + " at https://spillway.test/a", nil
		})
	})
	if alloc > shrinkAlloc(len(instance)) {
		t.Fatalf("seed %d: Shrink of %d bytes allocated %d bytes, more than %d", seed, len(instance), alloc, shrinkAlloc(len(instance)))
	}
	body, o, _ := prepare(instance, Options{Budget: budget})
	z := &shrinker{s: s, o: o}
	z.plan(context.Background(), body)
	if z.steps > maxSteps+(1<<20)*maxInsts/8 {
		t.Fatalf("seed %d: the walk made %d steps", seed, z.steps)
	}
	switch {
	case errors.Is(err, ErrSchema):
		stats["value refused"]++
		return
	case errors.Is(err, ErrNoFit):
		stats["no fit"]++
		return
	case err != nil:
		t.Fatalf("seed %d: %v", seed, err)
	case len(out) > budget:
		t.Fatalf("seed %d: %d bytes, budget %d", seed, len(out), budget)
	}
	// What the offloader sends: the value with the note where the schema
	// takes it, else the value alone if only strings were cut (each
	// carries its link), else nothing (the result becomes a tool error).
	withNote, _ := jsonrpc.SetPath(out, []byte(`"shortened"`), "_spillway")
	leaves := withNote
	if err := s.Validate(withNote); err != nil {
		leaves = out
		if slices.ContainsFunc(cuts, func(c Cut) bool { return c.Kind != "string" }) {
			stats["not sent"]++
			return
		}
	}
	stats["sent"]++
	var v any
	json.Unmarshal(leaves, &v)
	ct := &counter{s: s, memo: map[pair]vcost{}}
	_, predicted := ct.visit(s.rs.Schema(), newVnode(v, 0)).total()
	var verr error
	actual := measured(t, time.Minute, func() { verr = s.rs.Validate(v) })
	if verr != nil {
		t.Fatalf("seed %d: what leaves does not validate against the schema shown: %v\nschema %.3000s\nvalue %.3000s", seed, verr, shown, leaves)
	}
	if actual > uint64(predicted)+64<<10 {
		t.Fatalf("seed %d: the validator allocated %d bytes, the count said at most %d", seed, actual, predicted)
	}
}

// FuzzShrinkHostile runs checkHostile on seeds the fuzzer picks; `make
// test` runs only the committed ones.
func FuzzShrinkHostile(f *testing.F) {
	for _, seed := range []uint64{3, 65, 149, 288, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkHostile(t, seed, map[string]int{}) })
}

func TestShrinkHostileProperty(t *testing.T) {
	stats := map[string]int{}
	for seed := range uint64(200) {
		checkHostile(t, seed, stats)
	}
	t.Logf("%v", stats)
	// The generator must reach every outcome, or the test checks little.
	for _, k := range []string{"schema refused", "value refused", "sent"} {
		if stats[k] < 10 {
			t.Errorf("only %d cases %s: %v", stats[k], k, stats)
		}
	}
}
