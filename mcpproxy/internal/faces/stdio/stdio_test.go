package stdio

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/ndjson"
)

// wait is how long a test waits for a message that must come.
const wait = 10 * time.Second

// client is the client's side of the face: the test writes to in and
// reads what the face sends from out.
type client struct {
	in  chan *jsonrpc.Message
	out chan *jsonrpc.Message
}

func newClient() *client {
	return &client{in: make(chan *jsonrpc.Message), out: make(chan *jsonrpc.Message, 64)}
}

func (c *client) Send(ctx context.Context, m *jsonrpc.Message) error {
	select {
	case c.out <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *client) Recv() <-chan *jsonrpc.Message { return c.in }

// send gives the face a message from the client.
func (c *client) send(t *testing.T, s string) {
	t.Helper()
	select {
	case c.in <- jsonrpc.MustDecode(s):
	case <-time.After(wait):
		t.Fatalf("the face does not read the client's %s", s)
	}
}

// next is the next message the face sends the client.
func (c *client) next(t *testing.T) *jsonrpc.Message {
	t.Helper()
	select {
	case m := <-c.out:
		return m
	case <-time.After(wait):
		t.Fatal("the client got nothing")
		return nil
	}
}

// none fails if the face sends the client anything within a short while.
func (c *client) none(t *testing.T) {
	t.Helper()
	select {
	case m := <-c.out:
		t.Fatalf("the client got %s", m.Raw)
	case <-time.After(50 * time.Millisecond):
	}
}

// conn is an upstream connection the test plays the server of: what the
// mux sends arrives on sent, what the test puts on recv reaches the mux.
type conn struct {
	sent   chan *jsonrpc.Message
	recv   chan *jsonrpc.Message
	once   sync.Once
	closed chan struct{}
}

func newConn() *conn {
	return &conn{sent: make(chan *jsonrpc.Message, 64), recv: make(chan *jsonrpc.Message, 64), closed: make(chan struct{})}
}

func (c *conn) Send(ctx context.Context, m *jsonrpc.Message) error {
	select {
	case c.sent <- m:
		return nil
	case <-c.closed:
		return mux.ErrClosed
	}
}
func (c *conn) Recv() <-chan *jsonrpc.Message { return c.recv }
func (c *conn) Err() error                    { return nil }
func (c *conn) Close() error {
	c.once.Do(func() { close(c.closed); close(c.recv) })
	return nil
}

// next is the next message the upstream got.
func (c *conn) next(t *testing.T) *jsonrpc.Message {
	t.Helper()
	select {
	case m := <-c.sent:
		return m
	case <-time.After(wait):
		t.Fatal("the upstream got nothing")
		return nil
	}
}

// answer sends the response to req, as the upstream numbered it.
func (c *conn) answer(req *jsonrpc.Message, result string) {
	c.recv <- jsonrpc.Response(req.ID, []byte(result))
}

// running is a face serving a test client in front of a test upstream.
type running struct {
	face   *Face
	client *client
	up     *conn
	done   chan error // Serve's error, once it returned
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// serve runs a face of o (Methods and Logger filled in) with up as its
// upstream; nil up: a Fixed upstream on a fresh test connection.
func serve(t *testing.T, o Options, up Upstream) *running {
	t.Helper()
	if o.Methods == nil {
		o.Methods = ownmethods.New(ownmethods.Options{Logger: quiet()})
	}
	o.Logger = quiet()
	r := &running{face: New(o), client: newClient(), up: newConn(), done: make(chan error, 1)}
	if up == nil {
		up = Fixed{M: mux.NewExclusive(r.up, r.face.OnServer, quiet())}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { r.done <- r.face.Serve(ctx, r.client, up) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(wait):
			t.Error("Serve did not return once its context ended")
		}
	})
	return r
}

// A request goes upstream (under an id the mux chose) and its answer
// reaches the client under the client's own id.
func TestStdioRequestAnswered(t *testing.T) {
	r := serve(t, Options{}, nil)
	r.client.send(t, `{"jsonrpc":"2.0","id":"a","method":"x/echo","params":{"v":1}}`)
	req := r.up.next(t)
	if req.Method != "x/echo" || string(req.Params) != `{"v":1}` {
		t.Fatalf("upstream got %s", req.Raw)
	}
	r.up.answer(req, `{"ok":true}`)
	got := r.client.next(t)
	if string(got.ID) != `"a"` || string(got.Result) != `{"ok":true}` {
		t.Fatalf("client got %s", got.Raw)
	}
}

// A client's notification reaches the upstream unchanged, and one the
// upstream sends on its own reaches the client.
func TestStdioNotificationsPass(t *testing.T) {
	r := serve(t, Options{}, nil)
	r.client.send(t, `{"jsonrpc":"2.0","id":1,"method":"x/first"}`) // the client's namespace starts on its first request
	r.up.answer(r.up.next(t), `{}`)
	r.client.next(t)
	r.client.send(t, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	if n := r.up.next(t); !n.IsNotification() || n.Method != "notifications/roots/list_changed" {
		t.Fatalf("upstream got %s", n.Raw)
	}
	r.up.recv <- jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	if n := r.client.next(t); n.Method != "notifications/tools/list_changed" {
		t.Fatalf("client got %s", n.Raw)
	}
}

// Over the real line transport (as ServeStdio wires it), a line that is
// not JSON gets a parse error with id null, and the face goes on to
// answer the next request.
func TestStdioMalformedLine(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := ndjson.NewConn(inR, outW, ndjson.Options{Peer: "client", Expand: true, Answer: true, Logger: quiet()})
	defer c.Close()
	face := New(Options{Methods: ownmethods.New(ownmethods.Options{Logger: quiet()}), Logger: quiet()})
	up := newConn()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- face.Serve(ctx, c, Fixed{M: mux.NewExclusive(up, face.OnServer, quiet())}) }()
	defer func() { cancel(); inW.Close(); outR.Close(); <-done }()

	go func() {
		io.WriteString(inW, "this is not json\n")
		io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"x/echo"}`+"\n")
	}()
	lines := bufio.NewScanner(outR)
	read := func() *jsonrpc.Message {
		t.Helper()
		got := make(chan *jsonrpc.Message, 1)
		go func() {
			if lines.Scan() {
				got <- jsonrpc.MustDecode(lines.Text())
			}
			close(got)
		}()
		select {
		case m, ok := <-got:
			if !ok {
				t.Fatal("the client's output ended")
			}
			return m
		case <-time.After(wait):
			t.Fatal("nothing written to the client")
			return nil
		}
	}
	parseErr := read()
	if parseErr.ErrorCode() != jsonrpc.CodeParseError || string(parseErr.ID) != "null" {
		t.Fatalf("a malformed line got %s", parseErr.Raw)
	}
	up.answer(up.next(t), `{"still":"serving"}`)
	if m := read(); string(m.ID) != "2" || string(m.Result) != `{"still":"serving"}` {
		t.Fatalf("the next request got %s", m.Raw)
	}
}

// A second request with the id of one in flight is refused with a clear
// error and never reaches the upstream; the first is still answered.
func TestStdioDuplicateID(t *testing.T) {
	r := serve(t, Options{}, nil)
	r.client.send(t, `{"jsonrpc":"2.0","id":7,"method":"x/slow"}`)
	first := r.up.next(t)
	r.client.send(t, `{"jsonrpc":"2.0","id":7,"method":"x/again"}`)
	dup := r.client.next(t)
	if string(dup.ID) != "7" || dup.ErrorCode() != jsonrpc.CodeInvalidRequest || !strings.Contains(string(dup.Error), "already in flight") {
		t.Fatalf("the duplicate got %s", dup.Raw)
	}
	select {
	case m := <-r.up.sent:
		t.Fatalf("the duplicate reached the upstream: %s", m.Raw)
	default:
	}
	r.up.answer(first, `{"n":1}`)
	if got := r.client.next(t); string(got.ID) != "7" || string(got.Result) != `{"n":1}` {
		t.Fatalf("the first request got %s", got.Raw)
	}
}

// upstream is an Upstream of one test connection that counts Close and
// may fail or panic in Get.
type upstream struct {
	m      *mux.Mux
	fail   atomic.Pointer[error]
	panics atomic.Bool
	closes atomic.Int32
}

func (u *upstream) Get(context.Context) (*mux.Mux, error) {
	if u.panics.Swap(false) {
		panic("a bug in the upstream's supervisor")
	}
	if err := u.fail.Load(); err != nil {
		return nil, *err
	}
	return u.m, nil
}

func (u *upstream) Close() {
	u.closes.Add(1)
	u.m.Close()
}

// serveUpstream is serve with an upstream the test controls.
func serveUpstream(t *testing.T, o Options) (*running, *upstream) {
	t.Helper()
	u := &upstream{}
	c := newConn()
	var face atomic.Pointer[Face]
	u.m = mux.NewExclusive(c, func(m *jsonrpc.Message) { face.Load().OnServer(m) }, quiet())
	r := serve(t, o, u)
	face.Store(r.face)
	r.up = c
	return r, u
}

// The client's input ends while a call is in flight: Serve returns, and
// the upstream is closed (the call with it).
func TestStdioClientClosesMidCall(t *testing.T) {
	r, u := serveUpstream(t, Options{})
	r.client.send(t, `{"jsonrpc":"2.0","id":1,"method":"x/slow"}`)
	r.up.next(t)
	close(r.client.in)
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Serve at the end of input: %v", err)
		}
		r.done <- err // for the cleanup
	case <-time.After(wait):
		t.Fatal("Serve did not return at the end of the client's input")
	}
	if u.closes.Load() != 1 {
		t.Errorf("upstream closed %d times, want 1", u.closes.Load())
	}
	select {
	case <-r.up.closed:
	case <-time.After(wait):
		t.Error("the upstream connection is still open")
	}
}

// Responses go to the client in the order the upstream sends them, and a
// response that is rewritten (tools/call) still follows its own progress
// notifications.
func TestStdioResponsesInOrder(t *testing.T) {
	r := serve(t, Options{}, nil)
	var reqs []*jsonrpc.Message
	for _, id := range []string{"1", "2", "3", "4"} {
		r.client.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"x/echo"}`)
		reqs = append(reqs, r.up.next(t))
	}
	order := []int{2, 0, 3, 1}
	for _, i := range order {
		r.up.answer(reqs[i], `{}`)
	}
	for _, i := range order {
		if got, want := string(r.client.next(t).ID), string(rune('1'+i)); got != want {
			t.Fatalf("client got id %s, want %s (the upstream's order)", got, want)
		}
	}

	r.client.send(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"p"}}}`)
	call := r.up.next(t)
	r.up.recv <- jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)
	r.up.answer(call, `{"content":[{"type":"text","text":"done"}]}`)
	if p := r.client.next(t); p.Method != jsonrpc.MethodProgress || string(jsonrpc.NotifiedToken(p)) != `"p"` {
		t.Fatalf("first to the client: %s, want the progress notification", p.Raw)
	}
	if resp := r.client.next(t); string(resp.ID) != "9" || !strings.Contains(string(resp.Result), "done") {
		t.Fatalf("then: %s, want the call's result", resp.Raw)
	}
}

// An upstream that cannot be had answers a request with an error naming
// why and drops a notification; the face goes on serving, and a panic
// while handling a request answers it with an error too.
func TestStdioUpstreamFailures(t *testing.T) {
	r, u := serveUpstream(t, Options{})
	down := errors.New("child exited")
	u.fail.Store(&down)
	r.client.send(t, `{"jsonrpc":"2.0","id":1,"method":"x/echo"}`)
	got := r.client.next(t)
	if got.ErrorCode() != jsonrpc.CodeUpstream || !strings.Contains(string(got.Error), "child exited") {
		t.Fatalf("with the upstream down: %s", got.Raw)
	}
	r.client.send(t, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	r.client.none(t)

	u.fail.Store(nil)
	u.panics.Store(true)
	r.client.send(t, `{"jsonrpc":"2.0","id":2,"method":"x/echo"}`)
	if got := r.client.next(t); string(got.ID) != "2" || got.ErrorCode() != jsonrpc.CodeInternalError {
		t.Fatalf("a request whose handling panicked: %s", got.Raw)
	}

	r.client.send(t, `{"jsonrpc":"2.0","id":3,"method":"x/echo"}`)
	r.up.answer(r.up.next(t), `{}`)
	if got := r.client.next(t); string(got.ID) != "3" || got.Result == nil {
		t.Fatalf("after recovering: %s", got.Raw)
	}
}

// resources/stream needs HTTP: over stdio it gets SEP-2532's error at
// once, and the upstream never sees it.
func TestStdioResourcesStream(t *testing.T) {
	r := serve(t, Options{}, nil)
	r.client.send(t, `{"jsonrpc":"2.0","id":5,"method":"resources/stream","params":{"uri":"file:///x"}}`)
	got := r.client.next(t)
	if got.ErrorCode() != codeNotStreamable || !strings.Contains(string(got.Error), "needs HTTP") {
		t.Fatalf("client got %s", got.Raw)
	}
	select {
	case m := <-r.up.sent:
		t.Fatalf("the upstream got %s", m.Raw)
	case <-time.After(50 * time.Millisecond):
	}
}

// Past MaxMessage a response becomes an error saying so, and a
// notification is dropped; smaller messages pass.
func TestStdioMaxMessage(t *testing.T) {
	r := serve(t, Options{MaxMessage: 200}, nil)
	r.client.send(t, `{"jsonrpc":"2.0","id":1,"method":"x/big"}`)
	r.up.answer(r.up.next(t), `{"text":"`+strings.Repeat("x", 300)+`"}`)
	got := r.client.next(t)
	if string(got.ID) != "1" || got.ErrorCode() != jsonrpc.CodeInternalError || !strings.Contains(string(got.Error), "over the 200 bytes") {
		t.Fatalf("an oversized response became %s", got.Raw)
	}
	r.up.recv <- jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("y", 300) + `"}}`)
	r.up.recv <- jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"notifications/small"}`)
	if n := r.client.next(t); n.Method != "notifications/small" {
		t.Fatalf("after an oversized notification the client got %s", n.Raw)
	}
}

// A client's cancellation of its subscriptions/listen is answered by the
// face (the final response, naming the subscription), passed upstream,
// and the upstream's own late answer to the listen is dropped.
func TestStdioListenCancelled(t *testing.T) {
	r := serve(t, Options{}, nil)
	r.client.send(t, `{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{}}`)
	listen := r.up.next(t)
	r.client.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`)
	if c := r.up.next(t); c.Method != jsonrpc.MethodCancelled || string(jsonrpc.CancelledID(c)) != string(listen.ID) {
		t.Fatalf("upstream got %s, want the cancellation of %s", c.Raw, listen.ID)
	}
	end := r.client.next(t)
	if string(end.ID) != "9" || jsonrpc.StringMember(end.Result, "resultType") != "complete" ||
		string(jsonrpc.Path(end.Result, "_meta", jsonrpc.MetaSubscriptionID)) != "9" {
		t.Fatalf("the listen's final response: %s", end.Raw)
	}
	// The mux forgot the cancelled call; a response reaching the face
	// all the same (Deliver) is not the client's second answer.
	r.face.Deliver(jsonrpc.Response([]byte("9"), []byte(`{}`)), nil)
	r.client.none(t)
}

