package mcpproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

func buildBigtool(t testing.TB) string {
	bin := filepath.Join(t.TempDir(), "bigtool")
	cmd := exec.Command("go", "build", "-o", bin, "./examples/bigtool/cmd/bigtool")
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build bigtool: %v\n%s", err, out)
	}
	return bin
}

// sseRequest opens a request and returns an event reader on its response.
func sseRequest(t *testing.T, method, url, session string, hdr map[string]string, body string) (*http.Response, *sse.Reader) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%s: %s, %s", method, resp.Status, resp.Header.Get("Content-Type"))
	}
	return resp, sse.NewReader(resp.Body, 0)
}

// exactlyOnce checks that each of want distinct messages came once.
func exactlyOnce(t *testing.T, seen map[string]int, want int) {
	t.Helper()
	for msg, n := range seen {
		if n != 1 {
			t.Errorf("received %d times: %.200s", n, msg)
		}
	}
	if len(seen) != want {
		t.Errorf("%d distinct messages, want %d", len(seen), want)
	}
}

// A client loses its stream in the middle of a slow tool call through a
// stdio upstream, reconnects with Last-Event-ID, and gets every progress
// notification and the result exactly once.
func TestResumeAfterCut(t *testing.T) {
	for _, up := range []struct {
		name string
		up   mcpproxy.Upstream
		call string
		want int // distinct messages: every progress notification and the result
	}{
		{"bigtool slow_report", &mcpproxy.CommandUpstream{Command: buildBigtool(t)},
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow_report","arguments":{"seconds":1.5,"interval_ms":100,"size":500},"_meta":{"progressToken":"p"}}}`, 16},
		{"everything-server test_reconnection", &mcpproxy.CommandUpstream{Command: tool(t, "SPILLWAY_EVERYTHING_SERVER", "bin/everything-server")},
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"test_reconnection","arguments":{},"_meta":{"progressToken":"p"}}}`, 1},
	} {
		t.Run(up.name, func(t *testing.T) {
			p, err := mcpproxy.New(mcpproxy.Options{Upstream: up.up})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			url := serve(t, p)
			a := &agent{url: url}
			a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "r", "version": "1"}})

			seen := map[string]int{} // message → times received
			var lastID string
			var result bool
			record := func(ev sse.Event) {
				if ev.ID != "" {
					lastID = ev.ID
				}
				if len(ev.Data) == 0 {
					return
				}
				seen[string(ev.Data)]++
				var m struct {
					ID     json.RawMessage `json:"id"`
					Result json.RawMessage `json:"result"`
				}
				json.Unmarshal(ev.Data, &m)
				if string(m.ID) == "5" && m.Result != nil {
					result = true
				}
			}
			resp, r := sseRequest(t, http.MethodPost, url, a.session, nil, up.call)
			for n := 0; n < 4 && !result; n++ { // the priming event and a few more, then cut
				ev, err := r.Next()
				if err != nil {
					break
				}
				record(ev)
			}
			resp.Body.Close()
			if lastID == "" {
				t.Fatal("no event ids on the stream: nothing to resume from")
			}
			time.Sleep(300 * time.Millisecond) // events go on while the client is away
			for attempt := 0; !result && attempt < 20; attempt++ {
				resp, r = sseRequest(t, http.MethodGet, url, a.session, map[string]string{"Last-Event-ID": lastID}, "")
				for !result {
					ev, err := r.Next()
					if err != nil {
						break
					}
					record(ev)
				}
				resp.Body.Close()
			}
			if !result {
				t.Fatal("the result never arrived after reconnecting")
			}
			exactlyOnce(t, seen, up.want)
		})
	}
}

// The proxy's own upstream client resumes a stream the upstream closes
// in the middle of a call (an official-SDK server with an event store,
// closing the stream SEP-1699 style), so the stdio client still gets the
// progress and the result.
func TestStdioFaceResumesUpstream(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "closer", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "long", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 20 * time.Millisecond})
			time.Sleep(200 * time.Millisecond)
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 2})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done after the cut"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	upURL := strings.TrimSuffix(serve(t, h), "/mcp")

	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: upURL}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go p.ServeStdio(t.Context(), inR, outW)
	defer inW.Close()
	msgs := make(chan map[string]any, 100)
	go func() {
		dec := json.NewDecoder(outR)
		for {
			var m map[string]any
			if dec.Decode(&m) != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	wait := func(id float64) (progress []float64, result map[string]any) {
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatal("stdio output ended")
				}
				if m["method"] == "notifications/progress" {
					progress = append(progress, m["params"].(map[string]any)["progress"].(float64))
				}
				if m["id"] == id {
					if m["error"] != nil {
						t.Fatalf("error: %v", m["error"])
					}
					return progress, m["result"].(map[string]any)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no answer")
			}
		}
	}
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"s","version":"1"}}}`)
	wait(1)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"long","arguments":{},"_meta":{"progressToken":"t"}}}`)
	progress, res := wait(2)
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), "done after the cut") || len(progress) != 2 || progress[0] != 1 || progress[1] != 2 {
		t.Fatalf("after the upstream closed the stream: progress %v, result %s", progress, b)
	}
}

// With StreamPollAfter the proxy ends a long call's POST stream itself
// after a retry hint (SEP-1699); the client polls with GET and
// Last-Event-ID and gets every later message exactly once, and the
// official SDK's client finishes the same call without noticing.
func TestServerClosesForPolling(t *testing.T) {
	p, err := mcpproxy.New(mcpproxy.Options{
		Upstream:        &mcpproxy.CommandUpstream{Command: buildBigtool(t)},
		StreamPollAfter: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var polls atomic.Int32 // GETs that resume a stream
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			polls.Add(1)
		}
		p.ServeHTTP(w, r)
	}))

	t.Run("raw", func(t *testing.T) {
		a := &agent{url: url}
		a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "r", "version": "1"}})
		seen := map[string]int{}
		var lastID string
		var retry time.Duration
		var result bool
		read := func(r *sse.Reader) {
			for {
				ev, err := r.Next()
				if err != nil {
					return
				}
				if ev.ID != "" {
					lastID = ev.ID
				}
				if ev.Retry > 0 {
					retry = ev.Retry
				}
				if len(ev.Data) > 0 {
					seen[string(ev.Data)]++
					result = result || strings.Contains(string(ev.Data), `"id":5,"result"`)
				}
				if result {
					return
				}
			}
		}
		resp, r := sseRequest(t, http.MethodPost, url, a.session, nil,
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow_report","arguments":{"seconds":1.5,"interval_ms":100,"size":500},"_meta":{"progressToken":"p"}}}`)
		read(r) // to the end of the stream: the proxy closes it
		resp.Body.Close()
		if result {
			t.Fatal("the POST stream carried the result of a 1.5 s call: it was not closed for polling")
		}
		if retry <= 0 || lastID == "" {
			t.Fatalf("closed without an event id (%q) and a retry hint (%v)", lastID, retry)
		}
		for polls := 0; !result && polls < 20; polls++ {
			time.Sleep(retry)
			resp, r = sseRequest(t, http.MethodGet, url, a.session, map[string]string{"Last-Event-ID": lastID}, "")
			read(r)
			resp.Body.Close()
		}
		if !result {
			t.Fatal("the result never arrived by polling")
		}
		exactlyOnce(t, seen, 16) // 15 progress notifications and the result
	})

	t.Run("sdk client", func(t *testing.T) {
		var mu sync.Mutex
		var progress []float64
		c := mcp.NewClient(&mcp.Implementation{Name: "poller", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				progress = append(progress, r.Params.Progress)
				mu.Unlock()
			},
		})
		// The session era: the SDK's default is the stateless one, which has
		// nothing to resume.
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		before := polls.Load()
		params := &mcp.CallToolParams{Name: "slow_report", Arguments: map[string]any{"seconds": 1.5, "interval_ms": 100, "size": 500}}
		params.SetProgressToken("p")
		res, err := cs.CallTool(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || len(res.Content) == 0 {
			t.Fatalf("result: %+v", res)
		}
		if polls.Load() == before {
			t.Error("the SDK client got the result without polling: the stream was not closed")
		}
		time.Sleep(200 * time.Millisecond) // notifications are handled concurrently with the result
		mu.Lock()
		defer mu.Unlock()
		if len(progress) != 15 {
			t.Errorf("%d progress notifications, want 15: %v", len(progress), progress)
		}
	})
}
