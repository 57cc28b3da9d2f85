package policy

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite policy/schema from the Go types")

// schemaOf is the JSON Schema of a decision document, from its Go type:
// the checked-in files under schema/ are what policy authors read, and
// this test keeps them equal to what Spillway actually sends and expects.
func schemaOf(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem())
	case reflect.Struct:
		props := map[string]any{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			props[name] = schemaOf(f.Type)
			if !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Interface:
		return map[string]any{} // any JSON value (a call's arguments)
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64:
		return map[string]any{"type": "integer"}
	}
	panic("no schema for " + t.String())
}

func TestSchemas(t *testing.T) {
	docs := map[string]any{
		"fetch.input": FetchInput{}, "fetch.output": FetchDecision{},
		"offload.input": OffloadInput{}, "offload.output": OffloadDecision{},
		"mint.input": MintInput{}, "mint.output": MintDecision{},
		"call.input": CallInput{}, "call.output": CallDecision{},
	}
	for name, v := range docs {
		s := schemaOf(reflect.TypeOf(v))
		s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
		s["title"] = "Spillway " + strings.Replace(name, ".", " decision ", 1)
		want, _ := json.MarshalIndent(s, "", "  ")
		want = append(want, '\n')
		path := filepath.Join("schema", name+".json")
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s is out of date with the Go types (go test ./policy -run Schemas -update)", path)
		}
	}
}
