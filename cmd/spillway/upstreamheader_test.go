package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// --upstream-header takes each header whole: a value holding ";" (a
// cookie, some API keys) reaches the upstream as configured. Before, the
// flag was split on ";" and "Cookie: a=1; b=2" arrived as "a=1", with a
// header named " b=2".
func TestUpstreamHeaderWhole(t *testing.T) {
	var mu sync.Mutex
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if got == nil {
			got = r.Header.Clone()
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`))
	}))
	defer up.Close()
	data := t.TempDir()
	base := startServe(t, data, "--upstream-url", up.URL+"/mcp",
		"--upstream-header", "Cookie: a=1; b=2", "--upstream-header", "X-Api-Key: k;ey,1")
	resp := mcpPost(t, base+"/mcp", mcpToken(t, data), "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if got.Get("Cookie") != "a=1; b=2" || got.Get("X-Api-Key") != "k;ey,1" {
		t.Fatalf("upstream got Cookie %q, X-Api-Key %q", got.Get("Cookie"), got.Get("X-Api-Key"))
	}
	for _, bad := range []string{"no colon", "Bad Name: x", ": empty"} {
		fs := newFlagSet("serve")
		var c serveConfig
		c.register(fs)
		if err := parseLayered(fs, []string{"--upstream-header", bad}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "Name: value") {
			t.Errorf("--upstream-header %q: err = %v", bad, err)
		}
	}
}
