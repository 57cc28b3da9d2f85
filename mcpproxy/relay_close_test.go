package mcpproxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// Close ends every relayed stream, so a server's graceful shutdown need
// not wait for them, and refuses what comes after. Before: a session-era
// client's GET stream held through the relay outlived Close (SIGTERM
// waited 15 s and exited 1).
func TestRelayCloseEndsStreams(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), `"initialize"`):
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"u","version":"1"}}}`)
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done() // a server that holds the stream as long as the client does
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer up.Close()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL, Transport: "streamable"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	url := serve(t, p)
	a := &agent{url: url}
	a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "holder", "version": "1"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadlock guard
	defer cancel()
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Session-Id", a.session)
	get.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s", resp.Status)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	p.Close()
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the GET stream outlived Close")
	}
	after := relayPost(t, url, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string]string{"Mcp-Session-Id": a.session})
	if after.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a request after Close: %s", after.Status)
	}
}
