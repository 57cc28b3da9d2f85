package gateway

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Requests run on workers that outlive them: many requests at once are
// all answered, at most maxIdleWorkers workers wait for more afterwards,
// and every goroutine of the Conn ends once it is closed.
func TestWorkersEndWithConn(t *testing.T) {
	base := runtime.NumGoroutine()
	s := &fakeServer{tools: []string{"x"}, pageSize: 10}
	r := registry(t, Options{}, map[string]*fakeServer{"a": s, "b": s}, "a", "b")
	d, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := d.(*Conn)
	c.Send(context.Background(), jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if m := <-c.Recv(); string(m.ID) != "0" {
		t.Fatalf("first message %s", m.Raw)
	}
	const n = 40
	for i := range n {
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s_x"}}`, i+1, []string{"a", "b"}[i%2])
		if err := c.Send(context.Background(), jsonrpc.MustDecode(req)); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.After(10 * time.Second)
	for answered := 0; answered < n; {
		select {
		case m := <-c.Recv():
			if m.IsResponse() {
				if m.Result == nil {
					t.Fatalf("answer %s", m.Raw)
				}
				answered++
			}
		case <-timeout:
			t.Fatalf("%d of %d requests answered", answered, n)
		}
	}
	time.Sleep(50 * time.Millisecond) // the last workers go idle
	if idle := c.idle.Load(); idle < 1 || idle > maxIdleWorkers {
		t.Errorf("%d idle workers, want 1 to %d", idle, maxIdleWorkers)
	}
	c.Close()
	for range c.Recv() {
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > base; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after Close, %d before Dial", runtime.NumGoroutine(), base)
		}
	}
}
