//lint:file-ignore SA1019 the proxy carries logging, sampling and roots for the clients and servers that still use them (deprecated, not removed, in 2026-07-28), so the tests exercise them.

package mcpproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/eratest"
	"github.com/spillway-dev/spillway/policy"
)

// sessionClientLogs connects a Go SDK client at 2025-11-25 to url as
// name, with the log notifications it
// receives sent to logs.
func sessionClientLogs(t *testing.T, ctx context.Context, url, name string, logs chan<- string, token ...string) *mcp.ClientSession {
	t.Helper()
	return sessionClientWith(t, ctx, url, name, clientEvents{logs: logs}, token...)
}

// clientEvents are where a test client's notifications go (nil: nowhere).
type clientEvents struct {
	logs, progress chan<- string
}

func sessionClientWith(t *testing.T, ctx context.Context, url, name string, ev clientEvents, token ...string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			if ev.logs != nil {
				ev.logs <- string(req.Params.Level)
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if ev.progress != nil {
				ev.progress <- fmt.Sprint(req.Params.ProgressToken, " ", req.Params.Message)
			}
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			asked := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: name + " heard " + asked}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///" + name, Name: name})
	tr := &mcp.StreamableClientTransport{Endpoint: url}
	if len(token) > 0 {
		tr.HTTPClient = &http.Client{Transport: bearer(token[0])}
	}
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// toolText(t)(cs.CallTool(…)) is the call's first text, or fails t.
func toolText(t *testing.T) func(*mcp.CallToolResult, error) string {
	return func(res *mcp.CallToolResult, err error) string {
		t.Helper()
		return firstText(t, res, err)
	}
}

func firstText(t *testing.T, res *mcp.CallToolResult, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) == 0 {
		b, _ := json.Marshal(res)
		t.Fatalf("tool error or no content: %s", b)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", res.Content[0])
	}
	return tc.Text
}

// A session-era client (the Go SDK's, at 2025-11-25) in front of a
// stateless-only server (2026-07-28 alone), over HTTP and as a stdio
// child: it initializes, lists and calls tools, reads the resource, gets
// the prompt, and completes the sampling, elicitation and roots round
// trips the server asks for with input_required results.
func TestBridgeSessionClient(t *testing.T) {
	for _, up := range bridgeUpstreams(t) {
		t.Run(up.name, func(t *testing.T) {
			svc := newService(t)
			eng, err := policy.New(context.Background(), policy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := mcpproxy.New(mcpproxy.Options{Upstream: up.up, Artifacts: svc,
				Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a deadlock guard
			defer cancel()
			logs := make(chan string, 16)
			cs := sessionClientLogs(t, ctx, serve(t, p), "alice", logs)
			if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
				t.Errorf("protocolVersion %q, want the client's 2025-11-25", v)
			}
			if n := cs.InitializeResult().ServerInfo; n == nil || n.Name != "eratest" {
				t.Errorf("serverInfo %+v, want the upstream's", n)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if !strings.Contains(strings.Join(names, " "), "sample") {
				t.Errorf("tools %v lack sample", names)
			}
			for _, c := range []struct{ tool, want string }{
				{"echo", "echo: hi"},
				{"sample", "sampled: alice heard say hi"},
				{"elicit", "elicited: accept alice"},
				{"roots", "roots: file:///alice"},
				{"bigstate", "requestState intact"},
			} {
				got := toolText(t)(cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"text": "hi"}}))
				if got != c.want {
					t.Errorf("%s: %q, want %q", c.tool, got, c.want)
				}
			}
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: eratest.Resource})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != eratest.ResourceText {
				t.Errorf("resources/read: %+v, %v", rr, err)
			}
			gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "bob"}})
			if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != "greet bob" {
				t.Errorf("prompts/get: %+v, %v", gp, err)
			}
			if err := cs.Ping(ctx, nil); err != nil {
				t.Errorf("ping: %v", err)
			}

			// The session's log level reaches the upstream with each call.
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
				t.Fatal(err)
			}
			toolText(t)(cs.CallTool(ctx, &mcp.CallToolParams{Name: "log"}))
			var got []string
			for len(got) < 2 {
				select {
				case l := <-logs:
					got = append(got, l)
				case <-ctx.Done():
					t.Fatalf("log notifications: got %v by the deadline, want warning and error", got)
				}
			}
			if strings.Join(got, " ") != "warning error" {
				t.Errorf("log notifications at level warning: %v", got)
			}

			// A large output is offloaded as through any other upstream.
			big, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big"})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(big)
			var link *mcp.ResourceLink
			for _, c := range big.Content {
				if l, ok := c.(*mcp.ResourceLink); ok {
					link = l
				}
			}
			if len(b) >= 8<<10 || link == nil {
				t.Fatalf("big: %d bytes, link %v; want a resource_link under 8 KiB: %.300s", len(b), link, b)
			}
			t.Logf("big: %d bytes of text reach the client as %d bytes", eratest.Big, len(b))
		})
	}
}

