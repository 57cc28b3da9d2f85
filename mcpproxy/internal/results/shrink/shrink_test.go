package shrink

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// The outputSchemas real servers declare, byte for byte as they send
// them in tools/list (the versions the Makefile pins).
const (
	// @modelcontextprotocol/server-filesystem 2026.8.31, read_text_file (and directory_tree).
	readTextFile = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"content":{"type":"string"}},"required":["content"],"additionalProperties":false}`
	// @modelcontextprotocol/server-filesystem, read_media_file.
	readMediaFile = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"content":{"type":"array","items":{"anyOf":[{"type":"object","properties":{"type":{"type":"string","enum":["image","audio"]},"data":{"type":"string"},"mimeType":{"type":"string"}},"required":["type","data","mimeType"],"additionalProperties":false},{"type":"object","properties":{"type":{"type":"string","const":"resource"},"resource":{"type":"object","properties":{"uri":{"type":"string"},"mimeType":{"type":"string"},"blob":{"type":"string"}},"required":["uri","blob"],"additionalProperties":false}},"required":["type","resource"],"additionalProperties":false}]}}},"required":["content"],"additionalProperties":false}`
	// @modelcontextprotocol/server-memory 2026.8.31, read_graph.
	readGraph = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"entities":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string","description":"The name of the entity"},"entityType":{"type":"string","description":"The type of the entity"},"observations":{"type":"array","items":{"type":"string"},"description":"An array of observation contents associated with the entity"}},"required":["name","entityType","observations"],"additionalProperties":false}},"relations":{"type":"array","items":{"type":"object","properties":{"from":{"type":"string","description":"The name of the entity where the relation starts"},"to":{"type":"string","description":"The name of the entity where the relation ends"},"relationType":{"type":"string","description":"The type of the relation"}},"required":["from","to","relationType"],"additionalProperties":false}}},"required":["entities","relations"],"additionalProperties":false}`
)

// recorder is a cut function that remembers what it was given and answers
// a preview the way the proxy does: the size, a link, the beginning.
type recorder struct{ cuts []Cut }

func (r *recorder) cut(c Cut) (string, error) {
	r.cuts = append(r.cuts, c)
	begin := c.Raw[:min(len(c.Raw), 120)]
	return fmt.Sprintf("[%d bytes at https://spillway.test/a/%d] %s", len(c.Raw), len(r.cuts), begin), nil
}

func (r *recorder) summary() string {
	var s []string
	for _, c := range r.cuts {
		s = append(s, fmt.Sprintf("%s %q %d", c.Kind, c.Pointer, c.Kept))
	}
	return strings.Join(s, "; ")
}

func mustCompile(t testing.TB, raw string) *Schema {
	t.Helper()
	if raw == "" {
		return nil
	}
	s, err := Compile([]byte(raw))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// logText returns n bytes of log lines (64 KiB of them, repeated).
func logText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < 64<<10; i++ {
		fmt.Fprintf(&b, "2026-11-26T10:%02d:%02d.000Z INFO request %d served in 3 ms \"quoted\"\n", i/60%60, i%60, i)
	}
	return strings.Repeat(b.String(), n/b.Len()+1)[:n]
}

func graph(entities int) []byte {
	type entity struct {
		Name         string   `json:"name"`
		EntityType   string   `json:"entityType"`
		Observations []string `json:"observations"`
	}
	type relation struct {
		From         string `json:"from"`
		To           string `json:"to"`
		RelationType string `json:"relationType"`
	}
	g := struct {
		Entities  []entity   `json:"entities"`
		Relations []relation `json:"relations"`
	}{}
	for i := range entities {
		g.Entities = append(g.Entities, entity{fmt.Sprintf("entity-%d", i), "person", []string{"works at Acme", fmt.Sprintf("joined in %d", 1990+i%30), "likes long walks on the beach"}})
		g.Relations = append(g.Relations, relation{fmt.Sprintf("entity-%d", i), fmt.Sprintf("entity-%d", (i+1)%entities), "knows"})
	}
	return mustJSON(g)
}

