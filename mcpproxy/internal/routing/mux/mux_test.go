package mux

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// fakeConn is the upstream end of a Mux in tests: what the mux sends
// arrives on sent; what the test pushes on recv reaches the mux.
type fakeConn struct {
	sent chan *jsonrpc.Message
	recv chan *jsonrpc.Message
	once sync.Once
}

func newFake() *fakeConn {
	return &fakeConn{sent: make(chan *jsonrpc.Message, 4096), recv: make(chan *jsonrpc.Message, 16)}
}

func (f *fakeConn) Send(ctx context.Context, m *jsonrpc.Message) error {
	select {
	case f.sent <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (f *fakeConn) Recv() <-chan *jsonrpc.Message { return f.recv }
func (f *fakeConn) Err() error                    { return nil }
func (f *fakeConn) Close() error                  { f.once.Do(func() { close(f.recv) }); return nil }

// sink collects deliveries.
type sink struct {
	mu   sync.Mutex
	got  []*jsonrpc.Message
	tags []any
	ch   chan struct{}
}

func newSink() *sink { return &sink{ch: make(chan struct{}, 1<<16)} }

func (s *sink) Deliver(m *jsonrpc.Message, tag any) {
	s.mu.Lock()
	s.got = append(s.got, m)
	s.tags = append(s.tags, tag)
	s.mu.Unlock()
	s.ch <- struct{}{}
}

func (s *sink) wait(t *testing.T, n int) []*jsonrpc.Message {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-s.ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("waited for %d deliveries, got %d", n, i)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*jsonrpc.Message(nil), s.got...)
}

func msg(_ testing.TB, s string) *jsonrpc.Message { return jsonrpc.MustDecode(s) }

func TestSameIDsAndTokensInTwoScopes(t *testing.T) {
	fc := newFake()
	m := New(fc, nil, nil)
	defer m.Close()
	ctx := context.Background()
	a, b := m.NewScope(), m.NewScope()
	sa, sb := newSink(), newSink()
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"t"}}}`
	if _, err := a.Call(ctx, msg(t, req), sa, "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Call(ctx, msg(t, req), sb, "B"); err != nil {
		t.Fatal(err)
	}
	upA, upB := <-fc.sent, <-fc.sent
	if string(upA.ID) == string(upB.ID) || string(jsonrpc.ProgressToken(upA)) == string(jsonrpc.ProgressToken(upB)) {
		t.Fatalf("ids or tokens shared upstream: %s / %s", upA.Raw, upB.Raw)
	}
	// Progress for B's token, then B's response, then A's.
	fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`, jsonrpc.ProgressToken(upB)))
	fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"who":"B"}}`, upB.ID))
	fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"who":"A"}}`, upA.ID))
	gb := sb.wait(t, 2)
	ga := sa.wait(t, 1)
	if string(jsonrpc.NotifiedToken(gb[0])) != `"t"` || string(gb[1].ID) != "1" || jsonrpc.StringMember(gb[1].Result, "who") != "B" {
		t.Fatalf("B got %s / %s", gb[0].Raw, gb[1].Raw)
	}
	if len(ga) != 1 || string(ga[0].ID) != "1" || jsonrpc.StringMember(ga[0].Result, "who") != "A" || sa.tags[0] != "A" {
		t.Fatalf("A got %d messages: %s", len(ga), ga[0].Raw)
	}
}

func TestCancelStaysInItsScope(t *testing.T) {
	fc := newFake()
	m := New(fc, nil, nil)
	defer m.Close()
	ctx := context.Background()
	a, b := m.NewScope(), m.NewScope()
	if _, err := b.Call(ctx, msg(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`), newSink(), nil); err != nil {
		t.Fatal(err)
	}
	up := <-fc.sent
	// A cancels "its" request 7, which only B has: dropped, nothing sent.
	if err := a.Notify(ctx, msg(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)); err != nil {
		t.Fatal(err)
	}
	// B cancels its own 7: renamed to the upstream id.
	if err := b.Notify(ctx, msg(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"r"}}`)); err != nil {
		t.Fatal(err)
	}
	got := <-fc.sent
	if string(jsonrpc.CancelledID(got)) != string(up.ID) {
		t.Fatalf("cancel sent upstream: %s, want requestId %s", got.Raw, up.ID)
	}
	if n := b.InFlight(); n != 0 {
		t.Fatalf("%d calls still in flight after the client cancelled its only one", n)
	}
	select {
	case extra := <-fc.sent:
		t.Fatalf("unexpected upstream message %s", extra.Raw)
	default:
	}
}