// bearer adds a bearer token to every request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// Two tenants' sessions call the same bridged upstream at once, with the
// same request ids (each SDK client numbers from 1) and the same progress
// token: each gets its own results and progress, and answers only its own
// server requests.
func TestBridgeTenantsApart(t *testing.T) {
	tenants, err := identity.ParseTenants("tok-aaaaaaaaaaaaaaaa=alice,tok-bbbbbbbbbbbbbbbb=bob")
	if err != nil {
		t.Fatal(err)
	}
	token := map[string]string{"alice": "tok-aaaaaaaaaaaaaaaa", "bob": "tok-bbbbbbbbbbbbbbbb"}
	for _, up := range bridgeUpstreams(t) {
		t.Run(up.name, func(t *testing.T) {
			p, err := mcpproxy.New(mcpproxy.Options{Upstream: up.up, Tenants: tenants})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			url := serve(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			progress := map[string]chan string{}
			for _, name := range []string{"alice", "bob"} {
				progress[name] = make(chan string, 1000)
				cs := sessionClientWith(t, ctx, url, name, clientEvents{progress: progress[name]}, token[name])
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 10 {
						p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"text": name}}
						p.SetProgressToken("tok")
						if got := toolText(t)(cs.CallTool(ctx, p)); got != "progressed "+name {
							t.Errorf("%s progress #%d: %q", name, i, got)
						}
						for tool, want := range map[string]string{
							"sample": "sampled: " + name + " heard say " + name,
							"elicit": "elicited: accept " + name,
							"roots":  "roots: file:///" + name,
						} {
							res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": name}})
							if err != nil {
								t.Errorf("%s %s #%d: %v", name, tool, i, err)
								return
							}
							if got := res.Content[0].(*mcp.TextContent).Text; got != want {
								t.Errorf("%s %s #%d: %q, want %q", name, tool, i, got, want)
							}
						}
					}
				}()
			}
			wg.Wait()
			for name, ch := range progress {
				for n := 0; n < 30; n++ { // 3 per call, 10 calls
					select {
					case got := <-ch:
						if got != "tok "+name {
							t.Errorf("%s received progress %q", name, got)
						}
					case <-ctx.Done():
						t.Fatalf("%s received %d progress notifications by the deadline, want 30", name, n)
					}
				}
			}
		})
	}
}