func rows(n int) []map[string]any {
	var r []map[string]any
	for i := range n {
		r = append(r, map[string]any{"id": i, "name": fmt.Sprintf("customer %d", i), "amount": float64(i) * 1.25, "city": "Lisbon"})
	}
	return r
}

func TestShrinkRealSchemas(t *testing.T) {
	image := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff, 0xd8, 0x00, 0x10, 0x4a}, 2<<20))
	runShrinkCases(t, []shrinkCase{{
		name:     "read_text_file of a 20 MB log",
		schema:   readTextFile,
		instance: mustJSON(map[string]string{"content": logText(20 << 20)}),
		budget:   6 << 10,
		cuts:     `string "/content" 0`,
	}, {
		name:     "read_media_file of a 10 MB photo",
		schema:   readMediaFile,
		instance: mustJSON(map[string]any{"content": []any{map[string]string{"type": "image", "data": image, "mimeType": "image/jpeg"}}}),
		budget:   6 << 10,
		cuts:     `string "/content/0/data" 0`,
		keeps:    `"type":"image"`,
	}, {
		name:     "read_media_file of a resource",
		schema:   readMediaFile,
		instance: mustJSON(map[string]any{"content": []any{map[string]any{"type": "resource", "resource": map[string]string{"uri": "file:///tmp/a.bin", "mimeType": "application/octet-stream", "blob": image}}}}),
		budget:   6 << 10,
		cuts:     `string "/content/0/resource/blob" 0`,
		keeps:    `"uri":"file:///tmp/a.bin"`,
	}, {
		name:     "read_graph of 3,000 entities",
		schema:   readGraph,
		instance: graph(3000),
		budget:   6 << 10,
		cuts:     `array "/entities" 5; array "/relations" 5`,
		keeps:    `{"name":"entity-0","entityType":"person","observations":["works at Acme","joined in 1990","likes long walks on the beach"]}`,
	}, {
		name:     "FastMCP list of 50,000 rows, no schema",
		instance: mustJSON(map[string]any{"result": rows(50000)}),
		budget:   6 << 10,
		cuts:     `array "/result" 5`,
		keeps:    `{"amount":0,"city":"Lisbon","id":0,"name":"customer 0"}`,
	}, {
		name:     "statements envelope, no schema",
		instance: mustJSON(map[string]any{"data": map[string]any{"statements": []any{map[string]any{"rows": rows(20000), "count": 20000}}}}),
		budget:   6 << 10,
		cuts:     `array "/data/statements/0/rows" 5`,
		keeps:    `"count":20000`,
	}, {
		name:     "small result unchanged",
		schema:   readTextFile,
		instance: []byte(`{"content": "hello"}`),
		budget:   6 << 10,
	}})
}

// shrinkCase is one instance to shrink and what must come of it.
type shrinkCase struct {
	name     string
	schema   string
	instance []byte
	budget   int
	wantErr  error
	cuts     string // kind, pointer and kept of every cut, in order
	keeps    string // a part of the original that must be in the result
}

func runShrinkCases(t *testing.T, cases []shrinkCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			if err := s.Validate(tt.instance); err != nil {
				t.Fatalf("the original does not validate: %v", err)
			}
			var rec recorder
			out, cuts, err := Shrink(context.Background(), tt.instance, s, Options{Budget: tt.budget}, rec.cut)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Shrink: %v", err)
			}
			if len(out) > tt.budget {
				t.Errorf("result has %d bytes, budget %d", len(out), tt.budget)
			}
			if err := s.Validate(out); err != nil {
				t.Errorf("result does not validate: %v\n%.500s", err, out)
			}
			if got := rec.summary(); got != tt.cuts {
				t.Errorf("cuts = %s, want %s", got, tt.cuts)
			}
			if len(cuts) != len(rec.cuts) {
				t.Errorf("Shrink returned %d cuts, called cut %d times", len(cuts), len(rec.cuts))
			}
			for _, c := range cuts {
				if !within(c.Raw, tt.instance) {
					t.Errorf("cut %q: Raw is not a sub-slice of the instance", c.Pointer)
				}
			}
			if !bytes.Contains(out, []byte(tt.keeps)) {
				t.Errorf("result lacks %s:\n%.1000s", tt.keeps, out)
			}
			if tt.cuts == "" && !bytes.Equal(out, tt.instance) {
				t.Errorf("small result changed: %s", out)
			}
			if strings.Contains(tt.cuts, "string") && !bytes.Contains(out, []byte("https://spillway.test/a/")) {
				t.Errorf("result lacks the preview's link:\n%.1000s", out)
			}
		})
	}
}

