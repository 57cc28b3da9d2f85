package shrink

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// nestedAnyOf is issue 38's schema: levels of anyOf, each naming the next
// level twice, so that a value is checked once per path: 2^levels times.
// leaf is the last level.
func nestedAnyOf(levels int, leaf string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","$ref":"#/$defs/l0","$defs":{`)
	for i := range levels {
		fmt.Fprintf(&b, `"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"l%d":%s}}`, levels, leaf)
	return b.String()
}

// deepAnyOf doubles at each level of the value instead: a level's two
// branches each name the next level under the member "a". Each schema
// reaches three others in place, and Compile takes it; a value levels
// deep is checked 2^levels times at its bottom.
func deepAnyOf(levels int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/l0","$defs":{`)
	for i := range levels {
		fmt.Fprintf(&b, `"l%d":{"type":"object","anyOf":[{"properties":{"a":{"$ref":"#/$defs/l%d"}}},{"properties":{"a":{"$ref":"#/$defs/l%d"}}}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"l%d":{"type":"string"}}}`, levels)
	return b.String()
}

const intRows = `{"type":"object","properties":{"rows":{"type":"array","items":{"type":"integer"}}}}`

func rowsOf(item string, n int) []byte {
	return []byte(`{"rows":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`)
}

// Issue 38's schema, 1.3 KB of 20 levels, is refused at once.
func TestCompileRefusesFanout(t *testing.T) {
	raw := nestedAnyOf(20, intRows)
	_, err := Compile([]byte(raw))
	if !errors.Is(err, ErrSchema) || !strings.Contains(fmt.Sprint(err), "subschemas at once") {
		t.Fatalf("%d bytes, 20 levels: err = %v, want ErrSchema: too many subschemas at once", len(raw), err)
	}
	mustCompile(t, nestedAnyOf(10, intRows)) // 4,094 visits: taken
}

// measured runs f, failing the test when it does not return within
// deadline (it never would), and returns what it allocated.
func measured(t *testing.T, deadline time.Duration, f func()) (alloc uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatalf("no answer within %v", deadline)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Schemas Compile takes whose check of one small value would still cost
// the validator far more than maxCheckWork or maxCheckAlloc: Validate
// refuses each (ErrSchema) without calling it, and Shrink says the same,
// within a bound of memory. Called, the validator took 133 ms of CPU and
// 25 MB for the first, 18 MB for the second (a 318 KB error), 1.8 s and
// 543 MB for the third, 65 ms per pattern and name for the fifth (7.8 s),
// 57 MB for the last (measured while writing this test).
func TestValidateBoundsCost(t *testing.T) {
	var enum strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&enum, `"value %d",`, i)
	}
	var pats strings.Builder
	for i := range 60 {
		fmt.Fprintf(&pats, `"[a-z]{1000}$|^%d":{"type":"string"},`, i)
	}
	for _, tt := range []struct {
		name, schema string
		instance     []byte
	}{
		{"10 levels of anyOf, 300 rows", nestedAnyOf(10, intRows), rowsOf("12345", 300)},
		{"10 levels of anyOf, each failing", nestedAnyOf(10, intRows), rowsOf(`"x"`, 30)},
		{"anyOf doubling at each level of the value", deepAnyOf(18), []byte(strings.Repeat(`{"a":`, 18) + `"x"` + strings.Repeat(`}`, 18))},
		{"a huge enum for each row", `{"properties":{"rows":{"items":{"enum":[` + strings.TrimSuffix(enum.String(), ",") + `]}}}}`, rowsOf(`"value 4999"`, 400)},
		{"patternProperties on long names", `{"patternProperties":{` + strings.TrimSuffix(pats.String(), ",") + `}}`,
			[]byte(`{"` + strings.Repeat("k", 1500) + `":"a","` + strings.Repeat("j", 1500) + `":"b"}`)},
		{"a chain of references under a deep value", `{"$defs":{"n":{"type":"object","required":["a"],"properties":{"a":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`,
			[]byte(strings.Repeat(`{"a":`, 1000) + `1` + strings.Repeat(`}`, 1000))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			var err error
			alloc := measured(t, time.Minute, func() { err = s.Validate(tt.instance) })
			t.Logf("Validate: %v; %d bytes allocated", err, alloc)
			if !errors.Is(err, ErrSchema) {
				t.Errorf("Validate: err = %v, want ErrSchema", err)
			}
			if bound := uint64(maxCheckAlloc + 64*len(tt.instance)); alloc > bound {
				t.Errorf("Validate allocated %d bytes, more than %d", alloc, bound)
			}
			if len(fmt.Sprint(err)) > 2*maxErrText {
				t.Errorf("an error of %d bytes", len(fmt.Sprint(err)))
			}
			alloc = measured(t, time.Minute, func() {
				_, _, err = Shrink(context.Background(), tt.instance, s, Options{Budget: len(tt.instance) + 1}, nil)
			})
			if !errors.Is(err, ErrSchema) || errors.Is(err, ErrNoFit) {
				t.Errorf("Shrink: err = %v, want ErrSchema", err)
			}
			if bound := uint64(maxCheckAlloc + 64*len(tt.instance)); alloc > bound {
				t.Errorf("Shrink allocated %d bytes, more than %d", alloc, bound)
			}
		})
	}
}

// A check that costs little goes on to the validator, and its error is
// short whatever the validator said.
func TestValidateClipsErrors(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{"anyOf":[{"type":"integer"},{"type":"boolean"},{"type":"null"}]}}}`)
	err := s.Validate([]byte(`{"a":"` + strings.Repeat("long text ", 500) + `"}`))
	if err == nil || errors.Is(err, ErrSchema) || len(err.Error()) > 2*maxErrText {
		t.Fatalf("err = %v (%d bytes), want a validation error of at most %d bytes", err, len(fmt.Sprint(err)), 2*maxErrText)
	}
	if err := s.Validate([]byte(`{"a":true}`)); err != nil {
		t.Fatal(err)
	}
}

// Shrink takes a context and stops its walk when it is done.
func TestShrinkStopsWhenDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := Shrink(ctx, graph(500), mustCompile(t, readGraph), Options{Budget: 2 << 10}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// A pattern is matched at a cost of each byte of the member's name times
// each instruction of its program: the walk counts that, not one step
// per match, and stops at maxSteps.
func TestShrinkCountsPatternWork(t *testing.T) {
	s := mustCompile(t, `{"type":"object","patternProperties":{"^[a-z]{1000}$":{"type":"string"}}}`)
	var b strings.Builder
	b.WriteString("{")
	for i := range 10 {
		fmt.Fprintf(&b, `"%s%d":"%s",`, strings.Repeat("k", 64<<10), i, strings.Repeat("v", 1000))
	}
	instance := []byte(strings.TrimSuffix(b.String(), ",") + "}")
	body, o, _ := prepare(instance, Options{Budget: 2 << 10})
	z := &shrinker{s: s, o: o}
	measured(t, time.Minute, func() { z.plan(context.Background(), body) })
	match := (64<<10 + 2) * s.patterns[s.rs.Schema()][0].insts / 8 // one name
	if z.steps < match || z.steps > maxSteps+match {
		t.Errorf("the walk counted %d steps, want one match of a 64 KiB name (%d) and no more than maxSteps (%d) besides", z.steps, match, maxSteps)
	}
}
