package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// Issue 20, item 7: the stdio face before an HTTP upstream in
// JSON-response mode, whose tools/call holds its POST (and so its
// response headers) until the call is cancelled. A ping sent after the
// call is answered while the call is held, and the client's cancellation
// reaches the upstream while the call is still held. Before, each message
// waited for the previous POST's headers: the ping never came back and
// the cancellation never left.
func TestStdioFaceSlowJSONCallHoldsNothingUp(t *testing.T) {
	var mu sync.Mutex
	held := map[string]chan struct{}{} // upstream call id → closed by its cancellation
	cancelledWhileHeld := make(chan struct{})
	// The call and a cancellation sent right after it travel on two
	// connections: the upstream may read either first (as with any
	// concurrent client), so the test cancels once the call is held.
	isHeld := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		reply := func(result string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
		}
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`)
		case "tools/call":
			ch := make(chan struct{})
			mu.Lock()
			held[string(m.ID)] = ch
			mu.Unlock()
			isHeld <- struct{}{}
			select {
			case <-ch:
				reply(`{"content":[],"isError":true}`)
			case <-r.Context().Done():
			}
		case "ping":
			reply(`{}`)
		case "notifications/cancelled":
			mu.Lock()
			ch := held[string(m.Params.RequestID)]
			delete(held, string(m.Params.RequestID))
			mu.Unlock()
			if ch != nil {
				close(ch)
				close(cancelledWhileHeld)
			}
			w.WriteHeader(http.StatusAccepted)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer up.Close()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go p.ServeStdio(ctx, inR, outW)
	defer inW.Close()
	go func() { <-ctx.Done(); inW.Close(); outR.Close() }()
	lines := bufio.NewReader(outR)
	write := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// next returns the id of the next response the client gets.
	next := func() string {
		t.Helper()
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("no answer from the face (%v; deadlock guard: %v)", err, ctx.Err())
		}
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(line), &m)
		return string(m.ID)
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if id := next(); id != "1" {
		t.Fatalf("first answer to %s, want initialize's", id)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	write(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if id := next(); id != "3" {
		t.Fatalf("answer to %s, want the ping's while the call is held", id)
	}
	select {
	case <-isHeld:
	case <-ctx.Done():
		t.Fatal("the call never reached the upstream")
	}
	write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	select {
	case <-cancelledWhileHeld:
	case <-ctx.Done():
		t.Fatal("the upstream never got the cancellation of its held call")
	}
}
