package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// fakeServer is an in-memory MCP server behind a mux.Conn (this
// package's own interface, faked): it answers initialize, tools/list in
// pages of pageSize, and tools/call by echoing the name it was called by.
type fakeServer struct {
	tools    []string
	pageSize int
	// flood, when set, is sent as notifications before each tools/call
	// answer.
	flood int
	// hold, when not nil, is waited on before answering tools/call.
	hold chan struct{}
	// asks, when set, is how many roots/list requests tools/call sends
	// the client first; refused counts the error answers they got.
	asks    int
	refused atomic.Int64
	lists   atomic.Int64 // tools/list requests answered
}

type fakeConn struct {
	s    *fakeServer
	out  chan *jsonrpc.Message
	once sync.Once
	done chan struct{}
	busy sync.WaitGroup // answers being sent; out closes after them
}

func (s *fakeServer) dial(context.Context) (mux.Conn, error) {
	return &fakeConn{s: s, out: make(chan *jsonrpc.Message, 1024), done: make(chan struct{})}, nil
}

func (c *fakeConn) Recv() <-chan *jsonrpc.Message { return c.out }
func (c *fakeConn) Err() error                    { return nil }
func (c *fakeConn) Close() error {
	c.once.Do(func() {
		close(c.done)
		go func() { c.busy.Wait(); close(c.out) }()
	})
	return nil
}

func (c *fakeConn) Send(_ context.Context, m *jsonrpc.Message) error {
	if m.IsResponse() && m.Error != nil {
		c.s.refused.Add(1)
	}
	if !m.IsRequest() {
		return nil
	}
	select {
	case <-c.done:
		return mux.ErrClosed
	default:
	}
	c.busy.Go(func() { c.answer(m) })
	return nil
}

