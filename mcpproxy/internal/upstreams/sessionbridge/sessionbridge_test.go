package sessionbridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// upstream is the test's end of a Conn's upstream connection (our own
// mux.Conn interface): what the Conn sends arrives on sent, what the test
// puts on recv the Conn receives.
type upstream struct {
	sent chan *jsonrpc.Message
	recv chan *jsonrpc.Message
}

func newUpstream() *upstream {
	return &upstream{sent: make(chan *jsonrpc.Message, 64), recv: make(chan *jsonrpc.Message, 64)}
}

func (u *upstream) Send(_ context.Context, m *jsonrpc.Message) error { u.sent <- m; return nil }
func (u *upstream) Recv() <-chan *jsonrpc.Message                    { return u.recv }
func (u *upstream) Err() error                                       { return nil }
func (u *upstream) Close() error                                     { return nil }

// next is the next message from ch, or fails t after a deadlock guard.
func next(t *testing.T, ch <-chan *jsonrpc.Message, what string) *jsonrpc.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		return nil
	}
}

// none fails t when ch holds a message.
func none(t *testing.T, ch <-chan *jsonrpc.Message, what string) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("unexpected %s: %s", what, m.Raw)
	default:
	}
}

const discover = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"tasks":{"list":{}}},"instructions":"hi",` +
	`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"2"}},"resultType":"complete","ttlMs":0,"cacheScope":"public"}`

// session starts a bridged session with client capabilities caps.
func session(t *testing.T, caps string) (*Conn, *upstream) {
	t.Helper()
	u := newUpstream()
	c := New(u, Options{MaxRounds: 2})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":`+caps+`,"clientInfo":{"name":"cl","version":"1"}}}`))
	d := next(t, u.sent, "server/discover")
	if d.Method != "server/discover" || jsonrpc.MetaString(d, jsonrpc.MetaProtocolVersion) != Version ||
		string(jsonrpc.Meta(d, "io.modelcontextprotocol/clientInfo")) != `{"name":"cl","version":"1"}` {
		t.Fatalf("discover: %s", d.Raw)
	}
	u.recv <- jsonrpc.Response(d.ID, []byte(discover))
	init := next(t, c.Recv(), "initialize result")
	want := `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"2"},"instructions":"hi"}`
	if string(init.ID) != "0" || string(init.Result) != want {
		t.Fatalf("initialize: %s, want result %s", init.Raw, want)
	}
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	none(t, u.sent, "message upstream after notifications/initialized")
	return c, u
}

