package pool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// conn is an upstream connection that stays up until closed.
type conn struct {
	recv chan *jsonrpc.Message
	once sync.Once
}

func (c *conn) Send(context.Context, *jsonrpc.Message) error { return nil }
func (c *conn) Recv() <-chan *jsonrpc.Message                { return c.recv }
func (c *conn) Err() error                                   { return nil }
func (c *conn) Close() error                                 { c.once.Do(func() { close(c.recv) }); return nil }

func newTestTenants(max int, idle time.Duration) *Tenants {
	return NewTenants(func(string) *Supervisor {
		return &Supervisor{Dial: func(context.Context) (mux.Conn, error) { return &conn{recv: make(chan *jsonrpc.Message)}, nil }}
	}, max, idle)
}

func waitDone(t *testing.T, m *mux.Mux, what string) {
	t.Helper()
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still runs", what)
	}
}

// Each tenant has a connection of its own; at the cap a new tenant takes
// the least recently used idle one's place, and is refused while all are
// busy (no tenant's calls broken for another's).
func TestTenantsBound(t *testing.T) {
	ts := newTestTenants(2, time.Hour)
	defer ts.Close()
	ctx := context.Background()
	a, relA, err := ts.Get(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	b, relB, err := ts.Get(ctx, "B")
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two tenants share a connection")
	}
	a2, rel, _ := ts.Get(ctx, "A")
	rel()
	if a2 != a {
		t.Fatal("a tenant's second request got another connection")
	}
	if _, _, err := ts.Get(ctx, "C"); !errors.Is(err, ErrTooManyTenants) {
		t.Fatalf("a third tenant while two are busy at a cap of 2: %v", err)
	}
	relB() // B's request ends first: B is the least recently used
	relA()
	c, relC, err := ts.Get(ctx, "C")
	if err != nil {
		t.Fatal(err)
	}
	defer relC()
	waitDone(t, b, "the evicted (least recently used) tenant's connection")
	if !a.Alive() || c == a || ts.Len() != 2 {
		t.Fatalf("A alive %v, C's is A's %v, %d kept", a.Alive(), c == a, ts.Len())
	}
	ts.Close()
	waitDone(t, a, "A's connection after Close")
	if _, _, err := ts.Get(ctx, "A"); err == nil {
		t.Fatal("Get after Close succeeded")
	}
}

// A connection no request used for the idle time is closed; a busy one
// is kept however long its request runs.
func TestTenantsIdle(t *testing.T) {
	ts := newTestTenants(4, 20*time.Millisecond)
	defer ts.Close()
	a, relA, err := ts.Get(context.Background(), "A")
	if err != nil {
		t.Fatal(err)
	}
	b, relB, err := ts.Get(context.Background(), "B")
	if err != nil {
		t.Fatal(err)
	}
	defer relB()
	relA()
	waitDone(t, a, "an idle tenant's connection")
	time.Sleep(100 * time.Millisecond) // several idle periods
	if !b.Alive() {
		t.Fatal("a busy tenant's connection was closed as idle")
	}
}

// One tenant keeps at most its own bound of connections, whatever keys it
// makes up (bridged sessions are keyed by the capabilities a request
// declares): past it its own least recently used idle one makes room, and
// while all are busy it is refused, not another tenant.
func TestTenantsPerTenant(t *testing.T) {
	ts := newTestTenants(8, time.Hour)
	ts.LimitPerTenant(KeyTenant, 2)
	defer ts.Close()
	ctx := context.Background()
	a1, rel1, err := ts.Get(ctx, CapsKey("a", []byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	_, rel2, err := ts.GetFree(ctx, CapsKey("a", []byte(`{"sampling":{}}`)), 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ts.Get(ctx, CapsKey("a", []byte(`{"experimental":{"x":1}}`))); !errors.Is(err, ErrAllBusy) {
		t.Fatalf("a third key of a tenant with two busy at its bound of 2: %v", err)
	}
	_, relB, err := ts.Get(ctx, CapsKey("b", []byte(`{}`)))
	if err != nil {
		t.Fatalf("another tenant is refused: %v", err)
	}
	relB()
	rel1()
	_, rel3, err := ts.Get(ctx, CapsKey("a", []byte(`{"experimental":{"x":1}}`)))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, a1, "the tenant's own least recently used idle connection")
	rel2()
	rel3()
	if ts.Len() != 3 {
		t.Errorf("%d connections kept, want 3 (two of a's, b's)", ts.Len())
	}
}

// A request finding every connection it may use busy waits for one to be
// released (WaitForRoom), and gets it; one whose ctx ends first, or that
// waits longer than allowed, gets ErrAllBusy.
func TestTenantsWaitForRoom(t *testing.T) {
	ts := newTestTenants(8, time.Hour)
	ts.WaitForRoom(time.Hour)
	defer ts.Close()
	ctx := context.Background()
	key := CapsKey("a", []byte(`{"sampling":{}}`))
	m1, rel1, err := ts.GetFree(ctx, key, 1)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		m   *mux.Mux
		rel func()
		err error
	}
	waiter := make(chan got, 1)
	go func() {
		m, rel, err := ts.GetFree(ctx, key, 1)
		waiter <- got{m, rel, err}
	}()
	gone, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() {
		_, _, err := ts.GetFree(gone, key, 1)
		left <- err
	}()
	cancel()
	if err := <-left; !errors.Is(err, ErrAllBusy) || !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose request ended: %v", err)
	}
	rel1()
	w := <-waiter
	if w.err != nil || w.m != m1 {
		t.Fatalf("the waiter got %v, %v; want the released connection", w.m, w.err)
	}
	ts.WaitForRoom(time.Millisecond) // set before any Get in real use; here the first holds on
	if _, _, err := ts.GetFree(ctx, key, 1); !errors.Is(err, ErrAllBusy) {
		t.Errorf("a waiter past its wait: %v", err)
	}
	w.rel()
}