func (c *fakeConn) answer(m *jsonrpc.Message) {
	var result any
	switch m.Method {
	case "initialize":
		result = map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "fake", "version": "1"}, "instructions": "fake server"}
	case "tools/list":
		c.s.lists.Add(1)
		start := 0
		fmt.Sscan(jsonrpc.StringMember(m.Params, "cursor"), &start)
		end := min(start+c.s.pageSize, len(c.s.tools))
		var tools []map[string]any
		for _, n := range c.s.tools[start:end] {
			tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
		}
		r := map[string]any{"tools": tools}
		if end < len(c.s.tools) {
			r["nextCursor"] = fmt.Sprint(end)
		}
		result = r
	case "tools/call":
		if jsonrpc.StringMember(m.Params, "name") == "oops" { // an error of the server's own, as read from a wire
			c.send(jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32000,"message":"the tool's own failure"}}`))
			return
		}
		if c.s.hold != nil {
			select {
			case <-c.s.hold:
			case <-c.done:
				return
			}
		}
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "called " + jsonrpc.StringMember(m.Params, "name")}}}
	case "resources/templates/list":
		result = map[string]any{"resourceTemplates": []any{map[string]any{"uriTemplate": "file:///{path}", "name": "files"}}}
	case "resources/read":
		uri := jsonrpc.StringMember(m.Params, "uri")
		result = map[string]any{"contents": []any{map[string]any{"uri": uri, "text": "read " + uri}}}
	case "completion/complete":
		result = map[string]any{"completion": map[string]any{"values": []string{"ref " + stringAt(m.Params, "ref", "name") + stringAt(m.Params, "ref", "uri")}}}
	default:
		c.send(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound, "no"))
		return
	}
	for i := range c.s.asks * btoi(m.Method == "tools/call") {
		c.send(jsonrpc.MustDecode(fmt.Sprintf(`{"jsonrpc":"2.0","id":"ask-%d","method":"roots/list"}`, i)))
	}
	for range c.s.flood * btoi(m.Method == "tools/call") {
		c.send(jsonrpc.Notification("notifications/message", map[string]any{"level": "info", "data": "flood"}))
	}
	b, _ := json.Marshal(result)
	c.send(jsonrpc.Response(m.ID, b))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *fakeConn) send(m *jsonrpc.Message) {
	select {
	case c.out <- m:
	case <-c.done:
	}
}

// client drives a Conn as a face's mux would, collecting what it receives.
type client struct {
	t    testing.TB
	c    mux.Conn
	mu   sync.Mutex
	got  map[string]*jsonrpc.Message
	note []*jsonrpc.Message
	next int
	wake chan struct{}
}

func connect(t testing.TB, r *Registry) *client {
	t.Helper()
	c, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cl := &client{t: t, c: c, got: map[string]*jsonrpc.Message{}, wake: make(chan struct{}, 1)}
	go func() {
		for m := range c.Recv() {
			cl.mu.Lock()
			if m.IsResponse() {
				cl.got[string(m.ID)] = m
			} else {
				cl.note = append(cl.note, m)
			}
			cl.mu.Unlock()
			select {
			case cl.wake <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { c.Close() })
	cl.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	return cl
}

// call sends a request and waits (≤ 10 s) for its answer.
func (cl *client) call(method, params string) *jsonrpc.Message {
	cl.t.Helper()
	cl.mu.Lock()
	cl.next++
	id := fmt.Sprint(cl.next)
	cl.mu.Unlock()
	req := jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
	if err := cl.c.Send(context.Background(), req); err != nil {
		cl.t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		cl.mu.Lock()
		m := cl.got[id]
		cl.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-cl.wake:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			cl.t.Fatalf("%s: no answer", method)
		}
	}
}

// listAll pages through tools/list and returns every name.
func (cl *client) listAll() []string {
	var names []string
	cursor := ""
	for range 100 {
		params := `{}`
		if cursor != "" {
			params = `{"cursor":` + quote(cursor) + `}`
		}
		r := cl.call("tools/list", params)
		if r.Error != nil {
			cl.t.Fatalf("tools/list: %s", r.Error)
		}
		var res struct {
			Tools      []struct{ Name string }
			NextCursor string
		}
		json.Unmarshal(r.Result, &res)
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if cursor = res.NextCursor; cursor == "" {
			return names
		}
	}
	cl.t.Fatal("tools/list never ends")
	return nil
}

func registry(t *testing.T, o Options, servers map[string]*fakeServer, order ...string) *Registry {
	t.Helper()
	var specs []Spec
	for _, name := range order {
		specs = append(specs, Spec{Name: name, Dial: servers[name].dial})
	}
	r, err := NewRegistry(o, specs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestListPagesAcrossUpstreams(t *testing.T) {
	a := &fakeServer{tools: []string{"a1", "a2", "a3", "a4", "a5"}, pageSize: 2}
	b := &fakeServer{tools: []string{"b1", "b2", "b3"}, pageSize: 1}
	r := registry(t, Options{}, map[string]*fakeServer{"a": a, "b": b}, "a", "b")
	cl := connect(t, r)
	got := cl.listAll()
	slices.Sort(got)
	want := []string{"a_a1", "a_a2", "a_a3", "a_a4", "a_a5", "b_b1", "b_b2", "b_b3"}
	if !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	r2 := cl.call("tools/call", `{"name":"b_b2"}`)
	if !strings.Contains(string(r2.Result), "called b2") {
		t.Errorf("b_b2 reached %s", r2.Raw)
	}
	for _, bad := range []string{`"!!"`, `"e30"`, `"bm90IGpzb24"`, `3`} {
		if r := cl.call("tools/list", `{"cursor":`+bad+`}`); r.ErrorCode() != jsonrpc.CodeInvalidParams && bad != `3` {
			t.Errorf("cursor %s: %s", bad, r.Raw)
		}
	}
}

func TestPrefixModes(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want []string
	}{
		{PrefixNever, []string{"only-a", "same", "only-b"}},
		{PrefixCollision, []string{"only-a", "a_same", "only-b", "b_same"}},
		{PrefixAlways, []string{"a_only-a", "a_same", "b_only-b", "b_same"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			a := &fakeServer{tools: []string{"only-a", "same"}, pageSize: 10}
			b := &fakeServer{tools: []string{"only-b", "same"}, pageSize: 10}
			r := registry(t, Options{Prefix: tc.mode}, map[string]*fakeServer{"a": a, "b": b}, "a", "b")
			cl := connect(t, r)
			got := cl.listAll()
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
			for _, name := range got {
				r := cl.call("tools/call", `{"name":`+quote(name)+`}`)
				orig := name[strings.LastIndex(name, "_")+1:]
				if !strings.Contains(string(r.Result), "called "+orig) {
					t.Errorf("%s: %s", name, r.Raw)
				}
			}
			// In never mode "same" is the first upstream's.
			if tc.mode == PrefixNever {
				if srv, _, _ := r.ServerOf(kindTool, "same"); srv != "a" {
					t.Errorf("same belongs to %q", srv)
				}
			}
		})
	}
}

// One upstream's flood of notifications does not hold up another's
// answer: each has its own queue to the client.
func TestFloodDelaysOnlyItsUpstream(t *testing.T) {
	hold := make(chan struct{})
	flood := &fakeServer{tools: []string{"f"}, pageSize: 10, flood: 10000, hold: hold}
	quiet := &fakeServer{tools: []string{"q"}, pageSize: 10}
	r := registry(t, Options{}, map[string]*fakeServer{"flood": flood, "quiet": quiet}, "flood", "quiet")
	c, _ := r.Dial(context.Background())
	defer c.Close()
	// A client that reads nothing while the flood fills its queue, then
	// only the quiet upstream's answer: it must come although the
	// flooding upstream's queue is full and blocked.
	init := jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.Send(context.Background(), init)
	if m := <-c.Recv(); string(m.ID) != "0" {
		t.Fatalf("first message %s", m.Raw)
	}
	c.Send(context.Background(), jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flood_f"}}`))
	close(hold)
	time.Sleep(200 * time.Millisecond) // the flood fills its queue
	c.Send(context.Background(), jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"quiet_q"}}`))
	floods := 0
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-c.Recv():
			if string(m.ID) == "2" {
				// Each upstream's forwarder hands over one message at a
				// time, in turn: the quiet answer waits for at most the
				// messages already queued ahead of the handover, not the
				// whole flood.
				if floods > 200 {
					t.Errorf("the quiet upstream's answer came after %d flood messages", floods)
				}
				return
			}
			floods++
		case <-timeout:
			t.Fatal("no answer from the quiet upstream")
		}
	}
}

// A removed upstream's tools go, an added one's come, and the client is
// told.
func TestUpdateAddsAndRemoves(t *testing.T) {
	a := &fakeServer{tools: []string{"x"}, pageSize: 10}
	b := &fakeServer{tools: []string{"y"}, pageSize: 10}
	c := &fakeServer{tools: []string{"z"}, pageSize: 10}
	r := registry(t, Options{Prefix: PrefixAlways}, map[string]*fakeServer{"a": a, "b": b}, "a", "b")
	cl := connect(t, r)
	if got := cl.listAll(); !slices.Equal(got, []string{"a_x", "b_y"}) {
		t.Fatalf("listed %v", got)
	}
	if err := r.Update([]Spec{{Name: "a", Dial: a.dial}, {Name: "c", Dial: c.dial}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := cl.listAll()
		if slices.Equal(got, []string{"a_x", "c_z"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the update: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cl.mu.Lock()
	changed := 0
	for _, n := range cl.note {
		if n.Method == "notifications/tools/list_changed" {
			changed++
		}
	}
	cl.mu.Unlock()
	if changed == 0 {
		t.Error("no tools/list_changed after the update")
	}
	if r := cl.call("tools/call", `{"name":"b_y"}`); r.Error == nil {
		t.Errorf("a removed upstream's tool answered: %s", r.Raw)
	}
	if err := r.Update(nil); err == nil {
		t.Error("an empty list was accepted")
	}
	if err := r.Update([]Spec{{Name: "a", Dial: a.dial}, {Name: "a", Dial: b.dial}}); err == nil {
		t.Error("a duplicate name was accepted")
	}
}

// FuzzRequest sends one client request of any method, name and cursor:
// the Conn answers it, whatever it holds, and never panics.
func FuzzRequest(f *testing.F) {
	f.Add("tools/call", `{"name":"a_x"}`)
	f.Add("tools/list", `{"cursor":"eyJhIjoiMSJ9"}`)
	f.Add("tools/list", `{"cursor":"e30"}`)
	f.Add("resources/read", `{"uri":"a+file:///x"}`)
	f.Add("completion/complete", `{"ref":{"type":"ref/prompt","name":"b_p"},"argument":{"name":"n","value":"v"}}`)
	f.Add("prompts/get", `{"name":"a_"}`)
	f.Add("tools/call", `{"name":"a_x","arguments":[1,2]}`)
	a := &fakeServer{tools: []string{"x"}, pageSize: 1}
	b := &fakeServer{tools: []string{"y", "z"}, pageSize: 1}
	r, _ := NewRegistry(Options{}, []Spec{{Name: "a", Dial: a.dial}, {Name: "b", Dial: b.dial}})
	cl := connect(f, r)
	f.Fuzz(func(t *testing.T, method, params string) {
		if !json.Valid([]byte(params)) || !strings.HasPrefix(strings.TrimSpace(params), "{") {
			return
		}
		m, err := json.Marshal(method)
		if err != nil {
			return
		}
		req, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":"f","method":` + string(m) + `,"params":` + params + `}`))
		if err != nil {
			return
		}
		cl.t = t
		cl.mu.Lock()
		delete(cl.got, `"f"`)
		cl.mu.Unlock()
		cl.c.Send(context.Background(), req)
		deadline := time.After(5 * time.Second)
		for {
			cl.mu.Lock()
			got := cl.got[`"f"`]
			cl.mu.Unlock()
			if got != nil {
				return
			}
			select {
			case <-time.After(time.Millisecond):
			case <-deadline:
				t.Fatalf("no answer to %s %s", method, params)
			}
		}
	})
}