// within reports whether sub shares its memory with b.
func within(sub, b []byte) bool {
	if len(sub) == 0 {
		return true
	}
	lo, hi := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&b[len(b)-1]))
	p := uintptr(unsafe.Pointer(&sub[0]))
	return p >= lo && p+uintptr(len(sub)-1) <= hi
}

func TestShrinkHostile(t *testing.T) {
	long := strings.Repeat("ab", 5000)
	deep := strings.Repeat(`{"a":`, 1000) + `"` + long + `"` + strings.Repeat(`}`, 1000)
	runShrinkCases(t, []shrinkCase{{
		name:     "minItems 1000 of large items",
		schema:   `{"type":"object","properties":{"xs":{"type":"array","minItems":1000}},"required":["xs"]}`,
		instance: []byte(`{"xs":[` + strings.TrimSuffix(strings.Repeat(`"`+strings.Repeat("x", 300)+`",`, 1000), ",") + `]}`),
		budget:   6 << 10,
		wantErr:  ErrNoFit,
	}, {
		name:     "minItems 1000 of small items fits",
		schema:   `{"type":"object","properties":{"xs":{"type":"array","minItems":1000}}}`,
		instance: []byte(`{"xs":[` + strings.TrimSuffix(strings.Repeat(`1,`, 3000), ",") + `]}`),
		budget:   2100,
		cuts:     `array "/xs" 1000`,
	}, {
		name:     "required long string with a pattern",
		schema:   `{"type":"object","properties":{"s":{"type":"string","pattern":"^(ab)*$"}},"required":["s"]}`,
		instance: []byte(`{"s":"` + long + `"}`),
		budget:   6 << 10,
		wantErr:  ErrNoFit,
	}, {
		name:     "optional long string with a pattern is dropped",
		schema:   `{"type":"object","properties":{"s":{"type":"string","pattern":"^(ab)*$"},"n":{"type":"integer"}},"required":["n"]}`,
		instance: []byte(`{"n":1,"s":"` + long + `"}`),
		budget:   6 << 10,
		cuts:     `object "" 1`,
	}, {
		name:     "required const",
		schema:   `{"type":"object","properties":{"s":{"const":"` + long + `"}},"required":["s"]}`,
		instance: []byte(`{"s":"` + long + `"}`),
		budget:   6 << 10,
		wantErr:  ErrNoFit,
	}, {
		name:     "1000 levels deep",
		instance: []byte(deep),
		budget:   1 << 10,
		cuts:     `object "/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a" 0`,
	}, {
		name:     "1000 levels deep, every level required",
		schema:   `{"$defs":{"n":{"type":["object","string"],"required":["a"],"properties":{"a":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`,
		instance: []byte(deep),
		budget:   1 << 10,
		wantErr:  ErrNoFit,
	}, {
		name:     "uniqueItems of long strings",
		schema:   `{"type":"object","properties":{"xs":{"type":"array","uniqueItems":true,"items":{"type":"string"}}}}`,
		instance: []byte(`{"xs":["a` + long + `","b` + long + `","c` + long + `"]}`),
		budget:   1 << 10,
		cuts:     `string "/xs/0" 0; string "/xs/1" 0; string "/xs/2" 0`,
	}, {
		name:     "oneOf made ambiguous by dropping a member",
		schema:   `{"type":"object","oneOf":[{},{"not":{"required":["x"]}}]}`,
		instance: []byte(`{"x":"` + long + `"}`),
		budget:   1 << 10,
		cuts:     `string "/x" 0`,
	}, {
		name:     "maxLength and minLength",
		schema:   `{"type":"object","properties":{"s":{"type":"string","minLength":300,"maxLength":400}},"required":["s"]}`,
		instance: []byte(`{"s":"` + long[:390] + `"}`),
		budget:   330,
		cuts:     `string "/s" 0`,
	}})
}

