package resumable

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// pipe is a stdio client's side as the face sees it, for the test: what
// the test sends arrives on recv, what the face writes on sent.
type pipe struct {
	recv chan *jsonrpc.Message
	sent chan *jsonrpc.Message
}

func (p *pipe) Send(_ context.Context, m *jsonrpc.Message) error { p.sent <- m; return nil }
func (p *pipe) Recv() <-chan *jsonrpc.Message                    { return p.recv }

func msg(t *testing.T, v map[string]any) *jsonrpc.Message {
	t.Helper()
	v["jsonrpc"] = "2.0"
	b, _ := json.Marshal(v)
	m, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (p *pipe) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-p.sent:
		var v map[string]any
		json.Unmarshal(m.Raw, &v)
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing written to the client")
		return nil
	}
}

// Over stdio a stream frames its request: create before the request
// reaches the face, its progress and response, then the end; poll and
// resume of the live stream answer at once; a client that declared
// nothing gets no stream.
func TestStdio(t *testing.T) {
	reg := New(Options{})
	t.Cleanup(reg.Close)
	p := &pipe{recv: make(chan *jsonrpc.Message, 8), sent: make(chan *jsonrpc.Message, 8)}
	c := reg.Stdio(t.Context(), p)
	p.recv <- msg(t, map[string]any{"id": 1, "method": "initialize", "params": map[string]any{"capabilities": map[string]any{"streams": map[string]any{}}}})
	if m := <-c.Recv(); m.Method != "initialize" {
		t.Fatalf("first: %s", m.Raw)
	}
	p.recv <- msg(t, map[string]any{"id": 2, "method": "tools/call", "params": map[string]any{"name": "x", "_meta": map[string]any{"progressToken": 9}}})
	create := p.next(t)
	if create["method"] != "notifications/stream/create" {
		t.Fatalf("before the call: %v", create)
	}
	sid := create["params"].(map[string]any)["stream"].(map[string]any)["streamId"].(string)
	if m := <-c.Recv(); m.Method != "tools/call" {
		t.Fatalf("the call: %s", m.Raw)
	}
	c.Send(t.Context(), msg(t, map[string]any{"method": "notifications/progress", "params": map[string]any{"progressToken": 9, "progress": 1}}))
	p.next(t)
	p.recv <- msg(t, map[string]any{"id": 3, "method": "stream/poll", "params": map[string]any{"streamId": sid}})
	if r := p.next(t)["result"].(map[string]any); r["status"] != "live" || r["pendingMessages"] != false {
		t.Fatalf("poll: %v", r)
	}
	p.recv <- msg(t, map[string]any{"id": 4, "method": "stream/resume", "params": map[string]any{"streamId": sid}})
	if r := p.next(t)["result"].(map[string]any); r["status"] != "live" {
		t.Fatalf("resume: %v", r)
	}
	c.Send(t.Context(), msg(t, map[string]any{"id": 2, "result": map[string]any{"content": []any{}}}))
	if r := p.next(t); r["id"] != float64(2) {
		t.Fatalf("response: %v", r)
	}
	if end := p.next(t); end["method"] != "notifications/stream/end" {
		t.Fatalf("after the response: %v", end)
	}
	p.recv <- msg(t, map[string]any{"id": 5, "method": "stream/poll", "params": map[string]any{"streamId": sid}})
	if r := p.next(t)["result"].(map[string]any); r["status"] != "completed" {
		t.Fatalf("poll after the end: %v", r)
	}
	// The same methods from a client that declared nothing reach the face.
	q := &pipe{recv: make(chan *jsonrpc.Message, 8), sent: make(chan *jsonrpc.Message, 8)}
	d := reg.Stdio(t.Context(), q)
	q.recv <- msg(t, map[string]any{"id": 1, "method": "stream/poll", "params": map[string]any{"streamId": sid}})
	if m := <-d.Recv(); m.Method != "stream/poll" {
		t.Fatalf("undeclared: %s", m.Raw)
	}
	q.recv <- msg(t, map[string]any{"id": 2, "method": "tools/call", "params": map[string]any{"name": "x"}})
	if m := <-d.Recv(); m.Method != "tools/call" || len(q.sent) != 0 {
		t.Fatalf("undeclared call: %s, %d written", m.Raw, len(q.sent))
	}
}

// FuzzParams: the stream methods' params parser never panics, and what it
// accepts has the stream id the params named.
func FuzzParams(f *testing.F) {
	for _, s := range []string{`{"streamId":"abc"}`, `{"streamId":"a","lastEventId":"12"}`, `{"streamId":"a","lastEventId":12}`,
		`{"streamId":1}`, `[]`, `null`, `{"lastEventId":"x"}`, `{"streamId":"a","lastEventId":"-1"}`, ``} {
		f.Add("stream/resume", []byte(s))
		f.Add("stream/poll", []byte(s))
		f.Add("stream/poll/all", []byte(s))
	}
	f.Fuzz(func(t *testing.T, method string, raw []byte) {
		p, err := parseParams(method, raw)
		if err != nil || method == "stream/poll/all" {
			return
		}
		var in struct {
			StreamID string `json:"streamId"`
		}
		if json.Unmarshal(raw, &in) != nil || in.StreamID != p.StreamID {
			t.Fatalf("%s %q: accepted stream id %q", method, raw, p.StreamID)
		}
	})
}
