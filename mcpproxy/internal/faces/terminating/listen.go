package terminating

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/era"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// subscriptions/listen, bridged: the stream is Spillway's; what goes on
// it is the change notifications the tenant's bridged sessions send
// (their GET streams, over HTTP), and resources/updated for the URIs the
// stream asks for, subscribed to (resources/subscribe) on the tenant's
// session of the stream's capabilities for as long as it is open.

// maxListeners bounds one tenant's open listen streams, and
// maxListenURIs the resources one stream subscribes to.
const (
	maxListeners  = 8
	maxListenURIs = 64
)

// interest is what a listen stream asked for and the upstream can give:
// subscriptions/listen's notifications filter.
type interest struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// wants reports whether a notification from the upstream goes on the
// stream.
func (in *interest) wants(m *jsonrpc.Message) bool {
	switch m.Method {
	case "notifications/tools/list_changed":
		return in.ToolsListChanged
	case "notifications/prompts/list_changed":
		return in.PromptsListChanged
	case "notifications/resources/list_changed":
		return in.ResourcesListChanged
	case "notifications/resources/updated":
		return slices.Contains(in.ResourceSubscriptions, jsonrpc.StringMember(m.Params, "uri"))
	}
	return false
}

// listener is one open listen stream.
type listener struct {
	q    *queue
	want interest
}

// changeNotification reports whether m is one a listen stream may carry.
func changeNotification(m *jsonrpc.Message) bool {
	all := interest{ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true}
	return all.wants(m) || m.Method == "notifications/resources/updated"
}

// withSubscription returns notification m naming the listen stream id.
func withSubscription(m *jsonrpc.Message, id []byte) *jsonrpc.Message {
	if m.Params == nil {
		return jsonrpc.Notification(m.Method, map[string]any{"_meta": map[string]json.RawMessage{jsonrpc.MetaSubscriptionID: id}})
	}
	return m.WithSubscriptionID(id)
}

// notifyListeners gives a change notification from one of tenant's
// bridged sessions to the tenant's listen streams that asked for it.
func (f *Face) notifyListeners(tenant string, m *jsonrpc.Message) {
	f.ownMu.Lock()
	defer f.ownMu.Unlock()
	for l := range f.listeners[tenant] {
		if l.want.wants(m) {
			l.q.Deliver(m, nil)
		}
	}
}

// addListener registers l for tenant; false past maxListeners.
func (f *Face) addListener(tenant string, l *listener) bool {
	f.ownMu.Lock()
	defer f.ownMu.Unlock()
	if len(f.listeners[tenant]) >= maxListeners {
		return false
	}
	if f.listeners[tenant] == nil {
		f.listeners[tenant] = map[*listener]struct{}{}
	}
	f.listeners[tenant][l] = struct{}{}
	return true
}

func (f *Face) removeListener(tenant string, l *listener) {
	f.ownMu.Lock()
	defer f.ownMu.Unlock()
	delete(f.listeners[tenant], l)
	if len(f.listeners[tenant]) == 0 {
		delete(f.listeners, tenant)
	}
}

// agree is the part of asked the upstream's capabilities (its initialize
// result) can honour: list changes it declares, resources when it
// declares subscribe.
func agree(e era.Eras, asked interest) interest {
	var caps struct {
		Capabilities struct {
			Tools, Prompts struct{ ListChanged bool }
			Resources      struct{ ListChanged, Subscribe bool }
		}
	}
	json.Unmarshal(e.Initialize, &caps)
	c := caps.Capabilities
	out := interest{
		ToolsListChanged:     asked.ToolsListChanged && c.Tools.ListChanged,
		PromptsListChanged:   asked.PromptsListChanged && c.Prompts.ListChanged,
		ResourcesListChanged: asked.ResourcesListChanged && c.Resources.ListChanged,
	}
	if c.Resources.Subscribe {
		out.ResourceSubscriptions = asked.ResourceSubscriptions
	}
	return out
}

// listen serves a bridged subscriptions/listen request on an event stream
// until the client leaves or the face closes.
func (f *Face) listen(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, m *jsonrpc.Message, key string) {
	if !wantsSSE(r) {
		writeError(w, m, jsonrpc.CodeInvalidRequest, "subscriptions/listen needs an event stream (Accept: text/event-stream)")
		return
	}
	var p struct{ Notifications interest }
	if err := json.Unmarshal(m.Params, &p); err != nil || len(p.Notifications.ResourceSubscriptions) > maxListenURIs {
		writeError(w, m, jsonrpc.CodeInvalidParams, "notifications must be an object naming at most "+strconv.Itoa(maxListenURIs)+" resources")
		return
	}
	ctx := r.Context()
	e, _ := f.o.Eras.Get(ctx)
	l := &listener{q: newQueue(f.o.Queue), want: agree(e, p.Notifications)}
	if !f.addListener(rq.Tenant, l) {
		writeError(w, m, jsonrpc.CodeInternalError, "too many subscriptions/listen streams of this client are open")
		return
	}
	defer f.removeListener(rq.Tenant, l)
	// The session the stream's resources are subscribed on: the tenant's
	// of these capabilities, where its calls go, held while the stream is
	// open.
	sm, release, err := f.shared.Get(ctx, key)
	defer release()
	if err != nil {
		f.log.Warn("upstream unavailable", "tenant", rq.Tenant, "err", err)
		writeError(w, m, jsonrpc.CodeUpstream, "upstream MCP server unreachable")
		return
	}
	uris := l.want.ResourceSubscriptions
	l.want.ResourceSubscriptions = nil
	for _, uri := range uris {
		if subscribe(ctx, sm, "resources/subscribe", uri) {
			l.want.ResourceSubscriptions = append(l.want.ResourceSubscriptions, uri)
		}
	}
	defer func() {
		for _, uri := range l.want.ResourceSubscriptions {
			subscribe(context.Background(), sm, "resources/unsubscribe", uri)
		}
	}()
	f.serveListen(ctx, w, m, l)
}

// subscribe sends resources/subscribe (or unsubscribe) for uri on sm and
// reports whether the upstream agreed (bounded: a silent upstream gets
// nothing from this stream).
func subscribe(ctx context.Context, sm *mux.Mux, method, uri string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "spillway-subscribe", "method": method, "params": map[string]string{"uri": uri}})
	resp, err := pool.Request(ctx, sm, jsonrpc.MustDecode(string(b)))
	return err == nil && resp.Error == nil
}

// serveListen writes the acknowledgement, then each notification for l
// with the stream's subscription id.
func (f *Face) serveListen(ctx context.Context, w http.ResponseWriter, m *jsonrpc.Message, l *listener) {
	sw := openEvents(w)
	ack := jsonrpc.Notification("notifications/subscriptions/acknowledged", map[string]any{"notifications": l.want,
		"_meta": map[string]json.RawMessage{jsonrpc.MetaSubscriptionID: m.ID}})
	if sw.Write(sse.Event{Data: ack.Raw, HasData: true}) != nil {
		return
	}
	keep, stop := f.keepAlive()
	defer stop()
	for {
		items, cut := l.q.take()
		if cut {
			f.log.Warn("a listen stream's client fell behind; cutting it")
			return
		}
		for _, it := range items {
			if sw.Write(sse.Event{Data: withSubscription(it.m, m.ID).Raw, HasData: true}) != nil {
				return
			}
		}
		if more, _ := f.awaitMore(ctx, sw, l.q.wake, keep, nil); !more {
			return
		}
	}
}
