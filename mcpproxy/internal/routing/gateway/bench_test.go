package gateway

import (
	"context"
	"fmt"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/policy/decision"
)

// BenchmarkConnCall is the gateway's own path of one small tools/call, as
// a face drives a Conn: resolved by its prefix, decided (by a decision
// that allows, as mcpproxy's without a call rule), forwarded to one of four
// in-memory upstreams (the fake server) and its answer handed back. The
// upstreams cost next to nothing, so ns/op is mostly the gateway's.
func BenchmarkConnCall(b *testing.B) {
	var specs []Spec
	for i := range 4 {
		s := &fakeServer{tools: []string{"small"}, pageSize: 10}
		specs = append(specs, Spec{Name: fmt.Sprintf("b%d", i+1), Dial: s.dial})
	}
	allow := func(context.Context, decision.CallInput) decision.Call { return decision.Call{Allow: true} }
	r, err := NewRegistry(Options{Authorize: allow}, specs)
	if err != nil {
		b.Fatal(err)
	}
	c, err := r.Dial(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(n int, method, params string) {
		req := jsonrpc.MustDecode(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, n, method, params))
		if err := c.Send(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		for m := range c.Recv() {
			if m.IsResponse() {
				if m.Result == nil {
					b.Fatalf("%s: %s", method, m.Raw)
				}
				return
			}
		}
		b.Fatal("the connection closed")
	}
	roundTrip(0, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		roundTrip(n, "tools/call", fmt.Sprintf(`{"name":"b%d_small","arguments":{"echo":"x"}}`, n%4+1))
	}
}
