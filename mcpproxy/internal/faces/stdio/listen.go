package stdio

import (
	"encoding/json"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// On stdio a client ends a subscriptions/listen by sending
// notifications/cancelled naming it, and the server then answers the
// listen with its final response, the subscription's id in _meta
// (2026-07-28). Behind the face that answer cannot come from the
// upstream: the mux forgets a call the client cancelled, and an HTTP
// upstream ends a listen by closing its stream, with no response. So the
// face sends the final response itself, and drops the upstream's own if
// one was already on its way.

// listenOpened records a request the client sent: a subscriptions/listen
// is open from now on, and any other request reusing the id of an old
// listen clears it.
func (f *Face) listenOpened(m *jsonrpc.Message) {
	key := jsonrpc.Key(m.ID)
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.Method != methodListen {
		delete(f.listens, key)
		return
	}
	if f.listens == nil {
		f.listens = map[string]bool{}
	}
	f.listens[key] = true
}

// listenCancelled answers the listen a client's cancellation n names, if
// it is open.
func (f *Face) listenCancelled(n *jsonrpc.Message) {
	id := jsonrpc.CancelledID(n)
	key := jsonrpc.Key(id)
	f.mu.Lock()
	open := f.listens[key]
	if open {
		f.listens[key] = false // answered: the upstream's answer is dropped
	}
	f.mu.Unlock()
	if open {
		f.send(item{m: listenEnded(id)})
	}
}

// answered reports whether the face already answered the listen that
// response m answers (see listenCancelled): then m must be dropped, as
// the client has its final response. Either way the listen is forgotten,
// since a listen's response closes it.
func (f *Face) answered(m *jsonrpc.Message) (drop bool) {
	key := jsonrpc.Key(m.ID)
	f.mu.Lock()
	defer f.mu.Unlock()
	open, ok := f.listens[key]
	if ok {
		delete(f.listens, key)
	}
	return ok && !open
}

// methodListen opens a subscription stream (2026-07-28).
const methodListen = "subscriptions/listen"

// listenEnded is the final response of the listen id: an empty result
// naming the subscription.
func listenEnded(id []byte) *jsonrpc.Message {
	result, _ := json.Marshal(map[string]any{
		"resultType": "complete",
		"_meta":      map[string]json.RawMessage{"io.modelcontextprotocol/subscriptionId": json.RawMessage(id)},
	})
	return jsonrpc.Response(id, result)
}
