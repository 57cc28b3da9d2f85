package shrink

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// maxClosers bounds the subschemas AddProperty looks at in one schema:
// Zod reaches its object in one $ref, pydantic in an allOf and a $ref.
const maxClosers = 16

// AddProperty returns schema (JSON, as checked by json.Valid) with the
// property name, of schema prop (JSON), added to the properties of every
// subschema that constrains members it does not name
// (additionalProperties or unevaluatedProperties other than true) and
// applies to the root value itself: the root, and what its $ref (a JSON
// pointer within schema), allOf, anyOf and oneOf reach, as far as
// maxClosers subschemas. That is where Zod (a root $ref into definitions)
// and pydantic (allOf, $ref into $defs) close an object. A subschema that
// names the property already is left as it is, and every other byte is
// kept. changed is false when nothing was added (out is then schema).
//
// What else may refuse the member (propertyNames, maxProperties, a
// patternProperties that matches its name, a $ref it cannot follow) is
// not changed: a value carrying the member must still be validated.
func AddProperty(schema []byte, name string, prop []byte) (out []byte, changed bool) {
	var at []int // where each subschema to edit starts
	seen := map[int]bool{}
	var visit func(start int)
	visit = func(start int) {
		if seen[start] || len(seen) >= maxClosers || schema[start] != '{' {
			return
		}
		seen[start] = true
		sub := schema[start:jsonrpc.SkipValue(schema, start)]
		if (refuses(sub, "additionalProperties") || refuses(sub, "unevaluatedProperties")) && jsonrpc.Path(sub, "properties", name) == nil {
			at = append(at, start)
		}
		if ref := jsonrpc.StringMember(sub, "$ref"); strings.HasPrefix(ref, "#") {
			if t, ok := local(schema, ref[1:]); ok {
				visit(t)
			}
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			if span, ok := jsonrpc.Member(sub, k); ok && sub[span[0]] == '[' {
				for _, el := range jsonrpc.Elements(sub, span) {
					visit(start + el[0])
				}
			}
		}
	}
	visit(jsonrpc.SkipSpace(schema, 0))
	// From the last to the first, so that an edit moves no start still
	// to come; a subschema's end is found again, an edit inside may have
	// moved it.
	slices.Sort(at)
	out = schema
	for _, start := range slices.Backward(at) {
		end := jsonrpc.SkipValue(out, start)
		edited, ok := jsonrpc.SetPath(out[start:end], prop, "properties", name)
		if !ok { // "properties" is not an object
			continue
		}
		out = slices.Concat(out[:start], edited, out[end:])
		changed = true
	}
	return out, changed
}

// refuses reports whether the member key of the schema sub constrains
// members: present and neither true nor {}.
func refuses(sub []byte, key string) bool {
	v := jsonrpc.RawMember(sub, key)
	if v == nil || string(v) == "true" {
		return false
	}
	return !(v[0] == '{' && jsonrpc.SkipSpace(v, 1) == len(v)-1)
}

// local returns where the value at the URI fragment frag (a JSON pointer,
// percent-encoded) of the JSON value b starts.
func local(b []byte, frag string) (int, bool) {
	ptr, err := url.PathUnescape(frag)
	if err != nil || ptr != "" && ptr[0] != '/' {
		return 0, false // an anchor, not a pointer
	}
	at := jsonrpc.SkipSpace(b, 0)
	if ptr == "" {
		return at, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		cur := b[at:jsonrpc.SkipValue(b, at)]
		switch cur[0] {
		case '{':
			span, ok := jsonrpc.Member(cur, tok)
			if !ok {
				return 0, false
			}
			at += span[0]
		case '[':
			els := jsonrpc.Elements(cur, [2]int{0, len(cur)})
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(els) {
				return 0, false
			}
			at += els[i][0]
		default:
			return 0, false
		}
	}
	return at, true
}