// An upstream that asks the client more than it answers gets errors past
// the bound, instead of growing the table of requests waiting.
func TestAsksBounded(t *testing.T) {
	asker := &fakeServer{tools: []string{"x"}, pageSize: 10, asks: maxAsks + 50}
	r := registry(t, Options{}, map[string]*fakeServer{"a": asker}, "a")
	cl := connect(t, r)
	cl.call("tools/call", `{"name":"x"}`)
	deadline := time.Now().Add(5 * time.Second)
	for asker.refused.Load() < 50 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := asker.refused.Load(); got != 50 {
		t.Errorf("%d requests refused, want 50", got)
	}
	cl.mu.Lock()
	asked := 0
	for _, n := range cl.note {
		if n.Method == "roots/list" {
			asked++
		}
	}
	cl.mu.Unlock()
	if asked != maxAsks {
		t.Errorf("%d requests reached the client, want %d", asked, maxAsks)
	}
}

// A removed upstream's call in flight is answered: the upstream is closed
// once its calls are over, not before.
func TestRemovedUpstreamDrains(t *testing.T) {
	hold := make(chan struct{})
	a := &fakeServer{tools: []string{"x"}, pageSize: 10}
	b := &fakeServer{tools: []string{"slow"}, pageSize: 10, hold: hold}
	r := registry(t, Options{Drain: 10 * time.Second}, map[string]*fakeServer{"a": a, "b": b}, "a", "b")
	cl := connect(t, r)
	answered := make(chan *jsonrpc.Message, 1)
	go func() { answered <- cl.call("tools/call", `{"name":"b_slow"}`) }()
	time.Sleep(100 * time.Millisecond) // the call is in flight
	if err := r.Update([]Spec{{Name: "a", Dial: a.dial}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	close(hold)
	select {
	case m := <-answered:
		if !strings.Contains(string(m.Result), "called slow") {
			t.Errorf("the drained call: %s", m.Raw)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the removed upstream's call was never answered")
	}
}

// Resource templates get their upstream's prefix; a URI read from one
// goes to that upstream as the upstream wrote it and comes back
// prefixed; a completion's reference finds its upstream.
func TestTemplatesReadsCompletions(t *testing.T) {
	a := &fakeServer{tools: []string{"x"}, pageSize: 10}
	b := &fakeServer{tools: []string{"y"}, pageSize: 10}
	r := registry(t, Options{}, map[string]*fakeServer{"a": a, "b": b}, "a", "b")
	cl := connect(t, r)
	tl := cl.call("resources/templates/list", `{}`)
	if !strings.Contains(string(tl.Result), `"a+file:///{path}"`) || !strings.Contains(string(tl.Result), `"b+file:///{path}"`) {
		t.Errorf("templates: %s", tl.Result)
	}
	rd := cl.call("resources/read", `{"uri":"b+file:///notes"}`)
	if !strings.Contains(string(rd.Result), `"uri":"b+file:///notes"`) || !strings.Contains(string(rd.Result), `read file:///notes`) {
		t.Errorf("read: %s", rd.Raw)
	}
	cp := cl.call("completion/complete", `{"ref":{"type":"ref/prompt","name":"b_greet"},"argument":{"name":"n","value":""}}`)
	if !strings.Contains(string(cp.Result), `"ref greet"`) {
		t.Errorf("completion: %s", cp.Raw)
	}
	cp = cl.call("completion/complete", `{"ref":{"type":"ref/resource","uri":"a+file:///{path}"},"argument":{"name":"path","value":""}}`)
	if !strings.Contains(string(cp.Result), `"ref file:///{path}"`) {
		t.Errorf("completion of a template: %s", cp.Raw)
	}
	if nf := cl.call("resources/read", `{"uri":"c+file:///x"}`); nf.ErrorCode() != -32002 {
		t.Errorf("an unknown upstream's URI: %s", nf.Raw)
	}
}

// An upstream's own -32000 error passes as it is: only the errors Spillway
// makes for a connection it lost name the upstream as unavailable.
func TestUpstreamsOwnErrorPasses(t *testing.T) {
	a := &fakeServer{tools: []string{"oops"}, pageSize: 10}
	b := &fakeServer{tools: []string{"y"}, pageSize: 10}
	r := registry(t, Options{}, map[string]*fakeServer{"a": a, "b": b}, "a", "b")
	cl := connect(t, r)
	m := cl.call("tools/call", `{"name":"a_oops"}`)
	if string(m.Error) != `{"code":-32000,"message":"the tool's own failure"}` {
		t.Errorf("the upstream's error became %s", m.Error)
	}
}

// A stateless-era client (the stdio face passes its messages as they are):
// server/discover connects the upstreams with the capabilities of its
// _meta and is answered from them; its results are marked complete; the
// envelope's _meta does not reach the upstreams.
func TestStatelessClient(t *testing.T) {
	a := &fakeServer{tools: []string{"x"}, pageSize: 10}
	b := &fakeServer{tools: []string{"y"}, pageSize: 10}
	r := registry(t, Options{}, map[string]*fakeServer{"a": a, "b": b}, "a", "b")
	c, _ := r.Dial(context.Background())
	defer c.Close()
	cl := &client{t: t, c: c, got: map[string]*jsonrpc.Message{}, wake: make(chan struct{}, 1)}
	go func() {
		for m := range c.Recv() {
			cl.mu.Lock()
			cl.got[string(m.ID)] = m
			cl.mu.Unlock()
		}
	}()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
	d := cl.call("server/discover", `{`+meta+`}`)
	if !strings.Contains(string(d.Result), `"supportedVersions":["2026-07-28"]`) || !strings.Contains(string(d.Result), `"resultType":"complete"`) {
		t.Fatalf("server/discover: %s", d.Raw)
	}
	l := cl.call("tools/list", `{`+meta+`}`)
	if !strings.Contains(string(l.Result), `"a_x"`) || !strings.Contains(string(l.Result), `"resultType":"complete"`) {
		t.Errorf("tools/list: %s", l.Raw)
	}
	call := cl.call("tools/call", `{"name":"b_y",`+meta+`}`)
	if !strings.Contains(string(call.Result), `called y`) || !strings.Contains(string(call.Result), `"resultType":"complete"`) {
		t.Errorf("tools/call: %s", call.Raw)
	}
}

// A call to a tool the upstream's lists never named does not list the
// upstream again at every call: a client cannot turn its calls into
// whole listings of the upstream.
func TestLearnToolBounded(t *testing.T) {
	a := &fakeServer{tools: []string{"x"}, pageSize: 1}
	b := &fakeServer{tools: []string{"y"}, pageSize: 1}
	var known sync.Map
	r, err := NewRegistry(Options{}, []Spec{
		{Name: "a", Dial: a.dial, Learn: func(res []byte) {
			var l struct{ Tools []struct{ Name string } }
			json.Unmarshal(res, &l)
			for _, tl := range l.Tools {
				known.Store(tl.Name, true)
			}
		}, Knows: func(name string) bool { _, ok := known.Load(name); return ok }},
		{Name: "b", Dial: b.dial},
	})
	if err != nil {
		t.Fatal(err)
	}
	cl := connect(t, r)
	for range 5 {
		cl.call("tools/call", `{"name":"a_missing"}`)
	}
	if n := a.lists.Load(); n != 1 {
		t.Errorf("5 calls of an unknown tool listed the upstream %d times, want 1", n)
	}
	if r := cl.call("tools/call", `{"name":"a_x"}`); !strings.Contains(string(r.Result), "called x") {
		t.Errorf("a_x: %s", r.Raw)
	}
}

// Under PrefixCollision a tool another upstream has but this client may
// not see (its deny list) collides with nothing: the name stays as it is.
func TestCollisionIgnoresHiddenTools(t *testing.T) {
	a := &fakeServer{tools: []string{"same"}, pageSize: 10}
	b := &fakeServer{tools: []string{"same", "other"}, pageSize: 10}
	r, err := NewRegistry(Options{Prefix: PrefixCollision}, []Spec{
		{Name: "a", Dial: a.dial}, {Name: "b", Dial: b.dial, Deny: []string{"same"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := connect(t, r).listAll(); !slices.Equal(got, []string{"same", "other"}) {
		t.Errorf("listed %v, want [same other]", got)
	}
}