func TestDuplicateIDAndDeadUpstream(t *testing.T) {
	fc := newFake()
	m := New(fc, nil, nil)
	ctx := context.Background()
	s := m.NewScope()
	k := newSink()
	req := msg(t, `{"jsonrpc":"2.0","id":"x","method":"ping"}`)
	if _, err := s.Call(ctx, req, k, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Call(ctx, req, k, nil); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("second call with the same id: %v", err)
	}
	m.Close()
	got := k.wait(t, 1)
	if got[0].ErrorCode() != jsonrpc.CodeUpstream || string(got[0].ID) != `"x"` {
		t.Fatalf("after the upstream died: %s", got[0].Raw)
	}
	if _, err := s.Call(ctx, msg(t, `{"jsonrpc":"2.0","id":2,"method":"ping"}`), k, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call on a dead mux: %v", err)
	}
}

func TestScopeCloseCancelsUpstream(t *testing.T) {
	fc := newFake()
	m := New(fc, nil, nil)
	defer m.Close()
	s := m.NewScope()
	s.Call(context.Background(), msg(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`), newSink(), nil)
	up := <-fc.sent
	s.Close("client disconnected")
	c := <-fc.sent
	if c.Method != jsonrpc.MethodCancelled || string(jsonrpc.CancelledID(c)) != string(up.ID) {
		t.Fatalf("close sent %s", c.Raw)
	}
	// A late response is dropped, not delivered to anyone.
	fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, up.ID))
}

func TestSubscriptionIDsRestored(t *testing.T) {
	fc := newFake()
	m := New(fc, nil, nil)
	defer m.Close()
	s := m.NewScope()
	k := newSink()
	s.Call(context.Background(), msg(t, `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{}}`), k, nil)
	up := <-fc.sent
	fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"u","_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}`, up.ID))
	fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}`, up.ID, up.ID))
	got := k.wait(t, 2)
	if string(jsonrpc.SubscriptionID(got[0])) != `"L"` {
		t.Fatalf("notification: %s", got[0].Raw)
	}
	if string(jsonrpc.Path(got[1].Result, "_meta", jsonrpc.MetaSubscriptionID)) != `"L"` || string(got[1].ID) != `"L"` {
		t.Fatalf("final response: %s", got[1].Raw)
	}
}

// TestConcurrentScopes: many clients with the same ids at once; each gets
// exactly its own answers. Run under -race.
func TestConcurrentScopes(t *testing.T) {
	fc := newFake()
	m := New(fc, nil, nil)
	defer m.Close()
	// The upstream echoes each request's params back as its result.
	go func() {
		for req := range fc.sent {
			if req.IsRequest() {
				fc.recv <- jsonrpc.Response(req.ID, req.Params)
			}
		}
	}()
	const clients, calls = 20, 200
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := m.NewScope()
			k := newSink()
			for i := 0; i < calls; i++ {
				req := msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"x","params":{"c":%d}}`, i, c))
				if _, err := s.Call(context.Background(), req, k, c); err != nil {
					t.Error(err)
					return
				}
			}
			got := k.wait(t, calls)
			for _, g := range got {
				if jsonrpc.RawMember(g.Result, "c") == nil || string(jsonrpc.RawMember(g.Result, "c")) != fmt.Sprint(c) {
					t.Errorf("client %d got %s", c, g.Raw)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// On a connection of one client, the tool sees the client's own progress
// token; a token already in flight, or one that looks like a minted one
// and is taken, is renamed; progress reaches each call with its own.
func TestExclusiveKeepsTokens(t *testing.T) {
	fc := newFake()
	m := NewExclusive(fc, nil, nil)
	defer m.Close()
	ctx := context.Background()
	sc := m.NewScope()
	s := newSink()
	call := func(id int, tok string) *jsonrpc.Message {
		t.Helper()
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":%s}}}`, id, tok)
		if _, err := sc.Call(ctx, msg(t, req), s, id); err != nil {
			t.Fatal(err)
		}
		return <-fc.sent
	}
	up1 := call(1, `10`)
	if got := string(jsonrpc.ProgressToken(up1)); got != `10` {
		t.Fatalf("the upstream saw token %s; the client sent 10", got)
	}
	up2 := call(2, `10`)      // the same token, in flight: renamed
	up3 := call(3, `"p4"`)    // the client's own, passed
	up4 := call(4, `"other"`) // minted for nobody yet: passes
	tok2 := string(jsonrpc.ProgressToken(up2))
	if tok2 == `10` || tok2 == `"p4"` || string(jsonrpc.ProgressToken(up3)) != `"p4"` || string(jsonrpc.ProgressToken(up4)) != `"other"` {
		t.Fatalf("tokens upstream: %s %s %s %s", jsonrpc.ProgressToken(up1), tok2, jsonrpc.ProgressToken(up3), jsonrpc.ProgressToken(up4))
	}
	for _, tok := range []string{`10`, tok2, `"p4"`} {
		fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`, tok))
	}
	got := s.wait(t, 3)
	for i, want := range []string{`10`, `10`, `"p4"`} {
		if tok := string(jsonrpc.NotifiedToken(got[i])); tok != want {
			t.Errorf("progress #%d reached the client as %s, want %s", i, tok, want)
		}
	}
}

// A shared connection renames every token, even one no other client uses.
func TestSharedRenamesTokens(t *testing.T) {
	fc := newFake()
	m := New(fc, nil, nil)
	defer m.Close()
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":10}}}`
	if _, err := m.NewScope().Call(context.Background(), msg(t, req), newSink(), nil); err != nil {
		t.Fatal(err)
	}
	if tok := string(jsonrpc.ProgressToken(<-fc.sent)); tok == `10` {
		t.Fatal("a shared connection passed a client's token")
	}
}

// Caller finds the sink and tag of a call in flight by the id it went
// upstream with (what a Streamable HTTP upstream's server request names in
// Related), and nothing once the call is answered.
func TestCaller(t *testing.T) {
	fc := newFake()
	m := New(fc, nil, nil)
	defer m.Close()
	s := newSink()
	if _, err := m.NewScope().Call(context.Background(), msg(t, `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{}}`), s, "tag"); err != nil {
		t.Fatal(err)
	}
	up := <-fc.sent
	if got, tag := m.Caller(up.ID); got != s || tag != "tag" {
		t.Fatalf("Caller(%s) = %v, %v", up.ID, got, tag)
	}
	if got, _ := m.Caller([]byte(`"c"`)); got != nil {
		t.Errorf("the client's own id found a call")
	}
	fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, up.ID))
	s.wait(t, 1)
	if got, _ := m.Caller(up.ID); got != nil {
		t.Errorf("an answered call is still found")
	}
}

// On an exclusive connection a progress notification for a token the mux
// minted, its call answered, reaches no one; one with a client's own
// token goes to onServer as before.
func TestLateProgressOfMintedToken(t *testing.T) {
	fc := newFake()
	server := make(chan *jsonrpc.Message, 4)
	m := NewExclusive(fc, func(n *jsonrpc.Message) { server <- n }, nil)
	defer m.Close()
	s := newSink()
	sc := m.NewScope()
	var ups []*jsonrpc.Message
	for _, id := range []int{1, 2} {
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"progressToken":"t"}}}`, id)
		if _, err := sc.Call(context.Background(), msg(t, req), s, nil); err != nil {
			t.Fatal(err)
		}
		ups = append(ups, <-fc.sent)
	}
	minted := jsonrpc.ProgressToken(ups[1])
	if string(jsonrpc.ProgressToken(ups[0])) != `"t"` || string(minted) == `"t"` {
		t.Fatalf("tokens upstream %s and %s", jsonrpc.ProgressToken(ups[0]), minted)
	}
	for _, up := range ups {
		fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, up.ID))
	}
	fc.recv <- msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`, minted))
	fc.recv <- msg(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`)
	s.wait(t, 2)
	if n := <-server; string(jsonrpc.NotifiedToken(n)) != `"t"` {
		t.Errorf("onServer got %s first; the minted token's late progress must be dropped", n.Raw)
	}
}