func TestInputRoundTrip(t *testing.T) {
	c, u := session(t, `{"sampling":{},"roots":{}}`)
	ctx := context.Background()
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"p"}}}`))
	call := next(t, u.sent, "tools/call upstream")
	if string(call.ID) != "7" || string(jsonrpc.Meta(call, jsonrpc.MetaClientCapabilities)) != `{"sampling":{},"roots":{}}` || string(jsonrpc.ProgressToken(call)) != `"p"` {
		t.Fatalf("call upstream: %s", call.Raw)
	}
	u.recv <- jsonrpc.Response(call.ID, []byte(`{"resultType":"input_required","requestState":"st","inputRequests":{`+
		`"a":{"method":"sampling/createMessage","params":{"maxTokens":5,"messages":[]}},"b":{"method":"roots/list"}}}`))
	s1, s2 := next(t, c.Recv(), "sampling request"), next(t, c.Recv(), "roots request")
	if s1.Method != "sampling/createMessage" || s2.Method != "roots/list" || string(s1.ID) == string(s2.ID) {
		t.Fatalf("server requests: %s %s", s1.Raw, s2.Raw)
	}
	c.Send(ctx, jsonrpc.Response(s2.ID, []byte(`{"roots":[]}`)))
	none(t, u.sent, "retry before every answer came")
	c.Send(ctx, jsonrpc.Response(s1.ID, []byte(`{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}`)))
	retry := next(t, u.sent, "retry")
	if string(retry.ID) != "7" || jsonrpc.StringMember(retry.Params, "requestState") != "st" ||
		string(jsonrpc.Path(retry.Params, "inputResponses", "b")) != `{"roots":[]}` || string(jsonrpc.ProgressToken(retry)) != `"p"` {
		t.Fatalf("retry: %s", retry.Raw)
	}
	u.recv <- jsonrpc.Response(retry.ID, []byte(`{"content":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`))
	if r := next(t, c.Recv(), "result"); string(r.Result) != `{"content":[]}` {
		t.Fatalf("result: %s", r.Raw)
	}
}

// A call cancelled while it waits for its client's input: the client is
// told its server requests are cancelled, a late answer goes nowhere, and
// the call is not sent again.
func TestCancelWhileAsking(t *testing.T) {
	c, u := session(t, `{"elicitation":{}}`)
	ctx := context.Background()
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`))
	call := next(t, u.sent, "call")
	u.recv <- jsonrpc.Response(call.ID, []byte(`{"resultType":"input_required","inputRequests":{"e":{"method":"elicitation/create","params":{"message":"?"}}}}`))
	ask := next(t, c.Recv(), "elicitation")
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`))
	if n := next(t, c.Recv(), "cancellation of the elicitation"); n.Method != jsonrpc.MethodCancelled || string(jsonrpc.CancelledID(n)) != string(ask.ID) {
		t.Fatalf("to the client: %s", n.Raw)
	}
	if n := next(t, u.sent, "cancellation upstream"); n.Method != jsonrpc.MethodCancelled {
		t.Fatalf("upstream: %s", n.Raw)
	}
	c.Send(ctx, jsonrpc.Response(ask.ID, []byte(`{"action":"accept"}`))) // late: nobody waits
	none(t, u.sent, "message upstream after a late answer")
}

// What cannot be bridged is refused by name, never left waiting.
func TestRefusals(t *testing.T) {
	c, u := session(t, `{}`)
	ctx := context.Background()
	for _, tc := range []struct{ req, upstream, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{"ttl":1}}}`, "", "tasks are not bridged"},
		{`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"x"}}`, "", "tasks are not bridged"},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t"}}`,
			`{"resultType":"input_required","inputRequests":{"s":{"method":"sampling/createMessage","params":{}}}}`, "which needs the client"},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t"}}`,
			`{"resultType":"input_required","inputRequests":{"x":{"method":"something/else"}}}`, "cannot ask a session-era client for"},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`, `{"resultType":"input_required","inputRequests":{}}`, "busy"},
	} {
		c.Send(ctx, jsonrpc.MustDecode(tc.req))
		if tc.upstream != "" {
			call := next(t, u.sent, "call")
			u.recv <- jsonrpc.Response(call.ID, []byte(tc.upstream))
		}
		r := next(t, c.Recv(), "refusal")
		if r.Error == nil || !strings.Contains(string(r.Error), tc.want) {
			t.Errorf("%s: %s, want an error saying %q", tc.req, r.Raw, tc.want)
		}
	}
}

// An upstream that keeps asking gets its client an error after MaxRounds.
func TestRoundsBounded(t *testing.T) {
	c, u := session(t, `{"roots":{}}`)
	ctx := context.Background()
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`))
	ask := `{"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"}}}`
	for range 2 {
		call := next(t, u.sent, "call")
		u.recv <- jsonrpc.Response(call.ID, []byte(ask))
		r := next(t, c.Recv(), "roots/list")
		c.Send(ctx, jsonrpc.Response(r.ID, []byte(`{"roots":[]}`)))
	}
	call := next(t, u.sent, "third round")
	u.recv <- jsonrpc.Response(call.ID, []byte(ask))
	if r := next(t, c.Recv(), "error"); r.Error == nil || !strings.Contains(string(r.Error), "more than 2 times") {
		t.Fatalf("got %s", r.Raw)
	}
}

// ping and logging/setLevel are answered here; the level goes upstream in
// _meta and filters the log notifications passed on.
func TestPingAndLevel(t *testing.T) {
	c, u := session(t, `{}`)
	ctx := context.Background()
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if r := next(t, c.Recv(), "pong"); string(r.Result) != `{}` {
		t.Fatalf("ping: %s", r.Raw)
	}
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"error"}}`))
	next(t, c.Recv(), "setLevel result")
	none(t, u.sent, "ping or setLevel upstream")
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`))
	if m := next(t, u.sent, "tools/list"); jsonrpc.MetaString(m, "io.modelcontextprotocol/logLevel") != "error" {
		t.Fatalf("tools/list upstream: %s", m.Raw)
	}
	u.recv <- jsonrpc.Notification("notifications/message", map[string]any{"level": "info", "data": "quiet"})
	u.recv <- jsonrpc.Notification("notifications/message", map[string]any{"level": "critical", "data": "loud"})
	if n := next(t, c.Recv(), "log"); !strings.Contains(string(n.Params), "loud") {
		t.Fatalf("log passed: %s", n.Raw)
	}
}

