package terminating

import (
	"context"
	"errors"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/session"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// live is a session's upstream side: its own connection, its client's
// namespace on it, and the worker that routes what comes back to the
// session's streams. Offloading may write to the store: never on the
// connection's routing goroutine, nor on the worker's. Each response to
// rewrite gets a goroutine of its own, at most maxRewrites at once, so a
// slow store holds only that response; other responses, progress and
// pings go on. A response still follows its own progress notifications,
// which the worker appended before it took the response.
type live struct {
	f     *Face
	s     *session.Session
	m     *mux.Mux
	scope *mux.Scope
	inbox chan item
	lost  atomic.Int64 // messages the full inbox lost
	// ctx ends when the session closes, and with it what a rewrite does
	// that heeds cancellation (the offloader's store does not: it ends
	// by its own timeout, never cut half way).
	ctx      context.Context
	slots    chan struct{} // a token per rewrite under way
	rewrites sync.WaitGroup
	// revision is what the session's initialize settled: it judges a
	// POST that does not name its own (see httpx.DecodePOST).
	revision atomic.Pointer[string]
}

// negotiated is the revision the session's initialize settled, "" until
// it is answered.
func (l *live) negotiated() string {
	if v := l.revision.Load(); v != nil {
		return *v
	}
	return ""
}

// item is one message on its way to a session's stream.
type item struct {
	m    *jsonrpc.Message
	call *ownmethods.Call
	st   *session.Stream // nil: wherever the session's server messages go
}

// inboxSize bounds what waits for a session's worker.
const inboxSize = 1024

// maxRewrites bounds the responses of one session rewritten at once;
// maxPending more wait their turn while other messages go on.
const (
	maxRewrites = 16
	maxPending  = 64
)

// startSession opens a new session's upstream connection.
func (f *Face) startSession(s *session.Session) error {
	ctx, cancel := context.WithCancel(context.Background())
	l := &live{f: f, s: s, inbox: make(chan item, inboxSize), ctx: ctx, slots: make(chan struct{}, maxRewrites)}
	dial := f.o.Dial
	if f.o.SessionDial != nil {
		dial = f.o.SessionDial
	}
	c, err := dial(pool.WithTenant(context.Background(), s.Tenant))
	if err != nil {
		cancel()
		return err
	}
	l.m = mux.NewExclusive(c, func(m *jsonrpc.Message) { l.push(item{m: m}) }, f.log) // the session's own connection
	l.scope = l.m.NewScope()
	s.Value = l
	s.OnClose(func() {
		cancel()
		l.m.Close()
	})
	go l.work()
	return nil
}

// push hands a message to the worker without ever blocking the routing
// goroutine. A full inbox loses the message; a lost response is replaced
// by an error response, so no request waits for ever.
func (l *live) push(it item) {
	select {
	case l.inbox <- it:
	default:
		// Logged at the 1st, 10th, 100th… loss: an upstream flooding its
		// session must not flood the log too.
		if n := l.lost.Add(1); isPowerOf10(n) {
			l.f.log.Warn("session inbox full; dropping messages", "session", l.s.ID, "method", it.m.Method, "dropped", n)
		}
		if it.m.IsResponse() && it.st != nil {
			it.st.Append(jsonrpc.ErrorResponse(it.m.ID, jsonrpc.CodeInternalError, "the response was dropped: the proxy's buffer for this session is full"))
		}
	}
}

// work routes what the session's connection delivers. A response to
// rewrite waits in pending for a free slot while everything else goes
// on; only while maxPending wait does the worker take nothing new (and
// the inbox fills, as behind any slow worker).
func (l *live) work() {
	var pending []item // responses waiting for a slot, oldest first
	for {
		inbox, slot := l.inbox, chan<- struct{}(nil)
		if len(pending) >= maxPending {
			inbox = nil
		}
		if len(pending) > 0 {
			slot = l.slots
		}
		select {
		case it := <-inbox:
			if it.call == nil {
				l.handle(it)
			} else {
				pending = append(pending, it)
			}
		case slot <- struct{}{}:
			l.rewrite(pending[0])
			pending[0] = item{}
			pending = pending[1:]
		case <-l.m.Done():
			// What the dead connection delivered last (error responses),
			// and what waits to be rewritten, still reach the session.
			for drained := false; !drained; {
				select {
				case it := <-l.inbox:
					pending = append(pending, it)
				default:
					drained = true
				}
			}
			for _, it := range pending {
				if it.call == nil {
					l.handle(it)
					continue
				}
				l.slots <- struct{}{}
				l.rewrite(it)
			}
			l.rewrites.Wait()
			l.f.table.Remove(l.s) // the upstream died: so did the session
			return
		}
	}
}

// rewrite handles it on a goroutine of its own, in a slot the caller
// took, which it frees.
func (l *live) rewrite(it item) {
	l.rewrites.Add(1)
	go func() {
		defer l.rewrites.Done()
		defer func() { <-l.slots }()
		l.handle(it)
	}()
}

// handle rewrites it if it must (under the session's life and a minute
// at most) and appends it to its stream.
func (l *live) handle(it item) {
	defer func() {
		if v := recover(); v != nil {
			l.f.log.Error("terminating face: rewriting a message panicked", "panic", v, "stack", string(debug.Stack()))
			if it.m.IsResponse() && it.st != nil {
				it.st.Append(jsonrpc.ErrorResponse(it.m.ID, jsonrpc.CodeInternalError, "the proxy failed to process the upstream's response"))
			}
		}
	}()
	m := it.m
	if it.call != nil {
		ctx, cancel := context.WithTimeout(l.ctx, time.Minute)
		m = l.f.o.Methods.After(ctx, it.call, m)
		cancel()
		if v := httpx.Negotiated(m); it.call.Method == "initialize" && v != "" {
			l.revision.Store(&v)
		}
	}
	if (it.st == nil || !it.st.Append(m)) && !l.s.Current().Append(m) {
		spill.Release(m.Raw) // the session closed: its long strings on disk go
	}
}

// streamSink routes one POST stream's deliveries through the worker.
type streamSink struct {
	l  *live
	st *session.Stream
}

func (k streamSink) Deliver(m *jsonrpc.Message, tag any) {
	c, _ := tag.(*ownmethods.Call)
	k.l.push(item{m: m, call: c, st: k.st})
}

// sessionPOST serves a POST of session s: its messages go upstream on
// the session's own connection, and the answers to its requests come back
// on a stream of the session's, as events or (a client that takes only
// JSON) as one JSON body.
func (f *Face) sessionPOST(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, s *session.Session, msgs []*jsonrpc.Message) {
	ctx := r.Context()
	s.Touch()
	if len(msgs) == 1 && msgs[0].Method == "resources/stream" {
		f.serveStream(w, r, rq, msgs[0])
		return
	}
	st := s.NewStream()
	ids := requestIDs(msgs)
	st.Await(ids)
	if len(ids) == 0 {
		st.Finish()
	}
	f.sendSession(ctx, rq, s, st, msgs)
	if len(ids) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !wantsSSE(r) {
		f.writeJSON(ctx, w, st)
		return
	}
	// Headers and a priming event (an id and empty data, as the spec
	// words it) go out at once: a long, silent call must
	// not hit the client's header timeout, and the client has an event id
	// to resume from whatever happens next.
	f.write(ctx, w, s, st, 0, rq.Version >= httpx.Version20251125, true)
}

// requestIDs returns the ids of the requests among msgs.
func requestIDs(msgs []*jsonrpc.Message) [][]byte {
	var ids [][]byte
	for _, m := range msgs {
		if m.IsRequest() {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// sendSession sends msgs upstream on session s's connection: requests in
// its client's namespace, their answers (and the proxy's own) bound for
// st; notifications (a cancellation also ends what the session's streams
// owe for it); and the client's answers to server requests.
func (f *Face) sendSession(ctx context.Context, rq ownmethods.Request, s *session.Session, st *session.Stream, msgs []*jsonrpc.Message) {
	l := s.Value.(*live)
	sink := streamSink{l: l, st: st}
	for _, m := range msgs {
		switch {
		case m.IsRequest():
			reply, c := f.o.Methods.Before(ctx, rq, m)
			if reply != nil {
				st.Append(reply)
				continue
			}
			if c != nil && m.Method == "tools/call" {
				c.List = ownmethods.ListTools(m, false, pool.Sender(l.m)) // on the session's own connection
			}
			cctx, sent := traceUpstream(ctx, rq, m)
			if _, err := l.scope.Call(cctx, sent, sink, c); err != nil {
				st.Append(callError(m, err))
			}
		case m.IsNotification():
			if err := l.scope.Notify(ctx, m); err != nil {
				f.log.Warn("sending to the upstream failed", "err", err)
			}
			if m.Method == jsonrpc.MethodCancelled {
				s.Cancel(jsonrpc.CancelledID(m))
			}
		default: // the client answers a server request
			if err := l.m.Send(ctx, m); err != nil {
				f.log.Warn("sending to the upstream failed", "err", err)
			}
		}
	}
}

// serveStream answers resources/stream: the proxy's artifacts only, since
// a stdio or legacy upstream cannot stream over HTTP.
func (f *Face) serveStream(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, m *jsonrpc.Message) {
	caps := f.o.Methods.StreamCaps(rq, m)
	caps.Upstream = false
	f.o.Methods.ServeStream(w, r, rq, m, caps)
}

// callError is the answer to a request the mux would not send.
func callError(m *jsonrpc.Message, err error) *jsonrpc.Message {
	if errors.Is(err, mux.ErrDuplicateID) {
		return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest, "a request with this id is already in flight")
	}
	return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, "upstream MCP server unavailable")
}

func (f *Face) get(w http.ResponseWriter, r *http.Request, s *session.Session) {
	if !wantsSSE(r) {
		http.Error(w, "Accept must contain text/event-stream", http.StatusNotAcceptable)
		return
	}
	st, cursor := s.GET(), s.GET().Resume()
	gap := false
	if lid := r.Header.Get("Last-Event-ID"); lid != "" {
		id, seq, ok := session.Seq(lid)
		if found := s.Stream(id); ok && found != nil {
			st, cursor = found, seq // take that stream over, pending deliveries included
		} else {
			gap = true // the stream is gone: what it held past the id is lost
		}
	}
	f.write(r.Context(), w, s, st, cursor, false, false, gap)
}

// write attaches to st after cursor and sends its events until the stream
// ends, another writer takes it over, the client leaves or the face
// closes. prime starts the stream with a priming event (an id to resume
// from) instead of bare headers; a POST stream (isPost) that was primed
// may end early for polling (SEP-1699). gap, when true, tells the client
// first that the stream it asked to resume is gone.
func (f *Face) write(ctx context.Context, w http.ResponseWriter, s *session.Session, st *session.Stream, cursor int, prime, isPost bool, gap ...bool) {
	release := s.Hold()
	defer release()
	gen := st.Attach()
	sw := openEvents(w)
	last := st.ID() + "_" + strconv.Itoa(cursor)
	if startEvents(sw, last, prime) != nil {
		return
	}
	reported := len(gap) > 0 && gap[0]
	if reported {
		sw.Write(sse.Event{Comments: []string{"gap: the stream to resume is gone; what it held was lost"}})
	}
	poll, stopPoll := f.pollTimer(isPost && prime)
	defer stopPoll()
	keep, stop := f.keepAlive()
	defer stop()
	for {
		b := st.Next(gen, cursor)
		if !b.Owner {
			return // taken over by a resuming GET
		}
		if b.Gap && !reported {
			reported = true
			if sw.Write(sse.Event{Comments: []string{"gap: events were dropped before they were read; lost responses come as errors"}}) != nil {
				return
			}
		}
		if sendEvents(sw, st, b.Events, &cursor, &last) != nil || b.Done {
			return
		}
		more, polled := f.awaitMore(ctx, sw, b.Wake, keep, poll)
		if polled {
			// Closed on purpose: an id and a retry hint, and the client
			// polls with GET and Last-Event-ID for the rest.
			sw.Write(sse.Event{ID: last, HasID: true, HasData: true, Retry: pollRetry, HasRetry: true})
			return
		}
		if !more {
			return
		}
	}
}

// startEvents sends a stream's headers: with a priming event naming
// last (and a retry hint) when prime, else alone.
func startEvents(sw *sse.Writer, last string, prime bool) error {
	if prime {
		return sw.Write(sse.Event{ID: last, HasID: true, HasData: true, Retry: time.Second, HasRetry: true})
	}
	return sw.Flush()
}

// sendEvents writes events to the client, and records each as sent: its
// sequence number becomes *cursor and its id *last.
func sendEvents(sw *sse.Writer, st *session.Stream, events []session.Event, cursor *int, last *string) error {
	for _, ev := range events {
		if err := sw.Write(sse.Event{ID: ev.ID, HasID: true, Data: ev.Data, HasData: true}); err != nil {
			return err
		}
		_, *cursor, _ = session.Seq(ev.ID)
		*last = ev.ID
		st.Sent(*cursor)
	}
	return nil
}

// pollTimer fires once PollAfter is over, when on and the face polls at
// all (never otherwise); stop releases it.
func (f *Face) pollTimer(on bool) (poll <-chan time.Time, stop func()) {
	if !on || f.o.PollAfter <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(f.o.PollAfter)
	return t.C, func() { t.Stop() }
}

// wait blocks until wake, and reports false when the client left or the
// face closed first.
func (f *Face) wait(ctx context.Context, wake <-chan struct{}) bool {
	select {
	case <-ctx.Done():
		return false
	case <-f.closing:
		return false
	case <-wake:
		return true
	}
}

// awaitMore is how an open event stream waits between its writes. It
// blocks until wake says there is more to send, or until keep says a
// keep-alive is due and it is written (the caller then looks again), and
// reports more true; it reports more false when the client left, the face
// closed or the keep-alive could not be written. When poll fires first it
// reports polled true, for the caller to close the stream on purpose; a
// nil poll never fires.
func (f *Face) awaitMore(ctx context.Context, sw *sse.Writer, wake <-chan struct{}, keep, poll <-chan time.Time) (more, polled bool) {
	select {
	case <-ctx.Done():
		return false, false
	case <-f.closing:
		return false, false
	case <-wake:
	case <-keep:
		if sw.Write(keepAliveEvent) != nil {
			return false, false
		}
	case <-poll:
		return false, true
	}
	return true, false
}

// pollRetry is the retry hint of a stream closed for polling: soon enough
// that a result does not wait long.
const pollRetry = 500 * time.Millisecond

// writeJSON answers a client that takes only JSON: the responses alone,
// once all have come.
func (f *Face) writeJSON(ctx context.Context, w http.ResponseWriter, st *session.Stream) {
	gen := st.Attach()
	var out [][]byte
	cursor := 0
	for {
		b := st.Next(gen, cursor)
		if !b.Owner {
			return
		}
		for _, ev := range b.Events {
			if m, err := jsonrpc.DecodeMessage(ev.Data); err == nil && m.IsResponse() {
				out = append(out, ev.Data)
			}
			_, cursor, _ = session.Seq(ev.ID)
		}
		if b.Done {
			break
		}
		if !f.wait(ctx, b.Wake) {
			return
		}
	}
	st.Sent(cursor)
	w.Header().Set("Content-Type", "application/json")
	httpx.WriteMessages(w, out, len(out) > 1)
}

// isPowerOf10 reports whether n is 1, 10, 100, …
func isPowerOf10(n int64) bool {
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n == 1
}
