package mcpproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// resumeGET resumes a session's stream after lastID.
func resumeGET(ctx context.Context, url, sid, lastID string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", lastID)
	return http.DefaultClient.Do(req)
}

// TestFacesPrunedResponseBecomesError: a client leaves its call's stream
// and comes back after the replay window has passed (a laptop that slept
// through a long call): its resumption gets an error response for the
// call's id, never a stream that ends without one.
func TestFacesPrunedResponseBecomesError(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{StreamWindow: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	sid := initSession(t, ctx, url)
	pctx, leave := context.WithCancel(ctx)
	resp, err := sessionPost(pctx, url, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"p"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	var prime event
	readEvents(resp.Body, func(ev event) bool { prime = ev; return false })
	leave() // the laptop sleeps
	if prime.id == "" {
		t.Fatalf("no priming event id: %+v", prime)
	}
	// Resume until the call's answer is no longer its result: then the
	// window has pruned it, and what comes must be an error for id 5.
	for {
		if ctx.Err() != nil {
			t.Fatal("the result was never pruned")
		}
		get, err := resumeGET(ctx, url, sid, prime.id)
		if err != nil {
			t.Fatal(err)
		}
		var answer string
		readEvents(get.Body, func(ev event) bool {
			if strings.Contains(ev.data, `"id":5`) {
				answer = ev.data
				return false
			}
			return true
		})
		get.Body.Close()
		switch {
		case strings.Contains(answer, `"result"`):
			time.Sleep(200 * time.Millisecond) // not pruned yet: try again
			continue
		case answer == "":
			t.Fatal("after the window, the resumed stream ended without an answer for id 5: the client would wait for ever")
		case !strings.Contains(answer, `"error"`) || !strings.Contains(answer, "replay window"):
			t.Fatalf("after the window, the answer for id 5 is not the error for a pruned response: %s", answer)
		}
		return
	}
}

// TestFacesResponseOverBufferIsDelivered: one response larger than a
// session's whole buffer (70 MiB against 64 MiB, under --max-message)
// reaches a client that reads it at full speed, whole.
func TestFacesResponseOverBufferIsDelivered(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	sid := initSession(t, ctx, url)
	resp, err := sessionPost(ctx, url, sid, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"huge","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer string
	readEvents(resp.Body, func(ev event) bool {
		if strings.Contains(ev.data, `"id":6`) {
			answer = ev.data
			return false
		}
		return true
	})
	if n := strings.Count(answer, "h"); n < 70<<20 || strings.Contains(answer, `"error"`) {
		t.Fatalf("the 70 MiB result came as %d bytes holding %d of its 70 MiB: %.300s", len(answer), n, answer)
	}
}

// comment reads a stream's lines until an SSE comment, which it returns
// ("" if the stream ended first).
func comment(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if c, ok := strings.CutPrefix(sc.Text(), ":"); ok {
			return strings.TrimSpace(c)
		}
	}
	return ""
}

// TestFacesKeepAlive: long, silent calls' event streams get keep-alive
// comments (so a load balancer's idle timeout does not cut them), in both
// eras; the stateless call's response headers come without waiting for
// its result.
func TestFacesKeepAlive(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{StreamKeepAlive: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	sid := initSession(t, ctx, url)
	resp, err := sessionPost(ctx, url, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"silent","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if c := comment(resp.Body); c != "keep-alive" {
		t.Fatalf("a silent session call's stream: comment %q, want keep-alive", c)
	}
	resp, err = statelessPost(ctx, url, 8, "tools/call", map[string]any{"name": "silent", "arguments": map[string]any{}})
	if err != nil {
		t.Fatalf("a silent stateless call got no response headers: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("a silent stateless call answered %s %q", resp.Status, ct)
	}
	if c := comment(resp.Body); c != "keep-alive" {
		t.Fatalf("a silent stateless call's stream: comment %q, want keep-alive", c)
	}
}

// TestStdioFaceCapsMessages: a response over the stdio face's cap (the
// TypeScript SDK's stdio client dies past 10 MiB) reaches the client as a
// JSON-RPC error naming its size, and the connection goes on: the next
// call is answered. Before the cap, the 70 MiB line went out whole.
func TestStdioFaceCapsMessages(t *testing.T) {
	cmd, args := childCmd("plain")
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: cmd, Args: args}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { inW.Close() })
	go p.ServeStdio(ctx, inR, outW)
	rd := bufio.NewReaderSize(outR, 1<<20)
	send := func(s string) { fmt.Fprintln(inW, s) }
	next := func() string {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	next()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"huge","arguments":{}}}`)
	line := next()
	if len(line) > 10<<20 || !strings.Contains(line, `"error"`) || !strings.Contains(line, "--stdio-max-message") {
		t.Fatalf("a 70 MiB response on stdio: got a %d-byte line: %.300s", len(line), line)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}`)
	if line := next(); !strings.Contains(line, `"id":3`) || strings.Contains(line, `"error"`) {
		t.Fatalf("the next call after the capped one: %.300s", line)
	}
}