// NewAuto passes everything as it is when the upstream answers
// initialize, and bridges when it refuses it and offers 2026-07-28.
func TestAuto(t *testing.T) {
	ctx := context.Background()
	initReq := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cl","version":"1"}}}`

	u := newUpstream()
	c := NewAuto(u, Options{})
	defer c.Close()
	c.Send(ctx, jsonrpc.MustDecode(initReq))
	if m := next(t, u.sent, "initialize"); m.Method != "initialize" {
		t.Fatalf("sent %s", m.Raw)
	}
	u.recv <- jsonrpc.Response([]byte("0"), []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`))
	next(t, c.Recv(), "initialize result")
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if m := next(t, u.sent, "ping upstream"); m.Method != "ping" || m.Params != nil {
		t.Fatalf("passed: %s", m.Raw)
	}

	u = newUpstream()
	c = NewAuto(u, Options{})
	defer c.Close()
	c.Send(ctx, jsonrpc.MustDecode(initReq))
	next(t, u.sent, "initialize")
	u.recv <- jsonrpc.ErrorResponse([]byte("0"), -32022, "unsupported protocol version")
	d := next(t, u.sent, "server/discover")
	u.recv <- jsonrpc.Response(d.ID, []byte(discover))
	if r := next(t, c.Recv(), "initialize result"); jsonrpc.StringMember(r.Result, "protocolVersion") != "2025-11-25" {
		t.Fatalf("initialize: %s", r.Raw)
	}
}

// A subscription the upstream refuses is refused to the client; one it
// acknowledges is answered once acknowledged.
func TestSubscribe(t *testing.T) {
	c, u := session(t, `{}`)
	ctx := context.Background()
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"a://b"}}`))
	l := next(t, u.sent, "subscriptions/listen")
	if l.Method != "subscriptions/listen" || string(jsonrpc.Path(l.Params, "notifications", "resourceSubscriptions")) != `["a://b"]` {
		t.Fatalf("listen: %s", l.Raw)
	}
	none(t, c.Recv(), "answer before the acknowledgement")
	u.recv <- jsonrpc.Notification("notifications/subscriptions/acknowledged", map[string]any{"notifications": map[string]any{}, "_meta": map[string]any{"io.modelcontextprotocol/subscriptionId": json.RawMessage(l.ID)}})
	if r := next(t, c.Recv(), "subscribe answer"); string(r.ID) != "1" || string(r.Result) != "{}" {
		t.Fatalf("subscribe: %s", r.Raw)
	}
	c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"c://d"}}`))
	if n := next(t, u.sent, "cancellation of the old listen"); n.Method != jsonrpc.MethodCancelled || string(jsonrpc.CancelledID(n)) != string(l.ID) {
		t.Fatalf("sent %s", n.Raw)
	}
	l2 := next(t, u.sent, "the new listen")
	u.recv <- jsonrpc.ErrorResponse(l2.ID, jsonrpc.CodeMethodNotFound, "no listen here")
	if r := next(t, c.Recv(), "refusal"); string(r.ID) != "2" || !strings.Contains(string(r.Error), "no listen here") {
		t.Fatalf("subscribe: %s", r.Raw)
	}
}

// An upstream that never answers server/discover leaves no initialize
// waiting for ever.
func TestDiscoverUnanswered(t *testing.T) {
	u := newUpstream()
	c := New(u, Options{DiscoverWait: time.Millisecond})
	defer c.Close()
	c.Send(context.Background(), jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cl","version":"1"}}}`))
	next(t, u.sent, "server/discover")
	if r := next(t, c.Recv(), "initialize error"); string(r.ID) != "0" || !strings.Contains(string(r.Error), "did not answer server/discover") {
		t.Fatalf("initialize: %s", r.Raw)
	}
}

// An answer the Conn makes off its routing goroutine (here: the
// initialize a stateless-only upstream refused, whose server/discover
// went unanswered) may come after the upstream ended and the Conn was
// closed: it is dropped, not sent on the closed Recv (which panicked).
func TestPushAfterEnd(t *testing.T) {
	initReq := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cl","version":"1"}}}`
	for range 20 {
		u := newUpstream()
		c := NewAuto(u, Options{DiscoverWait: time.Millisecond})
		c.Send(context.Background(), jsonrpc.MustDecode(initReq))
		next(t, u.sent, "initialize")
		u.recv <- jsonrpc.ErrorResponse([]byte("0"), -32022, "unsupported protocol version")
		next(t, u.sent, "server/discover")
		c.Close()
		close(u.recv)
		for range c.Recv() {
		}
		time.Sleep(5 * time.Millisecond) // the unanswered discover's answer is made
	}
}