func TestShrinkErrors(t *testing.T) {
	boom := errors.New("store is down")
	tests := []struct {
		name     string
		instance string
		o        Options
		cut      func(Cut) (string, error)
		want     error
		wantErr  string
	}{
		{name: "invalid JSON", instance: `{"a":`, o: Options{Budget: 10}, want: ErrInvalid, wantErr: "not valid JSON"},
		{name: "not an object", instance: `[1,2]`, o: Options{Budget: 10}, want: ErrInvalid, wantErr: "not a JSON object"},
		{name: "no budget", instance: `{}`, want: ErrInvalid, wantErr: "budget 0"},
		{name: "budget too small", instance: `{"a":1}`, o: Options{Budget: 1}, want: ErrNoFit, wantErr: "budget is 1"},
		{name: "cut fails", instance: `{"a":"` + strings.Repeat("x", 1000) + `"}`, o: Options{Budget: 100},
			cut: func(Cut) (string, error) { return "", boom }, want: boom, wantErr: `cut "/a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Shrink(context.Background(), []byte(tt.instance), nil, tt.o, tt.cut)
			if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.wantErr) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCompile(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		want    error
		wantErr string
	}{
		{name: "read_text_file", schema: readTextFile},
		{name: "read_media_file", schema: readMediaFile},
		{name: "read_graph", schema: readGraph},
		{name: "2020-12 with $defs", schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s"}}}`},
		{name: "anchor and $id", schema: `{"$id":"https://x.test/root","$defs":{"s":{"$anchor":"str","type":"string"}},"properties":{"a":{"$ref":"#str"},"b":{"$ref":"https://x.test/root#/$defs/s"}}}`},
		{name: "recursion through properties", schema: `{"$defs":{"n":{"properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`},
		{name: "remote $ref", schema: `{"$ref":"https://example.com/schema.json"}`, want: ErrRemoteRef},
		{name: "loop", schema: `{"$ref":"#"}`, want: ErrSchema, wantErr: "loop"},
		{name: "loop through allOf", schema: `{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, want: ErrSchema, wantErr: "loop"},
		{name: "too large", schema: `{"description":"` + strings.Repeat("x", MaxSchemaSize) + `"}`, want: ErrSchema, wantErr: "more than"},
		{name: "draft-04", schema: `{"$schema":"http://json-schema.org/draft-04/schema#"}`, want: ErrSchema, wantErr: "draft-04"},
		{name: "not JSON", schema: `{`, want: ErrSchema},
		{name: "bad pattern", schema: `{"patternProperties":{"(":{}}}`, want: ErrSchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile([]byte(tt.schema))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.wantErr) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range []string{readTextFile, readMediaFile, readGraph, `{"$ref":"#"}`, `true`, `false`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"$id":"https://x.test/r","$defs":{"s":{"$anchor":"s"}},"$ref":"#s"}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"$id":"#a"}},"items":[{"$ref":"#a"}]}`,
		`{"$dynamicAnchor":"n","$dynamicRef":"#n"}`, `{"patternProperties":{"^a":{"$ref":"#"}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Compile(raw)
		if err != nil {
			return
		}
		// A compiled schema validates without looping forever.
		_ = s.Validate([]byte(`{"a":[1,"x",{"b":null}],"next":{"next":{}}}`))
	})
}

func TestCompileDeepSchema(t *testing.T) {
	// The library's work grows with depth times size: 4,000 levels took
	// it 17 s, 1 MiB under 49 levels 2.8 s. Compile refuses both at once,
	// and the largest schema it takes under 49 levels.
	for _, raw := range []string{
		strings.Repeat(`{"properties":{"a":`, 3000) + `{}` + strings.Repeat(`}}`, 3000),
		strings.Repeat(`{"properties":{"a":`, 49) + `{"description":"` + strings.Repeat("x", MaxSchemaSize-2000) + `"}` + strings.Repeat(`}}`, 49),
	} {
		if _, err := Compile([]byte(raw)); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "inside one another") {
			t.Fatalf("err = %v, want ErrSchema: too deep", err)
		}
	}
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 49) + `{"type":"string"}` + strings.Repeat(`}}`, 49)
	s := mustCompile(t, deep)
	instance := strings.Repeat(`{"a":`, 49) + `"` + strings.Repeat("x", 5000) + `"` + strings.Repeat(`}`, 49)
	out, _, err := Shrink(context.Background(), []byte(instance), s, Options{Budget: 3000}, func(Cut) (string, error) { return "", nil })
	if err != nil {
		t.Fatalf("Shrink: %v", err)
	}
	if len(out) > 3000 {
		t.Fatalf("%d bytes", len(out))
	}
}

// The instances of issue 21: a 20 MB log read by read_text_file, and
// 50,000 rows. Allocation stays proportional to the result: B/op is
// far below the instance's size (the big member is never copied).
func BenchmarkShrink(b *testing.B) {
	cases := []struct {
		name     string
		schema   string
		instance []byte
	}{
		{"read_text_file 20 MB", readTextFile, mustJSON(map[string]string{"content": logText(20 << 20)})},
		{"50,000 rows", "", mustJSON(map[string]any{"result": rows(50000)})},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s := mustCompile(b, c.schema)
			b.SetBytes(int64(len(c.instance)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Shrink(context.Background(), c.instance, s, Options{Budget: 6 << 10}, func(Cut) (string, error) { return "preview", nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(c.instance)), "instance-bytes")
		})
	}
}

// A deep chain of objects, each nearly as large as the instance, costs
// each level a scan of the whole: the walk stops at maxWork instances.
func TestShrinkBoundsWork(t *testing.T) {
	instance := []byte(strings.Repeat(`{"a":`, 1000) + `"` + strings.Repeat("x", 4<<20) + `"` + strings.Repeat(`}`, 1000))
	body, o, _ := prepare(instance, Options{Budget: 1 << 10})
	z := &shrinker{o: o}
	z.plan(context.Background(), body)
	if max := maxWork*len(instance) + 1<<20 + len(instance); z.work > max {
		t.Fatalf("the walk scanned %d bytes, more than %d", z.work, max)
	}
	out, _, err := Shrink(context.Background(), instance, nil, o, func(Cut) (string, error) { return "", nil })
	if err != nil || len(out) > o.Budget {
		t.Fatalf("Shrink: %d bytes, %v", len(out), err)
	}
}

// One Schema serves every goroutine (run with -race).
func TestSchemaConcurrentUse(t *testing.T) {
	s := mustCompile(t, readGraph)
	instance := graph(500)
	want, _, err := Shrink(context.Background(), instance, s, Options{Budget: 2 << 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			out, _, err := Shrink(context.Background(), instance, s, Options{Budget: 2 << 10}, nil)
			if err == nil && !bytes.Equal(out, want) {
				err = fmt.Errorf("a different result: %s", out)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A thousand anyOf branches for each of 20,000 members: the walk stops
// visiting subschemas at maxSteps.
func TestShrinkBoundsSteps(t *testing.T) {
	branches := strings.TrimSuffix(strings.Repeat(`{"type":"string","minLength":1},`, 1000), ",")
	s := mustCompile(t, `{"type":"object","additionalProperties":{"anyOf":[`+branches+`]}}`)
	var b strings.Builder
	b.WriteString("{")
	for i := range 20000 {
		fmt.Fprintf(&b, `"k%d":"%s",`, i, strings.Repeat("v", 300))
	}
	instance := []byte(strings.TrimSuffix(b.String(), ",") + "}")
	body, o, _ := prepare(instance, Options{Budget: 2 << 10})
	z := &shrinker{s: s, o: o}
	z.plan(context.Background(), body)
	if max := maxSteps + 1001; z.steps > max { // one member's worth over
		t.Fatalf("the walk made %d steps, more than %d", z.steps, max)
	}
	out, _, err := Shrink(context.Background(), instance, s, o, nil)
	if err != nil || len(out) > o.Budget {
		t.Fatalf("Shrink: %d bytes, %v", len(out), err)
	}
}
