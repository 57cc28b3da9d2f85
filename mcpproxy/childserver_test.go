package mcpproxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test binary doubles as a hostile or scripted stdio MCP server: run
// as `<test binary> -test.run=^TestChildServer$ -- MODE`, it serves MODE
// on its stdin and stdout. A child gets no environment from Spillway
// beyond an allow-list, so the mode travels as an argument.

func childMode() string {
	for i, a := range os.Args {
		if a == "--" && i+1 < len(os.Args) {
			return os.Args[i+1]
		}
	}
	return ""
}

// childCmd is the command line of a scripted child in MODE.
func childCmd(mode string) (string, []string) {
	return os.Args[0], []string{"-test.run=^TestChildServer$", "--", mode}
}

// TestChildServer is not a test: it is the scripted child.
//
// Modes: "plain" serves the tools below; "strict2025" also answers like a session-era-only server (the Python
// SDK's): everything before initialize is refused; tools/call "slow"
// sends a progress notification every 20 ms for 2 s (stopping when
// cancelled) then its result; "silent" never answers (in mode "nolist",
// tools/list is never answered either); "flood" sends 5000 progress notifications
// at once; "endless" sends 4 KiB progress notifications until cancelled
// (at most 20,000, so a failing test does not keep a core busy), saying
// "sent 3000" on stderr on the way; "huge" answers with 70 MiB of text
// (more than a session's 64 MiB buffer); "echo" answers with the caller's
// arguments. Every cancellation it receives is reported on stderr. "null"
// answers every request with "result": null. In every mode but null,
// tools/call "whoami" answers with the child's uid, HOME and what it reads
// of $HOME/key (JSON), tools/call "crash" makes the child exit at
// once, with status 3, and tools/call "stallmid" writes the first half of
// its answer's line, then nothing more (the child lives on, reading).
// tools/call "token" sends a progress notification with the call's token,
// then answers with the token as it arrived (its JSON); "pair" holds its
// call until a second "pair" arrives, then answers both in turn the same
// way, and after each answer sends a progress notification with its
// token again, late.
// tools/call "strict" and "closed" answer with 300 rows of
// structuredContent; mode "rows" lists them with the outputSchemas of
// rowsTools, mode "rowsbroken" answers tools/list with an error.
func TestChildServer(t *testing.T) {
	mode := childMode()
	if mode == "" {
		t.Skip("the scripted child of other tests")
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	send := func(v any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		out.Write(append(b, '\n'))
		out.Flush()
		mu.Unlock()
	}
	cancelled := map[string]chan struct{}{}
	var cmu sync.Mutex
	initialized := false
	// answerToken answers call id with the token tok it carried; late
	// sends one more progress notification after the answer.
	answerToken := func(id, tok json.RawMessage, late bool) {
		progress := func() {
			if tok != nil {
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": tok, "progress": 1}})
			}
		}
		progress()
		send(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": string(tok)}}}})
		if late {
			progress()
		}
	}
	var held [][2]json.RawMessage // "pair" calls waiting: id, token
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 64<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
				RequestID json.RawMessage `json:"requestId"`
				Meta      struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil {
			continue
		}
		if m.ID == nil {
			switch m.Method {
			case "notifications/initialized":
				initialized = true
			case "notifications/cancelled":
				fmt.Fprintf(os.Stderr, "cancelled %s\n", m.Params.RequestID)
				cmu.Lock()
				if c := cancelled[string(m.Params.RequestID)]; c != nil {
					close(c)
					delete(cancelled, string(m.Params.RequestID))
				}
				cmu.Unlock()
			}
			continue
		}
		if mode == "null" {
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": nil})
			continue
		}
		if m.Method == "initialize" {
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{
				"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "child", "version": "1"}}})
			continue
		}
		if !initialized && mode == "strict2025" {
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32600, "message": "Received request before initialization was complete"}})
			continue
		}
		switch {
		case m.Method == "tools/list" && mode == "nolist":
			// never answers
		case m.Method == "tools/list" && mode == "rows":
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": json.RawMessage(rowsTools)})
		case m.Method == "tools/list" && mode == "rowsbroken":
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32603, "message": "the listing is broken"}})
		case m.Method == "tools/call" && (m.Params.Name == "strict" || m.Params.Name == "closed"):
			rows := make([]any, 300)
			for i := range rows {
				rows[i] = map[string]any{"id": i, "note": fmt.Sprintf("row %d of the report, kept whole by the client's own check", i)}
			}
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{
				"content": []any{map[string]any{"type": "text", "text": "300 rows"}}, "structuredContent": map[string]any{"rows": rows}}})
		case m.Method == "tools/call" && m.Params.Name == "silent":
			// never answers
		case m.Method == "tools/call" && m.Params.Name == "slow":
			done := make(chan struct{})
			cmu.Lock()
			cancelled[string(m.ID)] = done
			cmu.Unlock()
			go func(id, tok json.RawMessage) {
				for i := 0; i < 100; i++ {
					select {
					case <-done:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if tok != nil {
						send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": tok, "progress": i}})
					}
				}
				send(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "slow done"}}}})
			}(m.ID, m.Params.Meta.Token)
		case m.Method == "tools/call" && m.Params.Name == "endless":
			done := make(chan struct{})
			cmu.Lock()
			cancelled[string(m.ID)] = done
			cmu.Unlock()
			go func(tok json.RawMessage) {
				pad := strings.Repeat("x", 4<<10)
				for i := 1; i <= 20000; i++ {
					select {
					case <-done:
						return
					default:
					}
					send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": tok, "progress": i, "message": pad}})
					if i == 3000 {
						fmt.Fprintln(os.Stderr, "sent 3000")
					}
				}
			}(m.Params.Meta.Token)
		case m.Method == "tools/call" && m.Params.Name == "huge":
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("h", 70<<20)}}}})
		case m.Method == "tools/call" && m.Params.Name == "flood":
			for i := 0; i < 5000; i++ {
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": m.Params.Meta.Token, "progress": i, "message": strings.Repeat("x", 1000)}})
			}
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"content": []any{}}})
		case m.Method == "tools/call" && m.Params.Name == "crash":
			os.Exit(3)
		case m.Method == "tools/call" && m.Params.Name == "stallmid":
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("s", 4096)}}}})
			mu.Lock() // held: nothing more leaves this child
			out.Write(b[:len(b)/2])
			out.Flush()
		case m.Method == "tools/call" && m.Params.Name == "token":
			answerToken(m.ID, m.Params.Meta.Token, false)
		case m.Method == "tools/call" && m.Params.Name == "pair":
			if held = append(held, [2]json.RawMessage{m.ID, m.Params.Meta.Token}); len(held) == 2 {
				for _, h := range held {
					answerToken(h[0], h[1], true)
				}
				held = nil
			}
		case m.Method == "tools/call" && m.Params.Name == "whoami":
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": whoami()}}}})
		case m.Method == "tools/call":
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": string(m.Params.Arguments)}}}})
		default:
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{}})
		}
	}
}

// whoami is the scripted child's report of who it runs as and what it
// can read of its HOME.
func whoami() string {
	home := os.Getenv("HOME")
	key, _ := os.ReadFile(home + "/key")
	b, _ := json.Marshal(map[string]any{"uid": os.Getuid(), "home": home, "key": string(key)})
	return string(b)
}

// rowsTools is the scripted child's tools/list in mode "rows": strict
// refuses fewer than 50 rows, closed takes any number; both refuse
// members they do not name.
const rowsTools = `{"tools":[` +
	`{"name":"strict","inputSchema":{"type":"object"},"outputSchema":{"type":"object","additionalProperties":false,"required":["rows"],` +
	`"properties":{"rows":{"type":"array","minItems":50}}}},` +
	`{"name":"closed","inputSchema":{"type":"object"},"outputSchema":{"type":"object","additionalProperties":false,"required":["rows"],` +
	`"properties":{"rows":{"type":"array"}}}}]}`
