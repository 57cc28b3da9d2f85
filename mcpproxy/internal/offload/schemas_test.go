package offload

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// listing is a tools/list result naming tool with outputSchema schema.
func listing(tool, schema string) []byte {
	return []byte(`{"tools":[{"name":"` + tool + `","inputSchema":{"type":"object"},"outputSchema":` + schema + `}]}`)
}

const (
	strictRows = `{"type":"object","additionalProperties":false,"required":["rows"],"properties":{"rows":{"type":"array","minItems":50}}}`
	looseRows  = `{"type":"object","properties":{"rows":{"type":"array"}}}`
)

// Each tenant's results are shrunk against what it was shown: tenant A's
// listing of another schema for the same name leaves B's as it was, and
// a tenant that listed nothing knows nothing (before, one table served
// every tenant: the last listing won).
func TestLearnedTenantsApart(t *testing.T) {
	var l Learned
	a, b := Key{Tenant: "a"}, Key{Tenant: "b"}
	l.Present(b, listing("report", strictRows))
	l.Present(a, listing("report", looseRows))
	sb, err := l.Lookup(b, "report")
	if err != nil || sb == nil {
		t.Fatalf("B's schema: %v, %v", sb, err)
	}
	if sb.Validate([]byte(`{"rows":[1,2,3,4,5]}`)) == nil {
		t.Error("B's schema takes 5 rows: A's listing replaced it")
	}
	sa, err := l.Lookup(a, "report")
	if err != nil || sa == nil || sa.Validate([]byte(`{"rows":[1,2,3,4,5]}`)) != nil {
		t.Errorf("A's schema: %v, %v", sa, err)
	}
	if _, err := l.Lookup(Key{Tenant: "c"}, "report"); !errors.Is(err, ErrUnknown) {
		t.Errorf("a tenant that listed nothing: %v, want ErrUnknown", err)
	}
	if !l.Listed(a, "report") || l.Listed(Key{Tenant: "c"}, "report") || l.Listed(a, "other") {
		t.Error("Listed does not follow the tenant")
	}
}

// The bounds: tools per table, bytes per table, tables, bytes across
// tables, idle tables. What falls past one is unknown (ErrUnknown), never
// shrunk against a guess.
func TestLearnedBounds(t *testing.T) {
	t.Run("tools per table", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`{"tools":[`)
		for i := range maxTools + 1 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"t%d","inputSchema":{},"outputSchema":{"type":"object"}}`, i)
		}
		b.WriteString(`]}`)
		var l Learned
		k := Key{Tenant: "a"}
		l.Present(k, []byte(b.String()))
		if _, err := l.Lookup(k, "t0"); err != nil {
			t.Errorf("the first tool: %v", err)
		}
		last := fmt.Sprintf("t%d", maxTools)
		if _, err := l.Lookup(k, last); !errors.Is(err, ErrUnknown) || l.Listed(k, last) {
			t.Errorf("tool %d of a table: %v, want ErrUnknown", maxTools+1, err)
		}
		// Another tenant's table has room of its own.
		l.Present(Key{Tenant: "b"}, listing(last, `{"type":"object"}`))
		if _, err := l.Lookup(Key{Tenant: "b"}, last); err != nil {
			t.Errorf("another tenant: %v", err)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		var l Learned
		big := func(tool string, n int) []byte {
			return listing(tool, `{"type":"object","description":"`+strings.Repeat("d", n)+`"}`)
		}
		k := Key{Tenant: "a"}
		l.Present(k, big("over", maxTableBytes))
		if _, err := l.Lookup(k, "over"); !errors.Is(err, ErrUnknown) {
			t.Errorf("a schema over a table's bytes: %v, want ErrUnknown", err)
		}
		// Tables of 15 MiB each: the fifth is past maxLearnedBytes, and
		// the least recently used other one goes.
		for i := range 5 {
			k := Key{Tenant: fmt.Sprint("t", i)}
			l.Present(k, big("t", 15<<20))
			if i == 1 {
				l.Listed(Key{Tenant: "t0"}, "t") // used: t1 is the least recent
			}
		}
		if !l.Listed(Key{Tenant: "t0"}, "t") || l.Listed(Key{Tenant: "t1"}, "t") || !l.Listed(Key{Tenant: "t4"}, "t") {
			t.Errorf("past %d MiB: t0 %v, t1 %v (want dropped), t4 %v", maxLearnedBytes>>20,
				l.Listed(Key{Tenant: "t0"}, "t"), l.Listed(Key{Tenant: "t1"}, "t"), l.Listed(Key{Tenant: "t4"}, "t"))
		}
	})
	t.Run("tables", func(t *testing.T) {
		var l Learned
		for i := range maxTables + 1 {
			l.Present(Key{Tenant: fmt.Sprint(i)}, listing("t", `{"type":"object"}`))
		}
		if l.Listed(Key{Tenant: "0"}, "t") || !l.Listed(Key{Tenant: fmt.Sprint(maxTables)}, "t") || len(l.tables) != maxTables {
			t.Errorf("%d tables after %d tenants; the first still there: %v", len(l.tables), maxTables+1, l.Listed(Key{Tenant: "0"}, "t"))
		}
	})
	t.Run("idle", func(t *testing.T) {
		now := time.Unix(1e9, 0)
		l := Learned{now: func() time.Time { return now }}
		l.Present(Key{Tenant: "a"}, listing("t", `{"type":"object"}`))
		now = now.Add(tableIdle - time.Second)
		l.Present(Key{Tenant: "b"}, listing("t", `{"type":"object"}`))
		if !l.Listed(Key{Tenant: "a"}, "t") {
			t.Fatal("a table used within the hour is gone")
		}
		now = now.Add(tableIdle)
		if l.Listed(Key{Tenant: "b"}, "t") || len(l.tables) != 0 {
			t.Errorf("%d tables after %v idle", len(l.tables), tableIdle)
		}
	})
}
