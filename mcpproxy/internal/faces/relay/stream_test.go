package relay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
)

// floodUpstream is a session-era upstream whose tools/call streams 64 KiB
// progress notifications until its request ends (reported on ended), and
// that reports each notifications/cancelled it gets on cancelled.
func floodUpstream(t *testing.T) (url string, ended chan struct{}, cancelled chan string) {
	ended, cancelled = make(chan struct{}, 1), make(chan string, 10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), `"initialize"`):
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"u","version":"1"}}}`)
		case strings.Contains(string(body), `"tools/call"`):
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			note := `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"message":"` +
				strings.Repeat("x", 64<<10) + `"}}` + "\n\n"
			for {
				if _, err := io.WriteString(w, note); err != nil {
					break
				}
				if http.NewResponseController(w).Flush() != nil {
					break
				}
			}
			ended <- struct{}{}
		case strings.Contains(string(body), `"notifications/cancelled"`):
			cancelled <- string(body)
			w.WriteHeader(http.StatusAccepted)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(up.Close)
	return up.URL, ended, cancelled
}

// A client that stops reading its stream is cut by the write deadline,
// and its call is cancelled upstream: the upstream's request ends and it
// gets notifications/cancelled for the call. Before: the relay blocked
// in a write for ever, the upstream streamed on, nothing was cancelled.
func TestStalledClientIsCut(t *testing.T) {
	url, ended, cancelled := floodUpstream(t)
	rl := New(Options{URL: url, Methods: ownmethods.New(ownmethods.Options{}), WriteTimeout: 300 * time.Millisecond})
	front := front(t, rl)
	sid := (&client{t: t, url: front, tenant: "a"}).open()
	// A real client that sends its call and never reads a byte.
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(front, "/mcp"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"p"}}}`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"X-Tenant: a\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s", sid, len(body), body)
	guard := time.After(2 * time.Minute) // a deadlock guard, not a measure
	select {
	case <-ended:
	case <-guard:
		t.Fatal("the upstream still streams to a client that reads nothing: it was never cut")
	}
	select {
	case n := <-cancelled:
		if !strings.Contains(n, `"requestId":5`) {
			t.Errorf("cancelled the wrong request: %s", n)
		}
	case <-guard:
		t.Fatal("the call was not cancelled upstream")
	}
}

// An idle relayed event stream gets SSE comments, so load balancers'
// idle timeouts keep it. Before: nothing passed until the upstream spoke.
func TestIdleStreamKeepAlive(t *testing.T) {
	rl := New(Options{URL: sessionUpstream(t), Methods: ownmethods.New(ownmethods.Options{}), KeepAlive: 50 * time.Millisecond})
	c := &client{t: t, url: front(t, rl), tenant: "a"}
	sid := c.open()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadlock guard
	defer cancel()
	get := c.do(ctx, http.MethodGet, sid, "") // the upstream never sends a byte on it
	defer get.Body.Close()
	if !strings.HasPrefix(get.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET: %s %s", get.Status, get.Header.Get("Content-Type"))
	}
	line, err := bufio.NewReader(get.Body).ReadString('\n')
	if err != nil || line != ": keep-alive\n" {
		t.Fatalf("first line %q, %v; want a keep-alive comment", line, err)
	}
}

// A stateless call whose upstream (in JSON-response mode) sends nothing
// until its result gets its client's stream opened first, and the result
// as an event on it. Before: no response headers until the result, so a
// client's or load balancer's header timeout cut a long, silent call.
func TestSilentStatelessCallOpensAtOnce(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		<-release // the tool runs, silently
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":3,"result":{"content":[],"resultType":"complete"}}`)
	}))
	t.Cleanup(up.Close)
	defer close(release)
	rl := New(Options{URL: up.URL, Methods: ownmethods.New(ownmethods.Options{}), OpenAfter: 10 * time.Millisecond})
	c := &client{t: t, url: front(t, rl), tenant: "a"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadlock guard
	defer cancel()
	resp, err := slowCall(ctx, c.url) // returns with the headers: the upstream has not answered
	if err != nil {
		t.Fatalf("no response headers before the result: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("opened with %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	release <- struct{}{}
	if line := firstData(t, resp.Body); !strings.Contains(line, `"id":3,"result"`) {
		t.Fatalf("event %q, want the result", line)
	}
}

// slowCall posts the stateless tools/call "slow", id 3.
func slowCall(ctx context.Context, url string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	return http.DefaultClient.Do(req)
}

// firstData returns the first data line of an event stream; the test fails
// if the stream ends first.
func firstData(t *testing.T, r io.Reader) string {
	t.Helper()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended without an event: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			return line
		}
	}
}

// TestUntouchedEventsPassAsTheyCame: an event the relay does not rewrite
// reaches the client byte for byte (its fields in their order, and
// fields the relay does not know), not parsed and encoded again; one
// with CR line ends is written again with LF (see TestRelayIsExact in
// package mcpproxy). Before, every event was re-encoded: the id came
// before the event name and the unknown field was dropped.
func TestUntouchedEventsPassAsTheyCame(t *testing.T) {
	const asIs = "event: message\nid: e1\nx-hint: kept\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
		": note\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":7,\"result\":{}}\nid: e2\n\n"
	const events = asIs + "event: message\r\nid: e3\r\ndata: {}\r\n\r\n"
	const want = asIs + "id: e3\nevent: message\ndata: {}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Mcp-Session-Id", "s1")
		io.WriteString(w, events)
	}))
	defer up.Close()
	rl := New(Options{URL: up.URL, Methods: ownmethods.New(ownmethods.Options{})})
	defer rl.Close()
	c := &client{t: t, url: front(t, rl), tenant: "a"}
	resp := c.do(context.Background(), http.MethodPost, "", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("the client got\n%q\nwant\n%q", got, want)
	}
}

// A stateless call whose client's stream was opened before its upstream
// answered (see TestSilentStatelessCallOpensAtOnce) and whose JSON answer
// then stops midway gets the stall error as an event once StallTimeout has
// passed. Before, that late body was read without the guard: the call
// waited as long as its client did.
func TestLateJSONAnswerStalls(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		time.Sleep(100 * time.Millisecond) // past OpenAfter: the client's stream is open
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "200")
		io.WriteString(w, `{"jsonrpc":"2.0","id":3,"result":{"content":[`)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // and nothing more
	}))
	t.Cleanup(up.Close)
	rl := New(Options{URL: up.URL, Methods: ownmethods.New(ownmethods.Options{}), OpenAfter: 10 * time.Millisecond, StallTimeout: 300 * time.Millisecond})
	c := &client{t: t, url: front(t, rl), tenant: "a"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the client's patience
	defer cancel()
	resp, err := slowCall(ctx, c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line := firstData(t, resp.Body); !strings.Contains(line, `"id":3`) || !strings.Contains(line, "stalled mid-message") {
		t.Fatalf("event %q, want the stall error", line)
	}
}
