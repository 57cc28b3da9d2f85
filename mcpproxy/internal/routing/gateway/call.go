package gateway

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// call is one client request in flight at an upstream.
type call struct {
	m        *member
	clientID []byte
	scope    *mux.Scope
	p        *mux.Pending
	// after rewrites the upstream's answer for the client (names, URIs);
	// nil passes it as it is.
	after func(*jsonrpc.Message) *jsonrpc.Message
	over  atomic.Bool // answered, timed out or cancelled: nothing more is delivered
	timer atomic.Pointer[time.Timer]
}

// callSink receives what the upstream's mux routes to one call.
type callSink struct{ call *call }

func (s *callSink) Deliver(msg *jsonrpc.Message, _ any) {
	cl := s.call
	if !msg.IsResponse() {
		if !cl.over.Load() {
			cl.m.push(msg) // progress, or a subscription's notification
		}
		return
	}
	if !cl.finish() {
		return
	}
	if transportFailure(msg) {
		msg = cl.m.failed(msg.ID, jsonrpc.StringMember(msg.Error, "message"))
	} else if cl.after != nil && msg.Result != nil {
		msg = cl.after(msg)
	}
	cl.m.push(msg)
}

// finish marks the call over and forgets it; it reports whether it was
// still in flight.
func (cl *call) finish() bool {
	if !cl.over.CompareAndSwap(false, true) {
		return false
	}
	if t := cl.timer.Load(); t != nil {
		t.Stop()
	}
	c := cl.m.c
	c.mu.Lock()
	if c.calls[jsonrpc.Key(cl.clientID)] == cl {
		delete(c.calls, jsonrpc.Key(cl.clientID))
	}
	c.mu.Unlock()
	cl.m.calls.Done()
	return true
}

// cancelled passes the client's cancellation of the call upstream.
func (cl *call) cancelled(ctx context.Context, n *jsonrpc.Message) {
	if !cl.finish() {
		return
	}
	if err := cl.scope.Notify(ctx, n); err != nil {
		cl.m.log.Debug("passing a cancellation failed", "err", err)
	}
}

// timedOut answers the client when the upstream took longer than its
// CallTimeout, and cancels the request upstream.
func (cl *call) timedOut() {
	if !cl.finish() {
		return
	}
	cl.scope.Cancel(cl.p, "the gateway's call timeout passed")
	t := cl.m.spec.CallTimeout
	cl.m.push(errorWithData(cl.clientID, jsonrpc.CodeUpstream,
		"upstream "+strconv.Quote(cl.m.spec.Name)+" did not answer within "+t.String(),
		map[string]any{"upstream": cl.m.spec.Name, "reason": "timeout", "retryAfterMs": 0}))
}

// forward sends req (already in the upstream's names) to upstream m for
// the client, whose id it keeps; after rewrites the answer. It answers
// the client itself when m cannot take the request.
func (c *Conn) forward(ctx context.Context, m *member, req *jsonrpc.Message, after func(*jsonrpc.Message) *jsonrpc.Message) {
	_, scope, u := m.live()
	if u != nil {
		c.push(u.response(req.ID))
		return
	}
	cl := &call{m: m, clientID: req.ID, scope: scope, after: after}
	key := jsonrpc.Key(req.ID)
	c.mu.Lock()
	if c.calls[key] != nil {
		c.mu.Unlock()
		c.push(jsonrpc.ErrorResponse(req.ID, jsonrpc.CodeInvalidRequest, mux.ErrDuplicateID.Error()))
		return
	}
	c.calls[key] = cl
	m.calls.Add(1)
	c.mu.Unlock()
	// The timeout starts once Call returned the Pending it cancels; a
	// timer set after the answer came fires into a finished call.
	p, err := scope.Call(ctx, req, &callSink{cl}, nil)
	if err != nil {
		if cl.finish() {
			c.push(m.failed(req.ID, err.Error()))
		}
		return
	}
	cl.p = p
	if t := m.spec.CallTimeout; t > 0 && !cl.over.Load() {
		cl.timer.Store(time.AfterFunc(t, cl.timedOut))
	}
}

// transportFailure reports whether msg is an error response made by the
// connection to an upstream rather than by the upstream: the mux's answer
// for a connection that ended, an HTTP client's for a server it could not
// reach (code -32000, made by Spillway: Local). An upstream's own -32000
// passes as it is.
func transportFailure(msg *jsonrpc.Message) bool {
	return msg.Error != nil && msg.Local && msg.ErrorCode() == jsonrpc.CodeUpstream
}

// errorWithData builds a JSON-RPC error response whose error has data.
func errorWithData(id []byte, code int, msg string, data any) *jsonrpc.Message {
	if id == nil {
		id = []byte("null")
	}
	b, _ := json.Marshal(struct {
		V     string          `json:"jsonrpc"`
		ID    json.RawMessage `json:"id"`
		Error any             `json:"error"`
	}{"2.0", id, struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}{code, msg, data}})
	return jsonrpc.MustDecode(string(b))
}

// setString returns obj with the string at the path set to s.
func setString(obj []byte, s string, keys ...string) []byte {
	v, _ := json.Marshal(s)
	out, ok := jsonrpc.SetPath(obj, v, keys...)
	if !ok {
		return obj
	}
	return out
}
