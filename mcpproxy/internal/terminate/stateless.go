package terminate

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/owned"
	"github.com/spillway-dev/spillway/mcpproxy/internal/sse"
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
	c, _ := tag.(*owned.Call)
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

// statelessSupervisor makes one tenant's connection for stateless
// requests, prepared best-effort (see Pipeline).
func (f *Face) statelessSupervisor() *Supervisor {
	s := &Supervisor{Dial: f.o.Dial, Log: f.log,
		Init: func(ctx context.Context, m *mux.Mux) error {
			return Pipeline(m, StatelessInit, Initialized)
		}}
	s.OnServer = func(m *jsonrpc.Message) { f.statelessServerMsg(s, m) }
	return s
}

// statelessServerMsg: the stateless era has no server-to-client requests
// (input-required results replace them), and a notification that belongs
// to no request has no one to go to.
func (f *Face) statelessServerMsg(s *Supervisor, m *jsonrpc.Message) {
	if m.IsRequest() {
		if sm := s.current(); sm != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			sm.Send(ctx, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound, "no client session to send this request to"))
		}
		return
	}
	f.log.Debug("dropping a notification with no session", "method", m.Method)
}

func (f *Face) statelessPOST(w http.ResponseWriter, r *http.Request, rq owned.Request, msgs []*jsonrpc.Message, body []byte) {
	ctx := r.Context()
	sm, release, err := f.shared.Get(ctx, rq.Tenant)
	defer release()
	if err != nil {
		f.log.Warn("upstream unavailable", "tenant", rq.Tenant, "err", err)
		httpx.UpstreamDown(w, body)
		return
	}
	if len(msgs) == 1 && msgs[0].IsRequest() && f.o.CheckStateless != nil {
		if e := f.o.CheckStateless(ctx, r, msgs[0], sm); e != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(e.Raw)
			return
		}
	}
	if len(msgs) == 1 && msgs[0].Method == "resources/stream" {
		f.serveStream(w, r, rq, msgs[0])
		return
	}
	scope := sm.NewScope()
	// Whatever ends this request (answered, client gone, cut), what is
	// still in flight upstream is cancelled.
	defer scope.Close("client disconnected")
	q := newQueue(f.o.Queue)
	want := 0
	for _, m := range msgs {
		switch {
		case m.IsRequest():
			want++
			reply, c := f.o.Methods.Before(ctx, rq, m)
			if reply != nil {
				q.Deliver(reply, nil)
				continue
			}
			if _, err := scope.Call(ctx, m, q, c); err != nil {
				q.Deliver(callError(m, err), nil)
			}
		case m.IsNotification():
			scope.Notify(ctx, m)
		}
	}
	if want == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	f.respondStateless(ctx, w, r, q, want)
}

// headerGrace is how long a stateless call with an event stream may stay
// silent before its response headers go: long enough for a quick error
// to keep its HTTP status, short against any client's header timeout.
const headerGrace = time.Second

// respondStateless writes what arrives for one stateless request until
// every request is answered. When the first thing to arrive completes the
// request it goes as plain JSON, so an error can carry its HTTP status;
// otherwise the response becomes an event stream.
func (f *Face) respondStateless(ctx context.Context, w http.ResponseWriter, r *http.Request, q *queue, want int) {
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
		for _, it := range items {
			m := it.m
			if it.call != nil {
				m = f.o.Methods.After(ctx, it.call, m)
			}
			if m.IsResponse() {
				want--
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
