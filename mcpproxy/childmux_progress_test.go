package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// toolToken is what the everything-server's test_tool_with_progress
// answers: the progress token it was given.
func toolToken(t *testing.T, result []byte) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(result, &r); err != nil || len(r.Content) != 1 {
		t.Fatalf("test_tool_with_progress answered %s", result)
	}
	return r.Content[0].Text
}

// Through the stdio face in front of a stdio child (the everything-server),
// the tool sees the client's own progress token, as it does directly
// (Spillway used to hand it one of its own: "p11" where directly it is
// "10"), and the client's progress notifications carry it.
func TestChildmuxStdioKeepsProgressToken(t *testing.T) {
	bin := tool(t, "SPILLWAY_EVERYTHING_SERVER", "bin/everything-server")
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: bin}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, inR, outW) }()
	go func() { <-ctx.Done(); outR.Close() }()
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":10}}}`)
	var progress []string
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	var result json.RawMessage
	for result == nil && sc.Scan() {
		var m struct {
			ID     int             `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		json.Unmarshal(sc.Bytes(), &m)
		switch {
		case m.Method == "notifications/progress":
			var pp struct {
				Token json.RawMessage `json:"progressToken"`
			}
			json.Unmarshal(m.Params, &pp)
			progress = append(progress, string(pp.Token))
		case m.ID == 2:
			result = m.Result
		}
	}
	if result == nil {
		t.Fatalf("no answer to tools/call: %v", sc.Err())
	}
	if got := toolToken(t, result); got != "10" {
		t.Errorf("the tool saw progress token %q; the client sent 10", got)
	}
	if len(progress) == 0 {
		t.Error("no progress notification reached the client")
	}
	for _, tok := range progress {
		if tok != "10" {
			t.Errorf("progress reached the client with token %s", tok)
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
}

// A session-era session over HTTP has a child of its own: its tool sees
// the client's own progress token too.
func TestChildmuxSessionKeepsProgressToken(t *testing.T) {
	bin := tool(t, "SPILLWAY_EVERYTHING_SERVER", "bin/everything-server")
	url := startProxy(t, &mcpproxy.CommandUpstream{Command: bin})
	a := &agent{url: url}
	a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "t", "version": "1"}})
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", a.session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	res := a.call(t, "tools/call", map[string]any{"name": "test_tool_with_progress", "arguments": map[string]any{},
		"_meta": map[string]any{"progressToken": 10}})
	if got := toolToken(t, res); got != "10" {
		t.Errorf("the tool saw progress token %q; the client sent 10", got)
	}
}
