package mcpproxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// Tenant A crashes the child serving its stateless requests: tenant B's
// call in flight at that moment completes, and B's next call is answered
// at once (no "upstream restarting" for B). A's own call gets an error.
func TestChildmuxTenantCrashLeavesOthers(t *testing.T) {
	tenants, err := identity.ParseTenants("tok-aaaaaaaaaaaaaaaa=A,tok-bbbbbbbbbbbbbbbb=B")
	if err != nil {
		t.Fatal(err)
	}
	_, url := childProxy(t, "plain", mcpproxy.Options{Tenants: tenants})
	const tokA, tokB = "tok-aaaaaaaaaaaaaaaa", "tok-bbbbbbbbbbbbbbbb"
	// B's call warms its upstream, then a slow one stays in flight.
	if got := show(mustCall(t, url, tokB, 1, "echo")); !strings.Contains(got, "result") {
		t.Fatalf("B's first call: %s", got)
	}
	// B's slow call is in flight (its first progress arrived) before A
	// crashes anything.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"b",` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tokB)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "slow")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	inFlight, slowB := make(chan struct{}), make(chan string, 1)
	var once sync.Once
	go func() {
		var result string
		sseMessages(ctx, resp, func(m map[string]json.RawMessage) {
			if string(m["method"]) == `"notifications/progress"` {
				once.Do(func() { close(inFlight) })
			}
			if m["id"] != nil {
				result = string(m["result"]) + string(m["error"])
			}
		})
		slowB <- result
	}()
	select {
	case <-inFlight:
	case got := <-slowB:
		t.Fatalf("B's slow call ended at once: %s", got)
	}
	// A's calls: one to start its upstream, then the crash.
	mustCall(t, url, tokA, 1, "echo")
	if got := show(mustCall(t, url, tokA, 2, "crash")); !strings.Contains(got, "error") {
		t.Fatalf("A's crashing call: %s", got)
	}
	if got := show(mustCall(t, url, tokB, 3, "echo")); !strings.Contains(got, `"result"`) {
		t.Errorf("B's call after A crashed its upstream: %s", got)
	}
	select {
	case got := <-slowB:
		if !strings.Contains(got, "slow done") {
			t.Errorf("B's call in flight when A crashed its upstream: %s", got)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("B's slow call never ended")
	}
}

func mustCall(t *testing.T, url, token string, id int, tool string) []map[string]json.RawMessage {
	t.Helper()
	msgs, err := statelessCall(t, url, token, id, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"x": 1}})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}
