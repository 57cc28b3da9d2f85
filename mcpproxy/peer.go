package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"log/slog"
	"sync"
	"time"
)

// peer shares one upstream conn among many client requests: it renumbers
// request ids so that two clients' "id":1 never meet upstream, and routes
// each response back to the stream that asked.
type peer struct {
	conn conn
	log  *slog.Logger
	// onServer receives what the upstream sends on its own: requests and
	// notifications not tied to a pending request's progress token.
	onServer func(*jsonrpc.Message)

	mu       sync.Mutex
	next     uint64
	pending  map[string]*waiter // upstream id → waiter
	byOrig   map[string]string  // client id → upstream id, for cancellation
	progress map[string]*waiter // progress token → waiter
	dead     chan struct{}
}

// waiter is one client request in flight.
type waiter struct {
	origID   []byte
	upID     []byte
	call     *Call
	out      *stream
	progress string
}

func newPeer(c conn, onServer func(*jsonrpc.Message), log *slog.Logger) *peer {
	pe := &peer{conn: c, log: log, onServer: onServer, pending: map[string]*waiter{},
		byOrig: map[string]string{}, progress: map[string]*waiter{}, dead: make(chan struct{})}
	go pe.loop()
	return pe
}

func (pe *peer) alive() bool {
	select {
	case <-pe.dead:
		return false
	default:
		return true
	}
}

// call sends request m on behalf of a client; its response goes to out.
func (pe *peer) call(ctx context.Context, m *jsonrpc.Message, c *Call, out *stream) (*waiter, error) {
	pe.mu.Lock()
	if !pe.alive() {
		pe.mu.Unlock()
		return nil, errors.New("upstream exited")
	}
	pe.next++
	up := jsonrpc.NumID(pe.next)
	w := &waiter{origID: m.ID, upID: up, call: c, out: out, progress: progressToken(m.Params)}
	pe.pending[string(up)] = w
	pe.byOrig[jsonrpc.Key(m.ID)] = string(up)
	if w.progress != "" {
		pe.progress[w.progress] = w
	}
	pe.mu.Unlock()
	if err := pe.conn.Send(ctx, m.WithID(up)); err != nil {
		pe.forget(w)
		return nil, err
	}
	return w, nil
}

// send forwards a notification or a response as it is; a cancellation is
// renumbered to the id the upstream knows.
func (pe *peer) send(ctx context.Context, m *jsonrpc.Message) error {
	if m.Method == "notifications/cancelled" {
		var p map[string]json.RawMessage
		if json.Unmarshal(m.Params, &p) == nil {
			pe.mu.Lock()
			up, ok := pe.byOrig[jsonrpc.Key(p["requestId"])]
			pe.mu.Unlock()
			if ok {
				p["requestId"] = json.RawMessage(up)
				m = jsonrpc.Notification(m.Method, p)
			}
		}
	}
	return pe.conn.Send(ctx, m)
}

// cancel tells the upstream a request's client is gone.
func (pe *peer) cancel(w *waiter, reason string) {
	pe.mu.Lock()
	_, live := pe.pending[string(w.upID)]
	pe.mu.Unlock()
	if !live {
		return
	}
	pe.forget(w)
	ctx, stop := context.WithTimeout(context.Background(), time.Second)
	defer stop()
	pe.conn.Send(ctx, jsonrpc.Notification("notifications/cancelled", map[string]any{
		"requestId": json.RawMessage(w.upID), "reason": reason}))
}

func (pe *peer) forget(w *waiter) {
	pe.mu.Lock()
	delete(pe.pending, string(w.upID))
	if pe.byOrig[jsonrpc.Key(w.origID)] == string(w.upID) {
		delete(pe.byOrig, jsonrpc.Key(w.origID))
	}
	if w.progress != "" && pe.progress[w.progress] == w {
		delete(pe.progress, w.progress)
	}
	pe.mu.Unlock()
}

