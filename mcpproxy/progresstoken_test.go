package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// progressAndTools splits a client's messages: the tokens of its progress
// notifications, and the token each tool reported seeing (its result's
// text), by response id.
func progressAndTools(t *testing.T, msgs []map[string]json.RawMessage) (progress []string, seen map[string]string) {
	t.Helper()
	seen = map[string]string{}
	for _, m := range msgs {
		switch {
		case string(m["method"]) == `"notifications/progress"`:
			var p struct {
				Token json.RawMessage `json:"progressToken"`
			}
			json.Unmarshal(m["params"], &p)
			progress = append(progress, string(p.Token))
		case m["result"] != nil:
			var r struct {
				Content []struct{ Text string } `json:"content"`
			}
			json.Unmarshal(m["result"], &r)
			if len(r.Content) == 1 {
				seen[string(m["id"])] = r.Content[0].Text
			}
		}
	}
	return progress, seen
}

// On the stdio face the child serves one client: two calls with the same
// token in flight at once reach it with distinct tokens (one renamed "pN"),
// and a progress notification the child sends after answering the renamed
// call never reaches the client with "pN": every one it gets carries the
// client's own token. (It used to get the late "pN".)
func TestStdioLateProgressOfRenamedToken(t *testing.T) {
	cmd, args := childCmd("plain")
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: cmd, Args: args}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a deadlock guard
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go p.ServeStdio(ctx, inR, outW)
	go func() { <-ctx.Done(); outR.Close() }()
	defer inW.Close()
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, id := range []int{2, 3} {
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"pair","arguments":{},"_meta":{"progressToken":"t"}}}`+"\n", id)
	}
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	var msgs []map[string]json.RawMessage
	// Until both pairs are answered, then a call the child answers after
	// its late notifications: they were all written by then.
	answered := 0
	for done := false; !done && sc.Scan(); {
		var m map[string]json.RawMessage
		json.Unmarshal(sc.Bytes(), &m)
		msgs = append(msgs, m)
		switch id := string(m["id"]); {
		case m["method"] != nil:
		case id == "2" || id == "3":
			if answered++; answered == 2 {
				fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"token","arguments":{}}}`)
			}
		case id == "4":
			done = true
		}
	}
	progress, seen := progressAndTools(t, msgs)
	if seen["2"] == "" || seen["3"] == "" || seen["2"] == seen["3"] || !slices.Contains([]string{seen["2"], seen["3"]}, `"t"`) {
		t.Fatalf("the tool saw tokens %q and %q; want distinct, one the client's \"t\"", seen["2"], seen["3"])
	}
	if len(progress) < 2 {
		t.Fatalf("the client got %d progress notifications, want at least the two sent during the calls", len(progress))
	}
	for _, tok := range progress {
		if tok != `"t"` {
			t.Errorf("a progress notification reached the client with token %s; it sent only \"t\" (got %q)", tok, progress)
			break
		}
	}
}

// A 2026-07-28 client in front of a stdio child: the tool sees the
// client's own progress token when no other call in flight uses it (it
// used to see "p1"); two calls with the same token at once reach it with
// distinct tokens, and each client gets its own answer and progress with
// its own token.
func TestStatelessProgressTokenRenamedOnlyOnCollision(t *testing.T) {
	_, url := childProxy(t, "plain", mcpproxy.Options{})
	call := func(id int, tool, tok string) []map[string]json.RawMessage {
		msgs, err := statelessCall(t, url, "", id, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{},
			"_meta": map[string]any{"progressToken": tok}})
		if err != nil {
			t.Errorf("call %d: %v", id, err)
		}
		return msgs
	}
	progress, seen := progressAndTools(t, call(1, "token", "mine"))
	if seen["1"] != `"mine"` {
		t.Errorf("no collision: the tool saw token %s, the client sent \"mine\"", seen["1"])
	}
	if !slices.Equal(progress, []string{`"mine"`}) {
		t.Errorf("no collision: the client's progress tokens %q", progress)
	}

	var wg sync.WaitGroup
	got := make([][]map[string]json.RawMessage, 2)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = call(10+i, "pair", "same") }()
	}
	wg.Wait()
	var tools []string
	for i, msgs := range got {
		progress, seen := progressAndTools(t, msgs)
		id := fmt.Sprint(10 + i)
		if seen[id] == "" || len(seen) != 1 {
			t.Errorf("collision: client %d got answers %v", i, seen)
		}
		tools = append(tools, seen[id])
		if len(progress) == 0 || slices.ContainsFunc(progress, func(s string) bool { return s != `"same"` }) {
			t.Errorf("collision: client %d got progress tokens %q, want its own \"same\"", i, progress)
		}
	}
	if tools[0] == tools[1] || !slices.Contains(tools, `"same"`) {
		t.Errorf("collision: the tool saw tokens %q; want distinct, one the clients' \"same\"", tools)
	}
}