// answered reports (true) a response to drop once the face gave the
// listen's final response itself, once only; any other response goes.
func TestStdioAnswered(t *testing.T) {
	f := New(Options{Logger: quiet()})
	resp := jsonrpc.Response([]byte("4"), []byte(`{}`))
	if f.answered(resp) {
		t.Fatal("a response to no listen is dropped")
	}
	f.listenOpened(jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen"}`))
	if f.answered(resp) {
		t.Fatal("the upstream's answer to an open listen is dropped")
	}
	f.listenOpened(jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen"}`))
	f.listenCancelled(jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`))
	if it := <-f.out; string(it.m.ID) != "4" {
		t.Fatalf("the face's final response: %s", it.m.Raw)
	}
	if !f.answered(resp) {
		t.Fatal("the upstream's answer to a listen the face answered goes to the client")
	}
	if f.answered(resp) {
		t.Fatal("the listen is remembered after its response")
	}
}

// Replay sends a new upstream connection the client's initialize and
// initialized, as the client sent them; before an initialize, nothing.
func TestStdioReplay(t *testing.T) {
	r := serve(t, Options{}, nil)
	fresh := newConn()
	m := mux.NewExclusive(fresh, nil, quiet())
	defer m.Close()
	if err := r.face.Replay(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-fresh.sent:
		t.Fatalf("Replay before the handshake sent %s", got.Raw)
	default:
	}

	r.client.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"me"}}}`)
	r.up.answer(r.up.next(t), `{"protocolVersion":"2025-11-25","capabilities":{}}`)
	r.client.next(t)
	r.client.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r.up.next(t)

	replayed := make(chan error, 1)
	go func() { replayed <- r.face.Replay(context.Background(), m) }()
	init := fresh.next(t)
	if init.Method != "initialize" || jsonrpc.StringMember(jsonrpc.RawMember(init.Params, "clientInfo"), "name") != "me" {
		t.Fatalf("replayed %s, want the client's initialize", init.Raw)
	}
	fresh.answer(init, `{"protocolVersion":"2025-11-25","capabilities":{}}`)
	if n := fresh.next(t); n.Method != "notifications/initialized" {
		t.Fatalf("then %s, want notifications/initialized", n.Raw)
	}
	if err := <-replayed; err != nil {
		t.Fatal(err)
	}
}
