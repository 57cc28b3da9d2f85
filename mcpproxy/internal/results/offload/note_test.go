package offload

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// rowSchema is one row of the results below, closed as Zod and pydantic
// close every object they describe.
const rowSchema = `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id","name"],"additionalProperties":false}`

// checkAgainst validates v against schema (JSON) with the validator
// alone, as a client holding schema would.
func checkAgainst(t *testing.T, schema string, v json.RawMessage) error {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var inst any
	if err := json.Unmarshal(v, &inst); err != nil {
		t.Fatal(err)
	}
	return rs.Validate(inst)
}

// Issue 38, item 4: 300 rows under a schema that closes its object behind
// a root $ref (Zod) or allOf (pydantic). The client gets either a shorter
// structuredContent that says so (the note, with the link) and validates
// against the schema it was shown, or, where that schema refuses the note
// anywhere, a tool error with the whole value behind a link; never five
// rows that pass for all of them.
func TestShrunkRowsAreNeverSilent(t *testing.T) {
	rowsProp := `{"type":"array","items":` + rowSchema + `}`
	object := `{"type":"object","properties":{"rows":` + rowsProp + `},"required":["rows"],"additionalProperties":false}`
	for _, tt := range []struct {
		name, schema string
		noted        bool // the note fits: structuredContent stays
	}{
		{"Zod: a root $ref into definitions",
			`{"$ref":"#/definitions/Rows","definitions":{"Rows":` + object + `},"$schema":"http://json-schema.org/draft-07/schema#"}`, true},
		{"pydantic: allOf of a $ref into $defs",
			`{"$defs":{"Rows":` + object + `},"allOf":[{"$ref":"#/$defs/Rows"}],"title":"RowsOut"}`, true},
		{"pydantic: a $ref with a pointer to escape",
			`{"$defs":{"Rows/v2":` + object + `},"$ref":"#/$defs/Rows~1v2"}`, true},
		{"closed at the top", object, true},
		{"2020-12: unevaluatedProperties under allOf",
			`{"allOf":[{"properties":{"rows":` + rowsProp + `}}],"unevaluatedProperties":false,"$schema":"https://json-schema.org/draft/2020-12/schema"}`, true},
		{"typed additionalProperties",
			`{"type":"object","properties":{"rows":` + rowsProp + `},"additionalProperties":{"type":"integer"}}`, true},
		{"propertyNames refuse the note",
			`{"type":"object","properties":{"rows":` + rowsProp + `},"propertyNames":{"pattern":"^[a-z]+$"}}`, false},
		{"maxProperties 1",
			`{"type":"object","properties":{"rows":` + rowsProp + `},"maxProperties":1}`, false},
		{"a $ref to an anchor",
			`{"$ref":"#rows","$defs":{"Rows":{"$anchor":"rows","type":"object","properties":{"rows":` + rowsProp + `},"additionalProperties":false}}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			shown, sch := presented(t, tt.schema)
			var rows []any
			for i := range 300 {
				rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("row %d of 300", i)})
			}
			sc := mustJSON(map[string]any{"rows": rows})
			if err := checkAgainst(t, shown, sc); err != nil {
				t.Fatalf("the original does not validate against the schema shown: %v", err)
			}
			in := mustJSON(map[string]any{"content": []any{map[string]any{"type": "text", "text": string(sc)}}, "structuredContent": json.RawMessage(sc)})
			r, _ := rewriteSmall(t, testService(t, nil), Call{Method: "tools/call", Tool: "t", Schema: sch}, in)
			if r.StructuredContent == nil {
				whole := slices.ContainsFunc(r.Meta.Replaced, func(rp replaced) bool { return rp.Pointer == "/structuredContent" })
				if tt.noted || !r.IsError || !whole {
					t.Fatalf("no structuredContent (isError %v, replaced %+v), want it noted", r.IsError, r.Meta.Replaced)
				}
				return
			}
			if !tt.noted {
				t.Errorf("structuredContent kept although the schema refuses the note: %.300s", mustJSON(r.StructuredContent))
			}
			note, _ := r.StructuredContent[NoteMember]
			if len(r.Meta.Replaced) == 0 || !strings.Contains(string(note), r.Meta.Replaced[len(r.Meta.Replaced)-1].HTTPURL) {
				t.Errorf("rows cut without a note naming their link: %s = %s", NoteMember, note)
			}
			if err := checkAgainst(t, shown, mustJSON(r.StructuredContent)); err != nil {
				t.Errorf("structuredContent does not validate against the schema shown: %v\nschema %s", err, shown)
			}
		})
	}
}
