package terminating

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
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
func (f *Face) statelessSupervisor(key string) *pool.Supervisor {
	tenant, caps := pool.KeyTenant(key), pool.KeyCaps(key)
	// The connection serves one tenant: a tool sees a client's own
	// progress token unless another request in flight uses it.
	s := &pool.Supervisor{Log: f.log, Exclusive: true,
		Dial: func(ctx context.Context) (mux.Conn, error) { return f.o.Dial(pool.WithTenant(ctx, tenant)) },
		Init: func(ctx context.Context, m *mux.Mux) error {
			return pool.Pipeline(m, pool.StatelessInit, pool.Initialized)
		}}
	if caps != nil {
		s.Init = func(ctx context.Context, m *mux.Mux) error {
			r, err := pool.HandshakeResult(m, bridgeInit(caps), pool.Initialized)
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

// statelessServerMsg routes a message the upstream sent on its own over a
// connection of stateless requests. The stateless era has no
// server-to-client requests (input-required results replace them), so a
// server request or log message goes to the call it belongs to: the one
// whose response stream carried it, or the one call a bridged connection
// serves. Any other server request is refused upstream, and any other
// notification dropped: it belongs to no request, so no one waits for it.
func (f *Face) statelessServerMsg(s *pool.Supervisor, m *jsonrpc.Message) {
	sm := s.Current()
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

// statelessCall is one stateless-era POST on its way upstream: what it
// carries, and how it reaches the upstream.
type statelessCall struct {
	rq     ownmethods.Request
	msgs   []*jsonrpc.Message
	single *jsonrpc.Message // the POST's one request; nil for anything else
	// bridge: the upstream speaks only the session era, and the call is
	// bridged to it (see bridge.go).
	bridge bool
	// key names the connection the call takes (see Tenants): the
	// tenant's own, or its bridged session of the declared capabilities.
	key string
	// asking: a bridged call whose server requests reach its client;
	// exclusive: one that needs a session of its own for that.
	asking, exclusive bool
}

// statelessPOST serves a POST of the stateless era (or a server/discover):
// each request in a namespace of its own on the tenant's connection, its
// answers written as they come (respondStateless).
func (f *Face) statelessPOST(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, msgs []*jsonrpc.Message, body []byte) {
	ctx := r.Context()
	sc := &statelessCall{rq: rq, msgs: msgs, key: pool.TenantKey(rq.Tenant), bridge: f.bridging(ctx)}
	if len(msgs) == 1 && msgs[0].IsRequest() {
		sc.single = msgs[0]
	}
	if sc.bridge && !f.planBridge(w, r, sc) {
		return
	}
	sm, release, ok := f.statelessConn(w, r, sc, body)
	if !ok {
		return
	}
	if sc.single != nil && sc.single.Method == "resources/stream" {
		defer release()
		f.serveStream(w, r, rq, sc.single)
		return
	}
	f.callStateless(w, r, sc, sm, release)
}

// planBridge answers what a bridged POST's single request asks of the
// proxy itself (an era it cannot bridge, a listen stream, server/discover,
// the retry of a parked call), and otherwise sets the connection the call
// takes. It reports whether the call goes on; if not, it has answered.
func (f *Face) planBridge(w http.ResponseWriter, r *http.Request, sc *statelessCall) bool {
	if single := sc.single; single != nil {
		if why := notBridged(single); why != "" {
			writeError(w, single, jsonrpc.CodeMethodNotFound, why)
			return false
		}
		if single.Method == "subscriptions/listen" {
			if caps, _, err := bridgeCaps(single); err == nil {
				f.listen(w, r, sc.rq, single, pool.CapsKey(sc.rq.Tenant, caps))
				return false
			}
		}
		if single.Method == "server/discover" {
			f.discover(r.Context(), w, sc.rq, single)
			return false
		}
		if tok := jsonrpc.StringMember(single.Params, "requestState"); tok != "" {
			f.resume(w, r, sc.rq, single, tok)
			return false
		}
	}
	caps, asks, err := bridgeCaps(sc.msgs[0])
	if err != nil {
		writeError(w, sc.msgs[0], jsonrpc.CodeInvalidParams, err.Error())
		return false
	}
	sc.key, sc.asking = pool.CapsKey(sc.rq.Tenant, caps), asks && sc.single != nil
	sc.exclusive = sc.asking && !f.o.RelatedStreams
	return true
}

// statelessConn takes the connection sc.key names (a free one of its
// own when the call is exclusive) and checks the single request's routing
// headers against it. On failure it has answered, and ok is false; on
// success the caller must call release once the call is over.
func (f *Face) statelessConn(w http.ResponseWriter, r *http.Request, sc *statelessCall, body []byte) (sm *mux.Mux, release func(), ok bool) {
	ctx := r.Context()
	get := f.shared.Get
	if sc.exclusive {
		get = func(ctx context.Context, key string) (*mux.Mux, func(), error) {
			return f.shared.GetFree(ctx, key, f.o.BridgeSessions)
		}
	}
	sm, release, err := get(ctx, sc.key)
	if err != nil {
		release()
		if errors.Is(err, pool.ErrAllBusy) {
			if ctx.Err() == nil {
				writeError(w, sc.msgs[0], jsonrpc.CodeInternalError, err.Error()+"; try again when a call is over")
			}
			return nil, nil, false
		}
		f.log.Warn("upstream unavailable", "tenant", sc.rq.Tenant, "err", err)
		httpx.UpstreamDown(w, body)
		return nil, nil, false
	}
	if sc.single != nil && f.o.CheckStateless != nil {
		check := f.o.CheckStateless
		if sc.bridge { // a session-era server binds no Mcp-Param-* headers
			check = checkHeaders
		}
		if e := check(ctx, r, sc.rq, sc.single, sm); e != nil {
			release()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(e.Raw)
			return nil, nil, false
		}
	}
	return sm, release, true
}

// callStateless sends sc's messages upstream on sm, in a namespace of the
// call's own, and writes the answers. Whatever ends the call (answered,
// client gone, cut), what is still in flight upstream is cancelled and sm
// released, unless the call was parked to wait for the client's input.
func (f *Face) callStateless(w http.ResponseWriter, r *http.Request, sc *statelessCall, sm *mux.Mux, release func()) {
	q := newQueue(f.o.Queue)
	p := &parked{tenant: sc.rq.Tenant, q: q, scope: sm.NewScope(), sm: sm, release: release}
	if sc.asking {
		p.method = sc.single.Method
	}
	if sc.exclusive {
		f.setOwner(sm, q)
	}
	kept := false
	defer func() {
		if !kept {
			f.unpark(p, "client disconnected")
		}
	}()
	var bc *bridgeCall
	if sc.bridge {
		bc = &bridgeCall{methods: map[string]string{}, sm: sm}
		if sc.asking {
			bc.park = f.parker(p, sc.single.ID, &kept)
		}
	}
	want := f.sendStateless(r.Context(), sc, p, bc)
	if want == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	f.respondStateless(r.Context(), w, r, p.q, want, bc)
}

// sendStateless sends sc's requests and notifications upstream in p's
// namespace (the proxy's own answers go straight to p's queue), and
// returns how many requests await an answer.
func (f *Face) sendStateless(ctx context.Context, sc *statelessCall, p *parked, bc *bridgeCall) (want int) {
	for _, m := range sc.msgs {
		switch {
		case m.IsRequest():
			want++
			if bc != nil {
				bc.methods[jsonrpc.Key(m.ID)] = m.Method
			}
			reply, c := f.o.Methods.Before(ctx, sc.rq, m)
			if reply != nil {
				p.q.Deliver(reply, nil)
				continue
			}
			if c != nil && m.Method == "tools/call" {
				c.List = ownmethods.ListTools(m, !sc.bridge, pool.Sender(p.sm)) // a bridged upstream takes no envelope
			}
			up := m
			if sc.bridge {
				up = mcpheader.StripEnvelope(m)
			}
			cctx, up := traceUpstream(ctx, sc.rq, up)
			if _, err := p.scope.Call(cctx, up, p.q, c); err != nil {
				p.q.Deliver(callError(m, err), nil)
			}
		case m.IsNotification():
			p.scope.Notify(ctx, m)
		}
	}
	return want
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
	_, release, err := f.shared.Get(ctx, pool.CapsKey(rq.Tenant, caps))
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
// otherwise the response becomes an event stream. A client that takes
// only JSON gets its responses once all have come.
//
// bc, for a bridged request, makes each response one of the stateless
// era and turns server requests into an input_required result (bc.park);
// where the park cannot (the call is answered, or it has none) they are
// refused upstream. Without bc (not bridged) server requests are
// dropped: the stateless era has none.
func (f *Face) respondStateless(ctx context.Context, w http.ResponseWriter, r *http.Request, q *queue, want int, bc *bridgeCall) {
	sr := &statelessReply{f: f, ctx: ctx, w: w, events: wantsSSE(r), want: want, bc: bc}
	keep, stop := f.keepAlive()
	defer stop()
	var grace <-chan time.Time
	if sr.events {
		t := time.NewTimer(headerGrace)
		defer t.Stop()
		grace = t.C
	}
	for sr.want > 0 {
		items, cut := q.take()
		if cut {
			f.log.Warn("a stateless client fell behind its queue; cutting its request")
			return
		}
		ins, over := sr.add(items)
		if over || (len(ins) > 0 && sr.ask(ins)) {
			return
		}
		if sr.want == 0 {
			break
		}
		if !sr.wait(q.wake, keep, grace) {
			return
		}
	}
	if !sr.events {
		sr.writeJSON()
	}
}

// statelessReply is the response to one stateless request being written
// (see respondStateless).
type statelessReply struct {
	f      *Face
	ctx    context.Context
	w      http.ResponseWriter
	events bool        // the client takes an event stream
	sw     *sse.Writer // the event stream, once open
	out    [][]byte    // a JSON-only client's responses, written at the end
	want   int         // the responses still owed
	bc     *bridgeCall
}

// add writes what arrived (or keeps it, for a JSON-only client), each
// response rewritten, and returns the server requests among it. over
// reports that the response is written whole, or that the client is gone.
func (sr *statelessReply) add(items []item) (ins []*jsonrpc.Message, over bool) {
	for _, it := range items {
		m := it.m
		if m.IsRequest() {
			ins = append(ins, m)
			continue
		}
		if it.call != nil {
			m = sr.f.o.Methods.After(sr.ctx, it.call, m)
		}
		if m.IsResponse() {
			sr.want--
			if sr.bc != nil {
				m = sr.bc.finish(m)
			}
		}
		if !sr.events {
			if m.IsResponse() {
				sr.out = append(sr.out, m.Raw)
			}
			continue
		}
		if sr.sw == nil && sr.want == 0 && httpx.ErrorStatus(m) != http.StatusOK {
			// An error whose HTTP status must say what it is.
			httpx.WriteReply(sr.w, mcpheader.FirstStateless, m)
			return nil, true
		}
		if sr.sw == nil {
			sr.sw = openEvents(sr.w)
		}
		if sr.sw.Write(sse.Event{Data: m.Raw, HasData: true}) != nil {
			return nil, true
		}
	}
	return ins, false
}

// ask gives the upstream's server requests ins to a bridged call's park,
// whose input_required result answers the client, or refuses them
// upstream. It reports whether the response is over (written whole, or
// the stream broke); for a JSON-only client the result waits in out.
func (sr *statelessReply) ask(ins []*jsonrpc.Message) (over bool) {
	var reply *jsonrpc.Message
	if bc := sr.bc; bc != nil && bc.park != nil && sr.want > 0 {
		reply = bc.park(ins)
	} else if bc != nil && bc.sm != nil {
		refuseUpstream(bc.sm, ins, "the call these requests belong to is over")
	}
	switch {
	case reply == nil:
		return false
	case !sr.events:
		sr.out, sr.want = append(sr.out, reply.Raw), 0
		return false
	case sr.sw == nil:
		httpx.WriteReply(sr.w, mcpheader.FirstStateless, reply)
	default:
		sr.sw.Write(sse.Event{Data: reply.Raw, HasData: true})
	}
	return true
}

// wait blocks until more arrives (wake), opening the event stream when
// the header grace is over and writing keep-alives meanwhile. It reports
// false when the client left, the face closed or a write failed.
func (sr *statelessReply) wait(wake <-chan struct{}, keep, grace <-chan time.Time) bool {
	select {
	case <-sr.ctx.Done():
		return false
	case <-sr.f.closing:
		return false
	case <-wake:
	case <-grace:
		// A silent call: headers now, so that no client's header
		// timeout fires (only a quick error keeps its HTTP status).
		if sr.sw == nil {
			if sr.sw = openEvents(sr.w); sr.sw.Flush() != nil {
				return false
			}
		}
	case <-keep:
		if sr.sw != nil && sr.sw.Write(keepAliveEvent) != nil {
			return false
		}
	}
	return true
}

// writeJSON answers a JSON-only client: one response as itself (an error
// with its HTTP status), several as an array.
func (sr *statelessReply) writeJSON() {
	if len(sr.out) == 1 {
		m, _ := jsonrpc.DecodeMessage(sr.out[0])
		httpx.WriteReply(sr.w, mcpheader.FirstStateless, m)
		return
	}
	sr.w.Header().Set("Content-Type", "application/json")
	httpx.WriteMessages(sr.w, sr.out, true)
}