func (pe *peer) loop() {
	for m := range pe.conn.Recv() {
		if m.IsResponse() {
			pe.mu.Lock()
			w, ok := pe.pending[jsonrpc.Key(m.ID)]
			pe.mu.Unlock()
			if !ok {
				pe.log.Debug("dropping a response nobody waits for", "id", string(m.ID))
				continue
			}
			pe.forget(w)
			w.out.deliver(m.WithID(w.origID), w.call)
			continue
		}
		if sub := subscriptionID(m.Params); sub != "" {
			// A notification of a subscriptions/listen stream names the
			// listen request by the id the upstream knows.
			pe.mu.Lock()
			w := pe.pending[sub]
			pe.mu.Unlock()
			if w != nil {
				w.out.deliver(withSubscriptionID(m, w.origID), nil)
				continue
			}
		}
		if m.Method == "notifications/progress" {
			if tok := progressTokenOf(m.Params); tok != "" {
				pe.mu.Lock()
				w := pe.progress[tok]
				pe.mu.Unlock()
				if w != nil {
					w.out.deliver(m, nil)
					continue
				}
			}
		}
		pe.onServer(m)
	}
	// The upstream is gone: every request in flight gets an error now,
	// rather than a client waiting for ever.
	pe.mu.Lock()
	close(pe.dead)
	waiting := pe.pending
	pe.pending = map[string]*waiter{}
	pe.mu.Unlock()
	msg := "upstream MCP server exited"
	if err := pe.conn.Err(); err != nil {
		pe.log.Warn("upstream connection ended", "err", err)
	}
	for _, w := range waiting {
		w.out.deliver(jsonrpc.ErrorResponse(w.origID, jsonrpc.CodeUpstream, msg), nil)
	}
}

// progressToken reads params._meta.progressToken as a map key.
func progressToken(params []byte) string {
	var p struct {
		Meta struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if params == nil || json.Unmarshal(params, &p) != nil {
		return ""
	}
	return string(p.Meta.Token)
}

// progressTokenOf reads the progressToken of a progress notification.
func progressTokenOf(params []byte) string {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	return string(p.Token)
}

// stream is where a client's responses and related messages go: one
// HTTP response (POST or GET stream) or the stdio output.
type stream struct {
	ch   chan delivery
	done chan struct{} // closed when the writer stops reading
	// fallback takes deliveries once the writer is gone (nil: drop).
	fallback func(delivery)
}

type delivery struct {
	m *jsonrpc.Message
	c *Call // set for responses to calls the proxy rewrites
}

func newStream(fallback func(delivery)) *stream {
	return &stream{ch: make(chan delivery, 64), done: make(chan struct{}), fallback: fallback}
}

func (s *stream) deliver(m *jsonrpc.Message, c *Call) {
	d := delivery{m, c}
	select {
	case <-s.done:
		if s.fallback != nil {
			s.fallback(d)
		}
		return
	default:
	}
	select {
	case s.ch <- d:
	case <-s.done:
		if s.fallback != nil {
			s.fallback(d)
		}
	}
}

// close stops the stream; what was delivered but not written goes to
// the fallback.
func (s *stream) close() {
	select {
	case <-s.done:
		return
	default:
		close(s.done)
	}
	for {
		select {
		case d := <-s.ch:
			if s.fallback != nil {
				s.fallback(d)
			}
		default:
			return
		}
	}
}

const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// subscriptionID reads params._meta's subscription id as a map key.
func subscriptionID(params []byte) string {
	if params == nil || !bytes.Contains(params, []byte(metaSubscriptionID)) {
		return ""
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	return string(p.Meta[metaSubscriptionID])
}

// withSubscriptionID rewrites a notification's subscription id to id,
// keeping every other field.
func withSubscriptionID(m *jsonrpc.Message, id []byte) *jsonrpc.Message {
	var p map[string]json.RawMessage
	var meta map[string]json.RawMessage
	if json.Unmarshal(m.Params, &p) != nil || json.Unmarshal(p["_meta"], &meta) != nil {
		return m
	}
	meta[metaSubscriptionID] = id
	p["_meta"], _ = json.Marshal(meta)
	return jsonrpc.Notification(m.Method, p)
}
