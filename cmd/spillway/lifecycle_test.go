package main

import (
	"bufio"
	"context"
	"github.com/spillway-dev/spillway/policy/policytest"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// `serve --stdio` starts even when --listen is taken (another agent's
// Spillway holds the port): it says so on stderr and serves links on a
// free loopback port, and the stdio face answers.
func TestServeStdioWithListenTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr policytest.Buffer
	done := make(chan int, 1)
	echo := `sh -c 'read l; echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"; read l'`
	go func() {
		done <- run(t.Context(), []string{"serve", "--stdio", "--listen", ln.Addr().String(), "--data", t.TempDir(), "--upstream-cmd", echo},
			inR, outW, &stderr, func(string) string { return "" })
		outW.Close()
	}()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("stdio answer %q, %v; stderr:\n%s", line, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "taken") {
		t.Errorf("nothing on stderr says the port was taken:\n%s", stderr.String())
	}
	inW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
}

// Shutting down with an MCP GET stream open ends it at once and exits
// cleanly, instead of waiting the 15 s shutdown timeout and failing.
func TestShutdownWithOpenStream(t *testing.T) {
	fs := newFlagSet("serve")
	var c serveConfig
	c.register(fs)
	answer := `sh -c 'while read l; do case "$l" in *initialize*) echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}";; esac; done'`
	data := t.TempDir()
	if err := parseLayered(fs, []string{"--listen", "127.0.0.1:0", "--data", data, "--log-level", "warn", "--upstream-cmd", answer},
		func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := newServer(ctx, &c, slog.New(slog.DiscardHandler), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	base := "http://" + s.Addr()
	tok := mcpToken(t, data)
	resp := mcpPost(t, base+"/mcp", tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"))
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	get, err := http.DefaultClient.Do(req)
	if err != nil || get.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, get)
	}
	defer get.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown with an open stream: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown waited for the open stream")
	}
}
