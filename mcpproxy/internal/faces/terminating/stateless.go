package terminating

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// queue is one stateless request's bounded mailbox. Deliver never blocks:
// past the bound the queue is cut, and the request with it.
type queue struct {
	max int

	mu    sync.Mutex
	items []item
	wake  chan struct{}
	cut   bool
}

func newQueue(max int) *queue { return &queue{max: max, wake: make(chan struct{}, 1)} }

func (q *queue) Deliver(m *jsonrpc.Message, tag any) {
	c, _ := tag.(*ownmethods.Call)
	q.mu.Lock()
	if !q.cut {
		if len(q.items) >= q.max {
			q.cut, q.items = true, nil
		} else {
			q.items = append(q.items, item{m: m, call: c})
		}
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns what waits, and whether the queue was cut.
func (q *queue) take() ([]item, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items, q.cut
}

// statelessSupervisor makes the connection kept under key for stateless
// requests: a tenant's own, prepared best-effort (see Pipeline), or a
// bridged one, initialized with the capabilities its key declares.
func (f *Face) statelessSupervisor(key string) *Supervisor {
	tenant, caps := keyTenant(key), keyCaps(key)
	// The connection serves one tenant: a tool sees a client's own
	// progress token unless another request in flight uses it.
	s := &Supervisor{Log: f.log, Exclusive: true,
		Dial: func(ctx context.Context) (mux.Conn, error) { return f.o.Dial(WithTenant(ctx, tenant)) },
		Init: func(ctx context.Context, m *mux.Mux) error {
			return Pipeline(m, StatelessInit, Initialized)
		}}
	if caps != nil {
		s.Init = func(ctx context.Context, m *mux.Mux) error {
			r, err := HandshakeResult(m, bridgeInit(caps), Initialized)
			if err != nil {
				if f.o.Eras != nil {
					f.o.Eras.Forget() // the upstream may have changed: learn it again
				}
				return err
			}
			f.ownMu.Lock()
			f.inits[tenant] = r // what the tenant's server/discover answers
			f.ownMu.Unlock()
			return nil
		}
	}
	s.OnServer = func(m *jsonrpc.Message) {
		if caps != nil && changeNotification(m) {
			f.notifyListeners(tenant, m)
			return
		}
		f.statelessServerMsg(s, m)
	}
	return s
}

// statelessServerMsg: the stateless era has no server-to-client requests
// (input-required results replace them). On a bridged connection that
// serves one call, the server's requests and log messages are that
// call's; anywhere else a server request is refused, and a notification
// that belongs to no request has no one to go to.
func (f *Face) statelessServerMsg(s *Supervisor, m *jsonrpc.Message) {
	sm := s.current()
	// A log message during the call is the call's (the stateless era
	// sends it on the call's stream); a change notification is not.
	if sm != nil && (m.IsRequest() || m.Method == "notifications/message") {
		// The upstream sent it on a call's own response stream.
		if sink, _ := sm.Caller(m.Related); sink != nil {
			sink.Deliver(m, nil)
			return
		}
	}
	if q := f.owner(sm); q != nil && (m.IsRequest() || m.Method == "notifications/message") {
		q.Deliver(m, nil)
		return
	}
	if m.IsRequest() {
		if sm != nil {
			refuseUpstream(sm, []*jsonrpc.Message{m}, "no client session to send this request to")
		}
		return
	}
	f.log.Debug("dropping a notification with no session", "method", m.Method)
}

// owner is the queue of the one call a bridged connection serves, or nil.
func (f *Face) owner(sm *mux.Mux) *queue {
	if sm == nil {
		return nil
	}
	f.ownMu.Lock()
	defer f.ownMu.Unlock()
	return f.owners[sm]
}

// setOwner gives sm's server messages to q (nil: to no one).
func (f *Face) setOwner(sm *mux.Mux, q *queue) {
	f.ownMu.Lock()
	defer f.ownMu.Unlock()
	if q == nil {
		delete(f.owners, sm)
	} else {
		f.owners[sm] = q
	}
}

// writeError answers a stateless request with a JSON-RPC error.
func writeError(w http.ResponseWriter, m *jsonrpc.Message, code int, msg string) {
	httpx.WriteReply(w, mcpheader.FirstStateless, jsonrpc.ErrorResponse(m.ID, code, msg))
}

func (f *Face) statelessPOST(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, msgs []*jsonrpc.Message, body []byte) {
	ctx := r.Context()
	var single *jsonrpc.Message
	if len(msgs) == 1 && msgs[0].IsRequest() {
		single = msgs[0]
	}
	// asking: a bridged call whose server requests reach its client;
	// exclusive: one that needs a session of its own for that.
	key, asking, exclusive, bridge := plainKey(rq.Tenant), false, false, f.bridging(ctx)
	if bridge {
		if single != nil {
			if why := notBridged(single); why != "" {
				writeError(w, single, jsonrpc.CodeMethodNotFound, why)
				return
			}
			if single.Method == "subscriptions/listen" {
				if caps, _, err := bridgeCaps(single); err == nil {
					f.listen(w, r, rq, single, bridgeKey(rq.Tenant, caps))
					return
				}
			}
			if single.Method == "server/discover" {
				f.discover(ctx, w, rq, single)
				return
			}
			if tok := jsonrpc.StringMember(single.Params, "requestState"); tok != "" {
				f.resume(w, r, rq, single, tok)
				return
			}
		}
		caps, asks, err := bridgeCaps(msgs[0])
		if err != nil {
			writeError(w, msgs[0], jsonrpc.CodeInvalidParams, err.Error())
			return
		}
		key, asking = bridgeKey(rq.Tenant, caps), asks && single != nil
		exclusive = asking && !f.o.RelatedStreams
	}
	get := f.shared.Get
	if exclusive {
		get = func(ctx context.Context, key string) (*mux.Mux, func(), error) {
			return f.shared.GetFree(ctx, key, f.o.BridgeSessions)
		}
	}
	sm, release, err := get(ctx, key)
	if err != nil {
		release()
		if errors.Is(err, ErrAllBusy) {
			if ctx.Err() == nil {
				writeError(w, msgs[0], jsonrpc.CodeInternalError, err.Error()+"; try again when a call is over")
			}
			return
		}
		f.log.Warn("upstream unavailable", "tenant", rq.Tenant, "err", err)
		httpx.UpstreamDown(w, body)
		return
	}
	if single != nil && f.o.CheckStateless != nil {
		check := f.o.CheckStateless
		if bridge { // a session-era server binds no Mcp-Param-* headers
			check = checkHeaders
		}
		if e := check(ctx, r, rq, single, sm); e != nil {
			release()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(e.Raw)
			return
		}
	}
	if single != nil && single.Method == "resources/stream" {
		defer release()
		f.serveStream(w, r, rq, single)
		return
	}
	q := newQueue(f.o.Queue)
	p := &parked{tenant: rq.Tenant, q: q, scope: sm.NewScope(), sm: sm, release: release}
	if asking {
		p.method = single.Method
	}
	if exclusive {
		f.setOwner(sm, q)
	}
	kept := false
	// Whatever ends this request (answered, client gone, cut), what is
	// still in flight upstream is cancelled, unless it was parked to wait
	// for the client's input.
	defer func() {
		if !kept {
			f.unpark(p, "client disconnected")
		}
	}()
	want := 0
	var bc *bridgeCall
	if bridge {
		bc = &bridgeCall{methods: map[string]string{}, sm: sm}
		if asking {
			bc.park = f.parker(p, single.ID, &kept)
		}
	}
	for _, m := range msgs {
		switch {
		case m.IsRequest():
			want++
			if bc != nil {
				bc.methods[jsonrpc.Key(m.ID)] = m.Method
			}
			reply, c := f.o.Methods.Before(ctx, rq, m)
			if reply != nil {
				q.Deliver(reply, nil)
				continue
			}
			if c != nil && m.Method == "tools/call" {
				c.List = ListTools(sm, m, !bridge) // a bridged upstream takes no envelope
			}
			up := m
			if bridge {
				up = stripEnvelope(m)
			}
			if _, err := p.scope.Call(ctx, up, q, c); err != nil {
				q.Deliver(callError(m, err), nil)
			}
		case m.IsNotification():
			p.scope.Notify(ctx, m)
		}
	}
	if want == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	f.respondStateless(ctx, w, r, q, want, bc)
}

// unpark ends a bridged call's hold on its connection: what is still in
// flight upstream is cancelled and the connection serves others.
func (f *Face) unpark(p *parked, reason string) {
	f.setOwner(p.sm, nil)
	p.scope.Close(reason)
	p.release()
}

// parker returns the park of a bridged call answered to the client as id:
// the server requests become an input_required result, and the call waits
// upstream, parked under the result's requestState, for the client's
// retry (*kept tells the caller not to end it).
func (f *Face) parker(p *parked, id []byte, kept *bool) func(ins []*jsonrpc.Message) *jsonrpc.Message {
	return func(ins []*jsonrpc.Message) *jsonrpc.Message {
		tok := newToken()
		reply, asked := inputRequired(id, ins, tok)
		p.asked = asked
		if err := f.parks.put(tok, p, func(p *parked) { f.unpark(p, "the client did not answer the server's requests in time") }); err != nil {
			refuseUpstream(p.sm, ins, err.Error())
			return nil
		}
		*kept = true
		return reply
	}
}

// resume is a client's retry of a bridged call parked under tok: its
// inputResponses go to the upstream requests they answer, and the call's
// answer (or the server's next requests) to the client.
func (f *Face) resume(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, m *jsonrpc.Message, tok string) {
	p := f.parks.take(tok, rq.Tenant)
	if p == nil {
		writeError(w, m, jsonrpc.CodeInvalidParams, "requestState is unknown, expired or already used")
		return
	}
	kept := false
	defer func() {
		if !kept {
			f.unpark(p, "client disconnected")
		}
	}()
	if m.Method != p.method {
		writeError(w, m, jsonrpc.CodeInvalidParams, "requestState belongs to a "+p.method+" request, not "+m.Method)
		return
	}
	ctx := r.Context()
	answerUpstream(ctx, p, jsonrpc.RawMember(m.Params, "inputResponses"))
	bc := &bridgeCall{id: m.ID, method: m.Method, sm: p.sm, park: f.parker(p, m.ID, &kept)}
	f.respondStateless(ctx, w, r, p.q, 1, bc)
}

// discover answers server/discover for a session-era upstream from its
// initialize result, with the proxy's own capabilities added.
func (f *Face) discover(ctx context.Context, w http.ResponseWriter, rq ownmethods.Request, m *jsonrpc.Message) {
	init, err := f.upstreamInit(ctx, rq, m)
	if err != nil {
		f.log.Warn("upstream unavailable", "tenant", rq.Tenant, "err", err)
		writeError(w, m, jsonrpc.CodeUpstream, "upstream MCP server unreachable")
		return
	}
	reply, c := f.o.Methods.Before(ctx, rq, m)
	if reply == nil {
		reply = f.o.Methods.After(ctx, c, jsonrpc.Response(m.ID, discoverResult(init)))
	}
	httpx.WriteReply(w, mcpheader.FirstStateless, reply)
}

// upstreamInit is the upstream's answer to the initialize of the
// tenant's latest bridged session; before any, the tenant's session of
// m's capabilities is started to ask it.
func (f *Face) upstreamInit(ctx context.Context, rq ownmethods.Request, m *jsonrpc.Message) ([]byte, error) {
	known := func() []byte {
		f.ownMu.Lock()
		defer f.ownMu.Unlock()
		return f.inits[rq.Tenant]
	}
	if r := known(); r != nil {
		return r, nil
	}
	caps, _, err := bridgeCaps(m)
	if err != nil {
		caps = []byte(`{}`)
	}
	_, release, err := f.shared.Get(ctx, bridgeKey(rq.Tenant, caps))
	release()
	if err != nil {
		return nil, err
	}
	if r := known(); r != nil {
		return r, nil
	}
	return nil, errors.New("the upstream's session has no initialize result")
}

// headerGrace is how long a stateless call with an event stream may stay
// silent before its response headers go: long enough for a quick error
// to keep its HTTP status, short against any client's header timeout.
const headerGrace = time.Second

// respondStateless writes what arrives for one stateless request until
// every request is answered. When the first thing to arrive completes the
// request it goes as plain JSON, so an error can carry its HTTP status;
// otherwise the response becomes an event stream.
//
// bc, for a bridged request, makes each response one of the stateless
// era and turns server requests into an input_required result (bc.park);
// nil, or a park that cannot, refuses them upstream.
func (f *Face) respondStateless(ctx context.Context, w http.ResponseWriter, r *http.Request, q *queue, want int, bc *bridgeCall) {
	var sw *sse.Writer
	var out [][]byte // a JSON-only client's responses
	keep, stop := f.keepAlive()
	defer stop()
	var grace <-chan time.Time
	if wantsSSE(r) {
		t := time.NewTimer(headerGrace)
		defer t.Stop()
		grace = t.C
	}
	for want > 0 {
		items, cut := q.take()
		if cut {
			f.log.Warn("a stateless client fell behind its queue; cutting its request")
			return
		}
		var ins []*jsonrpc.Message // server requests
		for _, it := range items {
			m := it.m
			if m.IsRequest() {
				ins = append(ins, m)
				continue
			}
			if it.call != nil {
				m = f.o.Methods.After(ctx, it.call, m)
			}
			if m.IsResponse() {
				want--
				if bc != nil {
					m = bc.finish(m)
				}
			}
			if !wantsSSE(r) {
				if m.IsResponse() {
					out = append(out, m.Raw)
				}
				continue
			}
			if sw == nil && want == 0 && httpx.ErrorStatus(m) != http.StatusOK {
				// An error whose HTTP status must say what it is.
				httpx.WriteReply(w, mcpheader.FirstStateless, m)
				return
			}
			if sw == nil {
				sw = openEvents(w)
			}
			if sw.Write(sse.Event{Data: m.Raw, HasData: true}) != nil {
				return
			}
		}
		if len(ins) > 0 {
			var reply *jsonrpc.Message
			if bc != nil && bc.park != nil && want > 0 {
				reply = bc.park(ins)
			} else if bc != nil && bc.sm != nil {
				refuseUpstream(bc.sm, ins, "the call these requests belong to is over")
			}
			if reply != nil {
				switch {
				case !wantsSSE(r):
					out, want = append(out, reply.Raw), 0
				case sw == nil:
					httpx.WriteReply(w, mcpheader.FirstStateless, reply)
					return
				default:
					sw.Write(sse.Event{Data: reply.Raw, HasData: true})
					return
				}
			}
		}
		if want == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-f.closing:
			return
		case <-q.wake:
		case <-grace:
			// A silent call: headers now, so that no client's header
			// timeout fires (only a quick error keeps its HTTP status).
			if sw == nil {
				if sw = openEvents(w); sw.Flush() != nil {
					return
				}
			}
		case <-keep:
			if sw != nil && sw.Write(keepAliveEvent) != nil {
				return
			}
		}
	}
	if !wantsSSE(r) {
		if len(out) == 1 {
			m, _ := jsonrpc.DecodeMessage(out[0])
			httpx.WriteReply(w, mcpheader.FirstStateless, m)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		httpx.WriteMessages(w, out, true)
	}
}
