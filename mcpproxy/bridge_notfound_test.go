package mcpproxy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A session-era client (2025-11-25) reading a resource a stateless-only
// server (the Go SDK's, 2026-07-28) does not have gets its own era's
// resource-not-found code, -32002, not the stateless era's -32602
// (SEP-2164); a resource that exists still reads.
func TestBridgeResourceNotFoundCode(t *testing.T) {
	for _, up := range bridgeUpstreams(t) {
		t.Run(up.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadlock guard
			defer cancel()
			cs := sessionClientLogs(t, ctx, serve(t, bridgedProxy(t, up.up)), "alice", nil)
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "era://missing"})
			var e *jsonrpc.Error
			if !errors.As(err, &e) || e.Code != -32002 {
				code := int64(0)
				if e != nil {
					code = e.Code
				}
				t.Errorf("reading a missing resource: %v (code %d); want code -32002", err, code)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "era://hello"}); err != nil {
				t.Errorf("reading the server's resource: %v", err)
			}
		})
	}
}
