package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// TestFacesStdioListenEnds: a 2026-07-28 client on the stdio face opens
// subscriptions/listen on the Go SDK's everything-server, then cancels it
// (on stdio, how a client ends a subscription): it gets the listen's
// final response, with the subscription's id, as it does from the server
// directly. The upstream is the server as a stdio child and over HTTP.
func TestFacesStdioListenEnds(t *testing.T) {
	bin := tool(t, "SPILLWAY_EVERYTHING_SERVER", "bin/everything-server")
	for _, tc := range []struct {
		name string
		up   func() mcpproxy.Upstream
	}{
		{"stdio child", func() mcpproxy.Upstream { return &mcpproxy.CommandUpstream{Command: bin} }},
		{"HTTP", func() mcpproxy.Upstream { return &mcpproxy.HTTPUpstream{URL: startEverything(t, true)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			_, inW, outR, _ := stdioProxy(t, ctx, tc.up())
			lines := make(chan string)
			go func() {
				sc := bufio.NewScanner(outR)
				for sc.Scan() {
					select {
					case lines <- sc.Text():
					case <-ctx.Done():
						return
					}
				}
			}()
			next := func(what string) map[string]json.RawMessage {
				select {
				case l := <-lines:
					var m map[string]json.RawMessage
					if err := json.Unmarshal([]byte(l), &m); err != nil {
						t.Fatalf("%s: %q", what, l)
					}
					return m
				case <-ctx.Done():
					t.Fatalf("waiting for %s: nothing came", what)
					return nil
				}
			}
			meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
			fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{%s,"notifications":{"toolsListChanged":true}}}`+"\n", meta)
			if ack := next("the acknowledgement"); string(ack["method"]) != `"notifications/subscriptions/acknowledged"` {
				t.Fatalf("first message on the listen: %v", ack)
			}
			fmt.Fprintf(inW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L1",%s}}`+"\n", meta)
			end := next("the listen's final response")
			var res struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			json.Unmarshal(end["result"], &res)
			if string(end["id"]) != `"L1"` || string(res.Meta["io.modelcontextprotocol/subscriptionId"]) != `"L1"` {
				t.Fatalf("the listen's final response: %s", mustJSON(end))
			}
			// The face goes on: a later request with the same id is answered
			// (and is the next thing to come: a second answer to the listen,
			// the upstream's own, would come first).
			fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":"L1","method":"tools/list","params":{%s}}`+"\n", meta)
			if m := next("tools/list"); string(m["id"]) != `"L1"` || !strings.Contains(string(m["result"]), "tools") {
				t.Fatalf("a request after the listen: %s", mustJSON(m))
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
