package httpclient

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// everything runs the Go SDK's reference server (make tools installs it)
// on loopback and returns its URL. With CI set a missing server fails the
// test instead of skipping it.
func everything(t *testing.T, stateless bool) string {
	t.Helper()
	bin := os.Getenv("SPILLWAY_EVERYTHING_SERVER")
	if bin == "" {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), ".tools", "bin", "everything-server")
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the reference server is not installed (make tools): %v", err)
		}
		t.Skipf("the reference server is not installed (make tools): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "-http="+addr, fmt.Sprintf("-stateless=%v", stateless))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reference server never listened on %s", addr)
		}
	}
	return "http://" + addr + "/mcp"
}

// The session era against the reference server: handshake, a plain call,
// a call with progress on its stream, and a call whose stream the server
// closes mid-call without an event id to resume from.
func TestReferenceServerSessionEra(t *testing.T) {
	c := dial(t, Options{URL: everything(t, false)})
	handshake(t, c)
	if r := call(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); !strings.Contains(string(r.Result), "test_simple_text") {
		t.Fatalf("tools/list: %.300s", r.Raw)
	}
	if r := call(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`); r.Error != nil {
		t.Errorf("test_simple_text: %s", r.Raw)
	}
	send(t, c, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p3"}}}`)
	r, before := await(t, c, "3")
	progress := 0
	for _, m := range before {
		if m.Method == "notifications/progress" {
			progress++
		}
	}
	if r.Error != nil || progress == 0 {
		t.Errorf("test_tool_with_progress: %d progress notifications, answer %.200s", progress, r.Raw)
	}
	// The reference server keeps no event store: test_reconnection closes
	// the stream with a retry hint but no event id, and its result is lost
	// for every client (the reference client answers "request terminated
	// without response"). The caller must get an error, not wait forever.
	r = call(t, c, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_reconnection","arguments":{}}}`)
	if r.Error == nil || !strings.Contains(string(r.Error), "without answering") {
		t.Errorf("test_reconnection: %.300s", r.Raw)
	}
	if r := call(t, c, `{"jsonrpc":"2.0","id":5,"method":"ping"}`); r.Error != nil {
		t.Errorf("ping after it: %s", r.Raw)
	}
}

// The stateless era against the reference server: every request carries
// its own _meta, no handshake.
func TestReferenceServerStatelessEra(t *testing.T) {
	c := dial(t, Options{URL: everything(t, true)})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	r := call(t, c, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`)
	if r.Error != nil || !strings.Contains(string(r.Result), "2026-07-28") {
		t.Fatalf("server/discover: %.300s", r.Raw)
	}
	r = call(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_simple_text","arguments":{},`+meta+`}}`)
	if r.Error != nil || !strings.Contains(string(r.Result), "text") {
		t.Errorf("test_simple_text: %.300s", r.Raw)
	}
	r = call(t, c, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_x_mcp_header","arguments":{"region":"eu"},`+meta+`}}`)
	if r.Error == nil {
		t.Logf("test_x_mcp_header without its Mcp-Param-Region header: %.200s", r.Raw)
	}
}
