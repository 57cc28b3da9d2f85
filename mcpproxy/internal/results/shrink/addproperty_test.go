package shrink

import (
	"encoding/json"
	"testing"
)

func TestAddProperty(t *testing.T) {
	const p = `{"type":"string"}`
	for _, tt := range []struct{ name, in, want string }{
		{"closed at the top", `{"additionalProperties":false}`, `{"additionalProperties":false,"properties":{"n":{"type":"string"}}}`},
		{"Zod", `{"$ref":"#/definitions/X","definitions":{"X":{"properties":{"a":{}},"additionalProperties":false}}}`,
			`{"$ref":"#/definitions/X","definitions":{"X":{"properties":{"a":{},"n":{"type":"string"}},"additionalProperties":false}}}`},
		{"pydantic, twice the same", `{"allOf":[{"$ref":"#/$defs/M"},{"$ref":"#/$defs/M"}],"$defs":{"M":{"unevaluatedProperties":{"type":"integer"}}}}`,
			`{"allOf":[{"$ref":"#/$defs/M"},{"$ref":"#/$defs/M"}],"$defs":{"M":{"unevaluatedProperties":{"type":"integer"},"properties":{"n":{"type":"string"}}}}}`},
		{"both the top and a branch", `{"anyOf":[{"additionalProperties":false}],"additionalProperties":false}`,
			`{"anyOf":[{"additionalProperties":false,"properties":{"n":{"type":"string"}}}],"additionalProperties":false,"properties":{"n":{"type":"string"}}}`},
		{"open", `{"additionalProperties":true,"unevaluatedProperties":{ },"properties":{"a":{"additionalProperties":false}}}`, ``},
		{"named already", `{"properties":{"n":{}},"additionalProperties":false}`, ``},
		{"an anchor is not followed", `{"$ref":"#x","$defs":{"x":{"$anchor":"x","additionalProperties":false}}}`, ``},
		{"a loop", `{"$ref":"#","allOf":[{"$ref":"#/allOf/0"}]}`, ``},
		{"properties not an object", `{"properties":[],"additionalProperties":false}`, ``},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, changed := AddProperty([]byte(tt.in), "n", []byte(p))
			if tt.want == "" {
				if changed || string(out) != tt.in {
					t.Fatalf("changed to %s", out)
				}
				return
			}
			if !changed || string(out) != tt.want || !json.Valid(out) {
				t.Fatalf("got %s (changed %v), want %s", out, changed, tt.want)
			}
		})
	}
}