// A session-era client cancels a call while the bridge waits for its
// answer to the upstream's elicitation: the call ends at once, the
// answer that comes after is dropped (the call is not sent again), and
// the session goes on.
func TestBridgeCancelWhileAsking(t *testing.T) {
	for _, up := range bridgeUpstreams(t) {
		t.Run(up.name, func(t *testing.T) {
			p := bridgedProxy(t, up.up)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a deadlock guard
			defer cancel()
			entered, late := make(chan struct{}), make(chan struct{})
			c := mcp.NewClient(&mcp.Implementation{Name: "canceller", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(hctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					close(entered)
					select { // answers after the call was cancelled
					case <-late:
					case <-hctx.Done():
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "late"}}, nil
				},
			})
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: serve(t, p)}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			callCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "elicit"})
				done <- err
			}()
			select {
			case <-entered:
			case <-ctx.Done():
				t.Fatal("the elicitation never reached the client")
			}
			stop()
			if err := <-done; err == nil {
				t.Error("the cancelled call succeeded")
			}
			close(late)
			// The session goes on.
			if got := toolText(t)(cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "after"}})); got != "echo: after" {
				t.Errorf("after the cancel: %q", got)
			}
		})
	}
}

type bridgeUpstream struct {
	name string
	up   mcpproxy.Upstream
}

// bridgeUpstreams are eratest's server over HTTP (on loopback) and as a
// stdio child (the test binary in mode "eratest").
// bridgedProxy is a proxy for up with no other option, closed when the
// test ends.
func bridgedProxy(t *testing.T, up mcpproxy.Upstream) *mcpproxy.Proxy {
	t.Helper()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func bridgeUpstreams(t *testing.T) []bridgeUpstream {
	return []bridgeUpstream{
		{"http", &mcpproxy.HTTPUpstream{URL: serve(t, eratest.Handler())}},
		{"stdio", &mcpproxy.CommandUpstream{Command: os.Args[0], Args: []string{"-test.run=^TestEraChild$", "--", "eratest"}}},
	}
}

// TestEraChild is not a test: run as `<test binary>
// -test.run=^TestEraChild$ -- eratest`, it is eratest's server on stdin
// and stdout.
func TestEraChild(t *testing.T) {
	if childMode() != "eratest" {
		t.Skip("the stdio child of the bridging tests")
	}
	eratest.NewServer().Run(context.Background(), &mcp.StdioTransport{})
}

// The session's GET stream is served from subscriptions/listen: a
// resources/subscribe is answered once the upstream acknowledged it, and
// the resource's update and the change of the tool list reach the client.
func TestBridgeListen(t *testing.T) {
	for _, up := range bridgeUpstreams(t) {
		t.Run(up.name, func(t *testing.T) {
			p := bridgedProxy(t, up.up)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a deadlock guard
			defer cancel()
			got := make(chan string, 16)
			c := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
					got <- "updated " + req.Params.URI
				},
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { got <- "tools changed" },
			})
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: serve(t, p)}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: eratest.Resource}); err != nil {
				t.Fatal(err)
			}
			toolText(t)(cs.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"text": up.name}}))
			want := map[string]bool{"updated " + eratest.Resource: true, "tools changed": true}
			for len(want) > 0 {
				select {
				case s := <-got:
					delete(want, s)
				case <-ctx.Done():
					t.Fatalf("never received %v", want)
				}
			}
		})
	}
}

// Through the stdio face (spillway serve --stdio) in front of the
// stateless-only server, a session-era client completes the same round
// trips: the upstream's era is learned from its refusal of initialize.
func TestBridgeStdioFace(t *testing.T) {
	for _, up := range bridgeUpstreams(t) {
		t.Run(up.name, func(t *testing.T) { testBridgeStdioFace(t, up.up) })
	}
}

func testBridgeStdioFace(t *testing.T, up mcpproxy.Upstream) {
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a deadlock guard
	defer cancel()
	toProxy, fromClient := io.Pipe()
	toClient, fromProxy := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- p.ServeStdio(ctx, toProxy, fromProxy); fromProxy.Close() }()
	c := mcp.NewClient(&mcp.Implementation{Name: "carol", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "carol heard " + req.Params.Messages[0].Content.(*mcp.TextContent).Text}}, nil
		},
	})
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: toClient, Writer: fromClient}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(t)(cs.CallTool(ctx, &mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"text": "hi"}})); got != "sampled: carol heard say hi" {
		t.Errorf("sample: %q", got)
	}
	cs.Close()
	fromClient.Close()
	<-served
}
