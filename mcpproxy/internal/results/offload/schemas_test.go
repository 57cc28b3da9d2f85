package offload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// Concurrent results of an unknown tool share one listing and wait for
// it; pages are followed and each is also handed on (the x-mcp-header
// bindings); a tool absent from the listing, or behind a listing that
// failed, stays unknown, and is not listed again within the second.
func TestLearnedEnsure(t *testing.T) {
	now := time.Unix(1e9, 0)
	var mu sync.Mutex
	l := Learned{now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	k := Key{Tenant: "a"}
	var lists, also atomic.Int32
	release := make(chan struct{})
	fail := false
	list := func(ctx context.Context, cursor string) ([]byte, error) {
		lists.Add(1)
		<-release
		if fail {
			return nil, errors.New("the upstream is down")
		}
		if cursor == "" {
			return []byte(`{"tools":[{"name":"a","inputSchema":{}}],"nextCursor":"p2"}`), nil
		}
		return listing("b", strictRows), nil
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			l.Ensure(context.Background(), k, "b", list, func([]byte) { also.Add(1) })
			if sch, err := l.Lookup(k, "b"); sch == nil || err != nil {
				t.Errorf("after Ensure: %v, %v", sch, err)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n, a := lists.Load(), also.Load(); n != 2 || a != 2 { // two pages, once
		t.Errorf("%d list calls, %d handed on; want 2, 2", n, a)
	}
	// Another tenant lists for itself.
	l.Ensure(context.Background(), Key{Tenant: "b"}, "b", list, nil)
	if n := lists.Load(); n != 4 {
		t.Errorf("tenant b: %d list calls in all, want 4", n)
	}
	l.Ensure(context.Background(), k, "gone", list, nil)
	if _, err := l.Lookup(k, "gone"); !errors.Is(err, ErrUnknown) || lists.Load() != 4 {
		t.Errorf("within the second: %d list calls (want 4), %v", lists.Load(), err)
	}
	mu.Lock()
	now = now.Add(relistAfter)
	mu.Unlock()
	l.Ensure(context.Background(), k, "gone", list, nil)
	if _, err := l.Lookup(k, "gone"); !errors.Is(err, ErrUnknown) || lists.Load() != 6 {
		t.Errorf("a tool the listing does not name: %d list calls (want 6), %v", lists.Load(), err)
	}
	mu.Lock()
	now = now.Add(relistAfter)
	mu.Unlock()
	fail = true
	l.Ensure(context.Background(), Key{Tenant: "c"}, "b", list, nil)
	if _, err := l.Lookup(Key{Tenant: "c"}, "b"); !errors.Is(err, ErrUnknown) {
		t.Errorf("behind a failed listing: %v, want ErrUnknown", err)
	}
}
