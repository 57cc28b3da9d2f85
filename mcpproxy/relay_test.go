package mcpproxy_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// The HTTP face relays an upstream's event stream exactly: keepalive
// comments, retry hints, id-only events stay what they are, and a stream
// whose lines end with a lone CR is relayed event by event, while it is
// still open (a reader that waits for the byte after CR stalls there).
func TestRelayIsExact(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, ": ping\r\rretry: 3000\r\rid: 7\r\rid: 8\rdata: {\"jsonrpc\":\"2.0\",\"id\":1,\r"+
			"data: \"result\":{}}\r\r")
		w.(http.Flusher).Flush()
		select { // the stream stays open
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL, Transport: "streamable"}})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := []string{": ping", "", "retry: 3000", "", "id: 7", "", "id: 8",
		`data: {"jsonrpc":"2.0","id":1,`, `data: "result":{}}`, ""}
	br := bufio.NewReader(resp.Body)
	for i, w := range want {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("line %d: %v (the relay stalled or ended)", i, err)
		}
		if got := strings.TrimSuffix(line, "\n"); got != w {
			t.Fatalf("line %d = %q, want %q", i, got, w)
		}
	}
}
