package shrink

import (
	"encoding/json"
	"testing"
)

// BenchmarkCompile compiles schemas of the shapes Compile meets: a small
// real one, a pydantic-style union of references, and the deepest nest
// of anyOf it takes. Compile runs once per tool, on its first large
// result.
func BenchmarkCompile(b *testing.B) {
	for _, c := range []struct{ name, schema string }{
		{"read_graph", readGraph},
		{"10 levels of anyOf", nestedAnyOf(10, intRows)},
		{"anyOf doubling with the value", deepAnyOf(12)},
	} {
		b.Run(c.name, func(b *testing.B) {
			raw := []byte(c.schema)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAffordable counts what validating one value would cost, as
// Validate does before every check: a real result, and values whose
// count goes to the bound.
func BenchmarkAffordable(b *testing.B) {
	for _, c := range []struct {
		name, schema string
		instance     []byte
	}{
		{"read_graph, 500 entities", readGraph, graph(500)},
		{"10 levels of anyOf, 300 rows", nestedAnyOf(10, intRows), rowsOf("12345", 300)},
		{"10 levels of anyOf, each failing", nestedAnyOf(10, intRows), rowsOf(`"x"`, 30)},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := mustCompile(b, c.schema)
			var v any
			if err := json.Unmarshal(c.instance, &v); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.affordable(v)
			}
		})
	}
}
