// Package sessionbridge presents an MCP server that speaks only the
// stateless era (2026-07-28) as a session-era server (2025-06-18,
// 2025-11-25), so that a session-era client can use it through the proxy.
//
// A Conn wraps a connection to the stateless server and is itself a
// connection (mux.Conn) the proxy's session faces dial. It holds what the
// session era keeps in a session and the stateless era sends with every
// request:
//
//   - initialize is answered from the upstream's server/discover: the
//     client's revision, the upstream's capabilities, serverInfo and
//     instructions. The client's capabilities, clientInfo and log level
//     go in every request's _meta afterwards.
//   - ping and logging/setLevel are answered here; the level is sent
//     upstream per request and applied to the log notifications passed on.
//   - An input_required result (SEP-2322) becomes server-to-client
//     requests on the session (sampling/createMessage, elicitation/create,
//     roots/list), with ids the Conn mints; once the client answered them
//     all, the call is sent again with inputResponses and requestState, at
//     most MaxRounds times.
//   - resources/subscribe and the list_changed notifications come from one
//     subscriptions/listen request, opened again when the subscriptions
//     change.
//   - The stateless era's own result fields (resultType, ttlMs,
//     cacheScope) are removed from results, and its resource-not-found
//     error (-32602, SEP-2164) becomes the session era's -32002.
//   - What cannot be bridged (tasks) is refused with a JSON-RPC error that
//     names it.
//
// A Conn serves one session: the proxy dials one per session, so nothing
// a client declared or a server asked for reaches another client.
package sessionbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Version is the revision a Conn speaks to its upstream.
const Version = "2026-07-28"

// sessionVersions are the revisions a Conn offers its client; a client
// asking for another gets the newest.
var sessionVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// _meta keys of the stateless era (SEP-2575) a Conn writes or reads.
const (
	metaClientInfo = "io.modelcontextprotocol/clientInfo"
	metaServerInfo = "io.modelcontextprotocol/serverInfo"
	metaLogLevel   = "io.modelcontextprotocol/logLevel"
)

// DefaultMaxRounds bounds the input_required rounds of one call.
const DefaultMaxRounds = 10

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("sessionbridge: connection closed")

// Options configure a Conn; the zero value is usable.
type Options struct {
	// MaxRounds bounds how often one call may answer input_required
	// before its client gets an error; default DefaultMaxRounds.
	MaxRounds int
	// MaxAsks bounds the server-to-client requests waiting for the
	// client at once (an upstream could ask for any number); past it the
	// call gets an error. Default 64.
	MaxAsks int
	// OneSession says the upstream serves every request of the Conn in
	// one session (a stdio child): a listen is replaced only once the one
	// before it has ended, since such a server may keep one listen per
	// session and forget it when any ends.
	OneSession bool
	// DiscoverWait bounds the wait for the upstream's server/discover,
	// which answers a session's initialize: past it the client gets an
	// error. Default 30 s.
	DiscoverWait time.Duration
	// Mismatch, when set, is called when a bridged initialize finds the
	// upstream's server/discover failing or not offering 2026-07-28 (the
	// upstream changed since its eras were learned).
	Mismatch func()
	Logger   *slog.Logger
}

// Conn is a session-era connection over a stateless-era upstream
// connection. Create it with New; all methods are safe for concurrent
// use. Send and Recv follow the mux.Conn contract.
type Conn struct {
	up   mux.Conn
	o    Options
	log  *slog.Logger
	recv chan *jsonrpc.Message
	// recvMu guards recvClosed: a push holds it shared, the routing
	// goroutine exclusively to close recv once the upstream ended, so that
	// an answer made off that goroutine never lands on a closed recv.
	recvMu     sync.RWMutex
	recvClosed bool
	done       chan struct{}
	once       sync.Once
	// mode is bridging, passing or (NewAuto, before the upstream answered
	// initialize) unknown.
	mode     atomic.Int32
	listenMu sync.Mutex // one relistenLocked at a time
	listened bool       // a relistenLocked ran (under listenMu)
	// listenEnded is closed when the listen in flight ends (under
	// listenMu).
	listenEnded chan struct{}

	mu      sync.Mutex
	probing *jsonrpc.Message // NewAuto: the initialize sent upstream as it is
	caps    json.RawMessage  // the client's capabilities
	info    json.RawMessage  // the client's clientInfo
	level   int              // index in levels; -1: not set
	server  json.RawMessage  // the upstream's capabilities (server/discover)
	next    uint64
	own     map[string]func(*jsonrpc.Message) // the Conn's own requests
	calls   map[string]*call                  // the client's calls upstream, by id
	asks    map[string]*ask                   // server requests awaiting the client, by minted id
	subs    []string                          // subscribed resource URIs
	listen  []byte                            // the subscriptions/listen in flight, or nil
	acks    map[string]func()                 // listens awaiting their acknowledgement, by id
}

// call is one client request in flight upstream.
type call struct {
	req     *jsonrpc.Message // as the client sent it (no _meta of ours)
	rounds  int
	waiting int                        // asks not answered yet
	answers map[string]json.RawMessage // input key → the client's result
	state   json.RawMessage            // requestState to echo, or nil
	askIDs  []string                   // the asks of this round: their minted ids, raw
	failed  *jsonrpc.Message           // set when an ask was refused
}

// ask is one server-to-client request a call waits for.
type ask struct {
	c      *call
	key    string // its key in inputRequests
	method string
}

// Modes of a Conn.
const (
	bridging int32 = iota
	unknown        // NewAuto, until the upstream answered initialize
	passing        // the upstream speaks the session era: messages pass as they are
)

// New returns a Conn over up, a connection to a server that speaks
// 2026-07-28. The Conn owns up: Close closes it.
func New(up mux.Conn, o Options) *Conn { return start(up, o, bridging) }

// NewAuto returns a Conn over up, whose era is not known: messages pass
// as they are (a stateless-era client's too) until a session's
// initialize. That goes upstream as it is; if the upstream answers it,
// the Conn passes everything on as it is for ever (a session-era server
// costs nothing more); if the upstream refuses it and its server/discover
// offers 2026-07-28, the Conn bridges from then on and answers the
// initialize from server/discover. It is meant for an upstream that
// refuses what it does not speak and cannot be asked beforehand, such as a
// stdio child, which is sent nothing before its client's first message.
func NewAuto(up mux.Conn, o Options) *Conn { return start(up, o, unknown) }

// start returns a Conn over up in mode, o's defaults filled in, and starts
// the goroutine that routes what the upstream sends.
func start(up mux.Conn, o Options, mode int32) *Conn {
	if o.MaxRounds <= 0 {
		o.MaxRounds = DefaultMaxRounds
	}
	if o.MaxAsks <= 0 {
		o.MaxAsks = 64
	}
	if o.DiscoverWait <= 0 {
		o.DiscoverWait = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Conn{up: up, o: o, log: o.Logger, recv: make(chan *jsonrpc.Message, 16), done: make(chan struct{}),
		level: -1, own: map[string]func(*jsonrpc.Message){}, calls: map[string]*call{}, asks: map[string]*ask{}, acks: map[string]func(){}}
	c.mode.Store(mode)
	go c.loop()
	return c
}

// Recv yields what the session's client receives; closed when the
// upstream connection ends.
func (c *Conn) Recv() <-chan *jsonrpc.Message { return c.recv }

// Err says why the upstream connection ended (its own Err).
func (c *Conn) Err() error { return c.up.Err() }

// Close closes the upstream connection; Recv closes once it has ended.
func (c *Conn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.up.Close()
}

// push hands m to the client, unless the Conn is closed or the upstream
// ended (Recv is closed then).
func (c *Conn) push(m *jsonrpc.Message) {
	c.recvMu.RLock()
	defer c.recvMu.RUnlock()
	if c.recvClosed {
		return
	}
	select {
	case c.recv <- m:
	case <-c.done:
	}
}

// closeRecv closes Recv once no push is under way (a push waits for the
// client's reader or the Conn's close, either of which comes).
func (c *Conn) closeRecv() {
	c.recvMu.Lock()
	defer c.recvMu.Unlock()
	c.recvClosed = true
	close(c.recv)
}

// Send takes a message from the session's client (see the package doc for
// what is answered here and what goes upstream, and how).
func (c *Conn) Send(ctx context.Context, m *jsonrpc.Message) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	switch c.mode.Load() {
	case passing:
		return c.up.Send(ctx, m)
	case unknown:
		if m.Method != "initialize" {
			return c.up.Send(ctx, m)
		}
		c.mu.Lock()
		c.probing = m
		c.mu.Unlock()
		return c.up.Send(ctx, m)
	}
	switch {
	case m.IsRequest():
		return c.request(ctx, m)
	case m.IsNotification():
		return c.notification(ctx, m)
	default:
		return c.answer(ctx, m)
	}
}

// request takes a request of the bridged session's client: it answers
// what the session era keeps in the session (initialize, ping,
// logging/setLevel, resources/(un)subscribe), refuses tasks, and sends
// anything else upstream with the session's _meta.
func (c *Conn) request(ctx context.Context, m *jsonrpc.Message) error {
	switch {
	case m.Method == "initialize":
		return c.initialize(ctx, m, nil)
	case m.Method == "ping":
		c.push(jsonrpc.Response(m.ID, []byte(`{}`)))
		return nil
	case m.Method == "logging/setLevel":
		return c.setLevel(m)
	case m.Method == "resources/subscribe" || m.Method == "resources/unsubscribe":
		return c.subscribe(ctx, m)
	case strings.HasPrefix(m.Method, "tasks/") || jsonrpc.RawMember(m.Params, "task") != nil:
		c.push(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest,
			"tasks are not bridged: the upstream speaks only "+Version+", and the proxy does not run tasks on its behalf"))
		return nil
	}
	c.mu.Lock()
	k := jsonrpc.Key(m.ID)
	if _, dup := c.calls[k]; dup {
		c.mu.Unlock()
		return fmt.Errorf("sessionbridge: request id %s already in flight", m.ID)
	}
	cl := &call{req: m}
	c.calls[k] = cl
	out := c.withMetaLocked(m)
	c.mu.Unlock()
	if err := c.up.Send(ctx, out); err != nil {
		c.mu.Lock()
		delete(c.calls, k)
		c.mu.Unlock()
		return err
	}
	return nil
}

// initialize answers the session's initialize m from the upstream's
// server/discover, asked with the client's own capabilities and info.
// When refusal is set (NewAuto: the upstream refused m itself), an
// upstream whose server/discover fails or does not offer 2026-07-28 is
// one that speaks neither era to this client: m gets the refusal, and the
// Conn passes messages as they are again.
func (c *Conn) initialize(ctx context.Context, m, refusal *jsonrpc.Message) error {
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      json.RawMessage `json:"clientInfo"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		c.push(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, "initialize: "+err.Error()))
		return nil
	}
	version := sessionVersions[0]
	if slices.Contains(sessionVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	c.mu.Lock()
	c.caps, c.info = objectOr(p.Capabilities), objectOr(p.ClientInfo)
	c.mu.Unlock()
	_, err := c.ask(ctx, "server/discover", map[string]any{}, c.o.DiscoverWait, func(r *jsonrpc.Message) {
		c.discovered(m, refusal, version, r)
	}, nil)
	return err
}

// discovered answers the session's initialize m, in the protocol version
// chosen for it, from r, the upstream's answer to server/discover. It runs
// on the routing goroutine.
func (c *Conn) discovered(m, refusal *jsonrpc.Message, version string, r *jsonrpc.Message) {
	if r.Error != nil {
		c.initializeFailed(m, refusal, "the upstream answered neither initialize nor server/discover: "+string(r.Error))
		return
	}
	d, ok := parseDiscover(r.Result)
	if !ok {
		c.initializeFailed(m, refusal, "the upstream's server/discover does not offer "+Version)
		return
	}
	res, _ := json.Marshal(struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions,omitempty"`
	}{version, d.caps, d.info, d.instructions})
	c.mu.Lock()
	c.server = d.caps
	c.mu.Unlock()
	c.push(jsonrpc.Response(m.ID, res))
	go c.firstListen() // it sends upstream: never on the routing goroutine
}

// initializeFailed answers the session's initialize m when the upstream
// does not speak 2026-07-28: with refusal (the upstream's own answer to
// m) when there is one, and the Conn passes messages as they are from then
// on; otherwise with an error saying msg.
func (c *Conn) initializeFailed(m, refusal *jsonrpc.Message, msg string) {
	if c.o.Mismatch != nil {
		c.o.Mismatch()
	}
	if refusal != nil {
		c.mode.Store(passing)
		c.push(refusal)
		return
	}
	c.push(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, msg))
}

// discovery is what a server/discover result tells the session's
// initialize result.
type discovery struct {
	caps, info   json.RawMessage // tasks removed from caps: not bridged
	instructions string
}

// parseDiscover reads a server/discover result; ok is false when it is
// not one or does not offer 2026-07-28. A server without serverInfo in
// its _meta is named "unknown".
func parseDiscover(result json.RawMessage) (d discovery, ok bool) {
	var r struct {
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
		Instructions      string          `json:"instructions,omitempty"`
	}
	var meta struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(result, &meta)
	if err := json.Unmarshal(result, &r); err != nil || !slices.Contains(r.SupportedVersions, Version) {
		return discovery{}, false
	}
	d = discovery{caps: withoutMembers(objectOr(r.Capabilities), "tasks"), info: meta.Meta[metaServerInfo], instructions: r.Instructions}
	if d.info == nil {
		d.info = json.RawMessage(`{"name":"unknown","version":"0"}`)
	}
	return d, true
}

// ask sends a request of the Conn's own upstream and returns its id; done
// gets its answer on the routing goroutine (it must not block), or, when
// wait is set and no answer came within it, an error response. before,
// when set, is called with the id under c.mu before the request leaves, so
// whatever the upstream sends about it at once finds it known.
func (c *Conn) ask(ctx context.Context, method string, params map[string]any, wait time.Duration, done func(*jsonrpc.Message), before func(id []byte)) ([]byte, error) {
	c.mu.Lock()
	c.next++
	id := strconv.AppendQuote(nil, "spillway-bridge-"+strconv.FormatUint(c.next, 10))
	c.own[jsonrpc.Key(id)] = done
	if before != nil {
		before(id)
	}
	params["_meta"] = json.RawMessage(c.metaLocked())
	c.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	if err := c.up.Send(ctx, jsonrpc.MustDecode(string(b))); err != nil { // the Conn's own request: valid
		c.mu.Lock()
		delete(c.own, jsonrpc.Key(id))
		c.mu.Unlock()
		return id, err
	}
	if wait > 0 {
		time.AfterFunc(wait, func() {
			c.mu.Lock()
			late := c.own[jsonrpc.Key(id)]
			delete(c.own, jsonrpc.Key(id))
			c.mu.Unlock()
			if late != nil {
				late(jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, fmt.Sprintf("the upstream did not answer %s within %s", method, wait)))
			}
		})
	}
	return id, nil
}

// levels are the log levels, least severe first.
var levels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func (c *Conn) setLevel(m *jsonrpc.Message) error {
	l := slices.Index(levels, jsonrpc.StringMember(m.Params, "level"))
	if l < 0 {
		c.push(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, "logging/setLevel: unknown level"))
		return nil
	}
	c.mu.Lock()
	c.level = l
	c.mu.Unlock()
	c.push(jsonrpc.Response(m.ID, []byte(`{}`)))
	return nil
}

// subscribe keeps the session's resource subscriptions; the upstream
// learns them from the next subscriptions/listen.
func (c *Conn) subscribe(ctx context.Context, m *jsonrpc.Message) error {
	uri := jsonrpc.StringMember(m.Params, "uri")
	if uri == "" {
		c.push(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, m.Method+": no uri"))
		return nil
	}
	// listenMu from before the change: the session's first listen (opened
	// once initialize is answered) must not carry this uri and take the
	// acknowledgement meant for the listen that answers this request.
	c.listenMu.Lock()
	defer c.listenMu.Unlock()
	c.mu.Lock()
	i := slices.Index(c.subs, uri)
	switch {
	case m.Method == "resources/subscribe" && i < 0:
		if len(c.subs) >= maxSubscriptions {
			c.mu.Unlock()
			c.push(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest, "too many resource subscriptions in this session"))
			return nil
		}
		c.subs = append(c.subs, uri)
	case m.Method == "resources/unsubscribe" && i >= 0:
		c.subs = slices.Delete(c.subs, i, i+1)
	}
	c.mu.Unlock()
	c.relistenLocked([][]byte{m.ID})
	return nil
}

// maxSubscriptions bounds one session's resource subscriptions.
const maxSubscriptions = 256

// ackWait bounds how long a resources/subscribe waits for the upstream to
// acknowledge the subscriptions/listen that carries it.
const ackWait = 10 * time.Second

// relistenLocked replaces the session's subscriptions/listen with one for what
// the session wants now: the list changes the upstream announces, and the
// subscribed resources. reply, when set, is the id of the client's
// resources/(un)subscribe, answered once the upstream acknowledged the new
// listen (so a client that subscribed misses no update after its answer),
// once the listen ended, or after ackWait. c.listenMu is held.
func (c *Conn) relistenLocked(reply [][]byte) {
	c.listened = true
	c.mu.Lock()
	old := c.listen
	c.listen = nil
	want := c.wantedLocked()
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if old != nil {
		c.endListen(ctx, old)
	}
	settle := c.settler(reply)
	if len(want) == 0 {
		settle("")
		return
	}
	c.openListen(ctx, want, settle)
}

// wantedLocked is the notifications a subscriptions/listen asks for: the
// list changes the upstream's capabilities announce and the session's
// subscribed resources; empty when there are none. c.mu is held.
func (c *Conn) wantedLocked() map[string]any {
	want := map[string]any{}
	for member, capability := range map[string]string{"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"} {
		if string(jsonrpc.Path(c.server, capability, "listChanged")) == "true" {
			want[member] = true
		}
	}
	if len(c.subs) > 0 {
		want["resourceSubscriptions"] = slices.Clone(c.subs)
	}
	return want
}

// endListen cancels the subscriptions/listen whose id is old. With
// Options.OneSession it then waits (within ctx) for that listen to end,
// because such an upstream keeps one listen per session and forgets it
// when any listen ends (the Go SDK does): the next one is opened only once
// the old one has ended.
func (c *Conn) endListen(ctx context.Context, old []byte) {
	n := jsonrpc.Notification(jsonrpc.MethodCancelled, map[string]any{"requestId": json.RawMessage(old), "reason": "subscriptions changed"})
	if err := c.up.Send(ctx, n); err != nil {
		c.log.Debug("ending a subscriptions/listen failed", "err", err)
		return
	}
	if c.o.OneSession {
		select {
		case <-c.listenEnded:
		case <-ctx.Done():
		}
	}
}

// settler returns the function that answers the client's (un)subscribe
// requests reply, once whatever calls it first: with {} when refused is ""
// (the listen is acknowledged, or not heard of within ackWait), with an
// error saying refused when the listen could not be opened or ended.
func (c *Conn) settler(reply [][]byte) func(refused string) {
	var once sync.Once
	return func(refused string) {
		once.Do(func() {
			for _, id := range reply {
				if refused != "" {
					c.push(jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, "the upstream refused the subscription: "+refused))
				} else {
					c.push(jsonrpc.Response(id, []byte(`{}`)))
				}
			}
		})
	}
}

// openListen sends a subscriptions/listen for want and settles the
// client's (un)subscribe when the upstream acknowledges it, when it ends
// or fails, or after ackWait, whichever comes first.
func (c *Conn) openListen(ctx context.Context, want map[string]any, settle func(refused string)) {
	acked := func() { settle("") }
	ended := make(chan struct{})
	c.listenEnded = ended
	id, err := c.ask(ctx, "subscriptions/listen", map[string]any{"notifications": want}, 0, func(r *jsonrpc.Message) {
		close(ended)
		refused := "its subscriptions/listen ended"
		if r.Error != nil {
			c.log.Info("the upstream refused subscriptions/listen", "error", string(r.Error))
			refused = string(r.Error)
		}
		go settle(refused) // it pushes to the client: not on the routing goroutine
	}, func(id []byte) {
		// Known before the listen leaves: an upstream acknowledges at once.
		if c.listen == nil {
			c.listen = id
		}
		c.acks[jsonrpc.Key(id)] = acked
	})
	if err != nil {
		c.log.Warn("opening subscriptions/listen failed", "err", err)
		c.mu.Lock()
		delete(c.acks, jsonrpc.Key(id))
		if string(c.listen) == string(id) {
			c.listen = nil
		}
		c.mu.Unlock()
		settle("subscriptions/listen could not be sent")
		return
	}
	time.AfterFunc(ackWait, func() {
		c.mu.Lock()
		delete(c.acks, jsonrpc.Key(id))
		c.mu.Unlock()
		acked()
	})
}

// firstListen opens the session's first subscriptions/listen, unless a
// (un)subscribe came first and did.
func (c *Conn) firstListen() {
	c.listenMu.Lock()
	defer c.listenMu.Unlock()
	if !c.listened {
		c.relistenLocked(nil)
	}
}

// notification takes a notification of the bridged session's client:
// those the stateless era has no use for are dropped, a cancellation also
// ends the call's asks, and the rest go upstream.
func (c *Conn) notification(ctx context.Context, m *jsonrpc.Message) error {
	switch m.Method {
	case "notifications/initialized", "notifications/roots/list_changed":
		return nil // the stateless era has neither: roots are asked for per call
	case jsonrpc.MethodCancelled:
		c.cancel(jsonrpc.CancelledID(m))
	}
	return c.up.Send(ctx, m)
}

// cancel forgets a call the client cancelled, and the server requests it
// waited for (the client is told they are cancelled too).
func (c *Conn) cancel(id []byte) {
	c.mu.Lock()
	cl := c.calls[jsonrpc.Key(id)]
	delete(c.calls, jsonrpc.Key(id))
	var gone []string
	if cl != nil {
		gone = c.dropAsksLocked(cl)
	}
	c.mu.Unlock()
	for _, k := range gone {
		c.push(jsonrpc.Notification(jsonrpc.MethodCancelled, map[string]any{"requestId": json.RawMessage(k), "reason": "the request that asked was cancelled"}))
	}
}

// dropAsksLocked forgets cl's asks still waiting and returns their ids.
func (c *Conn) dropAsksLocked(cl *call) []string {
	var gone []string
	for _, id := range cl.askIDs {
		if k := jsonrpc.Key([]byte(id)); c.asks[k] != nil {
			delete(c.asks, k)
			gone = append(gone, id)
		}
	}
	cl.askIDs = nil
	return gone
}

// answer takes the client's response to a server request: one of the
// Conn's asks, or (from an upstream that sends requests itself) the
// upstream's own.
func (c *Conn) answer(ctx context.Context, m *jsonrpc.Message) error {
	k := jsonrpc.Key(m.ID)
	c.mu.Lock()
	a := c.asks[k]
	if a == nil {
		c.mu.Unlock()
		if strings.HasPrefix(string(m.ID), askPrefix) {
			return nil // a late answer to an ask whose call ended: nobody waits
		}
		return c.up.Send(ctx, m)
	}
	delete(c.asks, k)
	cl := a.c
	if m.Error != nil && cl.failed == nil {
		cl.failed = jsonrpc.ErrorResponse(cl.req.ID, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("the upstream asked for %s, and the client refused it: %s", a.method, m.Error))
	}
	if m.Result != nil {
		cl.answers[a.key] = json.RawMessage(m.Result)
	}
	cl.waiting--
	if cl.waiting > 0 {
		c.mu.Unlock()
		return nil
	}
	cl.askIDs = nil
	if cl.failed != nil {
		delete(c.calls, jsonrpc.Key(cl.req.ID))
		c.mu.Unlock()
		c.push(cl.failed)
		return nil
	}
	retry := c.retryLocked(cl)
	c.mu.Unlock()
	if err := c.up.Send(ctx, retry); err != nil {
		c.fail(cl, "sending the request again with the client's input failed")
	}
	return nil
}

// retryLocked is cl's request again with the client's input and the
// upstream's requestState.
func (c *Conn) retryLocked(cl *call) *jsonrpc.Message {
	req := cl.req
	answers, _ := json.Marshal(cl.answers)
	req = setParam(req, answers, "inputResponses")
	if cl.state != nil {
		req = setParam(req, cl.state, "requestState")
	}
	return c.withMetaLocked(req)
}

// fail answers cl with an error, if it still waits.
func (c *Conn) fail(cl *call, msg string) {
	c.mu.Lock()
	k := jsonrpc.Key(cl.req.ID)
	live := c.calls[k] == cl
	if live {
		delete(c.calls, k)
		c.dropAsksLocked(cl)
	}
	c.mu.Unlock()
	if live {
		c.push(jsonrpc.ErrorResponse(cl.req.ID, jsonrpc.CodeUpstream, msg))
	}
}

// loop routes what the upstream sends until its connection ends.
func (c *Conn) loop() {
	defer c.closeRecv()
	for m := range c.up.Recv() {
		switch mode := c.mode.Load(); {
		case mode == passing:
			c.push(m)
		case mode == unknown:
			c.learn(m)
		case m.IsResponse():
			c.response(m)
		case m.IsNotification():
			if n := c.serverNotification(m); n != nil {
				c.push(n)
			}
		default:
			c.push(m) // a request of the upstream's own: its client answers
		}
	}
}

// learn passes m on while the upstream's era is unknown, and watches for
// the answer to the session's initialize.
func (c *Conn) learn(m *jsonrpc.Message) {
	c.mu.Lock()
	init := c.probing
	c.mu.Unlock()
	if !m.IsResponse() || init == nil || jsonrpc.Key(m.ID) != jsonrpc.Key(init.ID) {
		c.push(m)
		return
	}
	if m.Error == nil {
		c.mode.Store(passing)
		c.push(m)
		return
	}
	// Refused: a stateless-only server says so this way. Its
	// server/discover decides; the client's initialize is answered from
	// it, or gets the refusal.
	c.mu.Lock()
	c.probing = nil
	c.mu.Unlock()
	refusal := m
	go func() { // it sends upstream: never on the routing goroutine
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.mode.Store(bridging)
		if err := c.initialize(ctx, init, refusal); err != nil {
			c.mode.Store(passing)
			c.push(refusal)
		}
	}()
}

// response routes an upstream response while bridging: to the Conn's own
// request it answers, or to the client's call, whose input_required result
// becomes requests to the client and whose final answer is passed on as
// the session era reads it. It runs on the routing goroutine.
func (c *Conn) response(m *jsonrpc.Message) {
	k := jsonrpc.Key(m.ID)
	c.mu.Lock()
	if done := c.own[k]; done != nil {
		delete(c.own, k)
		c.mu.Unlock()
		done(m)
		return
	}
	cl := c.calls[k]
	if cl == nil {
		c.mu.Unlock()
		c.push(m) // not ours to hold: the mux drops what nobody awaits
		return
	}
	if m.Result == nil || jsonrpc.StringMember(m.Result, "resultType") != "input_required" {
		delete(c.calls, k)
		c.mu.Unlock()
		if m.Result != nil {
			m = m.WithResult(complete(m.Result))
		} else {
			m = sessionError(cl.req, m)
		}
		c.push(m)
		return
	}
	msgs, err := c.inputLocked(cl, m.Result)
	if err != nil {
		delete(c.calls, k)
		c.dropAsksLocked(cl)
		c.mu.Unlock()
		c.push(jsonrpc.ErrorResponse(cl.req.ID, jsonrpc.CodeInvalidRequest, err.Error()))
		return
	}
	c.mu.Unlock()
	for _, r := range msgs {
		c.push(r)
	}
}

// inputLocked turns an input_required result into the server requests
// that ask the client, and records them as cl's asks. c.mu is held.
func (c *Conn) inputLocked(cl *call, result []byte) ([]*jsonrpc.Message, error) {
	cl.rounds++
	if cl.rounds > c.o.MaxRounds {
		return nil, fmt.Errorf("the upstream asked for input more than %d times", c.o.MaxRounds)
	}
	var r struct {
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  json.RawMessage         `json:"requestState"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return nil, fmt.Errorf("the upstream's input_required result is malformed: %w", err)
	}
	keys, err := c.askableLocked(r.InputRequests)
	if err != nil {
		return nil, err
	}
	cl.state, cl.answers, cl.failed, cl.askIDs = nil, map[string]json.RawMessage{}, nil, nil
	if len(r.RequestState) > 0 && string(r.RequestState) != "null" {
		if cl.state, err = expandState(r.RequestState); err != nil {
			return nil, err
		}
	}
	out := make([]*jsonrpc.Message, 0, len(keys))
	for _, key := range keys {
		m, err := c.askLocked(cl, key, r.InputRequests[key])
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	cl.waiting = len(keys)
	return out, nil
}

// inputRequest is one member of an input_required result's inputRequests:
// a server request for the client.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// askableLocked returns the keys of reqs in a stable order (the order the
// client is asked in), or an error when they cannot be asked: none at all
// (the upstream is busy), more than the Conn holds at once, a method the
// proxy cannot ask a session-era client for, or one that needs a
// capability the client did not declare. c.mu is held.
func (c *Conn) askableLocked(reqs map[string]inputRequest) ([]string, error) {
	if len(reqs) == 0 {
		return nil, errors.New("the upstream is busy (input_required without input requests); try again later")
	}
	if len(c.asks)+len(reqs) > c.o.MaxAsks {
		return nil, errors.New("the upstream asked the client for more input at once than the proxy holds")
	}
	keys := make([]string, 0, len(reqs))
	for key, in := range reqs {
		if need, ok := capabilityOf[in.Method]; !ok {
			return nil, fmt.Errorf("the upstream asked for %q, which the proxy cannot ask a session-era client for", in.Method)
		} else if jsonrpc.RawMember(c.caps, need) == nil {
			return nil, fmt.Errorf("the upstream asked for %s, which needs the client's %q capability, and the client did not declare it", in.Method, need)
		}
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys, nil
}

// expandState returns the requestState to send back upstream with its
// spilled strings expanded: upstream, a spilled string's marker means
// nothing, so its bytes go instead.
func expandState(state json.RawMessage) (json.RawMessage, error) {
	if !spill.HasMarkers(state) {
		return state, nil
	}
	var b bytes.Buffer
	if err := spill.Expand(&b, state); err != nil {
		return nil, fmt.Errorf("the upstream's requestState is lost: %w", err)
	}
	return b.Bytes(), nil
}

// askLocked mints an id for the server request in (the input key of cl
// named key), records it as one of cl's asks, and returns the request to
// send the client. c.mu is held.
func (c *Conn) askLocked(cl *call, key string, in inputRequest) (*jsonrpc.Message, error) {
	c.next++
	id := strconv.AppendUint([]byte(askPrefix), c.next, 10)
	id = append(id, '"')
	c.asks[jsonrpc.Key(id)] = &ask{c: cl, key: key, method: in.Method}
	cl.askIDs = append(cl.askIDs, string(id))
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": in.Method, "params": json.RawMessage(objectOr(in.Params))})
	m, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return nil, fmt.Errorf("the upstream's %s request is malformed: %w", in.Method, err)
	}
	return m, nil
}

// askPrefix starts the ids of the Conn's server requests, raw.
const askPrefix = `"spillway-ask-`

// capabilityOf is the client capability each server request needs.
var capabilityOf = map[string]string{
	"sampling/createMessage": "sampling",
	"elicitation/create":     "elicitation",
	"roots/list":             "roots",
}

// serverNotification returns the upstream notification m as the client
// gets it, or nil to drop it: a listen's acknowledgement is the Conn's own
// business, and a log message below the session's level is dropped.
func (c *Conn) serverNotification(m *jsonrpc.Message) *jsonrpc.Message {
	switch m.Method {
	case "notifications/subscriptions/acknowledged":
		k := jsonrpc.Key(jsonrpc.SubscriptionID(m))
		c.mu.Lock()
		acked := c.acks[k]
		delete(c.acks, k)
		c.mu.Unlock()
		if acked != nil {
			go acked() // it pushes to the client: not on the routing goroutine
		}
		return nil
	case "notifications/message":
		c.mu.Lock()
		min := c.level
		c.mu.Unlock()
		if min >= 0 && slices.Index(levels, jsonrpc.StringMember(m.Params, "level")) < min {
			return nil
		}
	}
	return m
}

// withMetaLocked is m with the session's _meta members added to its
// params' _meta.
func (c *Conn) withMetaLocked(m *jsonrpc.Message) *jsonrpc.Message {
	params := objectOr(m.Params)
	for k, v := range c.metaMembersLocked() {
		params, _ = jsonrpc.SetPath(params, v, "_meta", k)
	}
	return m.WithParams(params)
}

// metaMembersLocked are the _meta members of the stateless era that carry
// the session.
func (c *Conn) metaMembersLocked() map[string][]byte {
	v, _ := json.Marshal(Version)
	mm := map[string][]byte{
		jsonrpc.MetaProtocolVersion:    v,
		jsonrpc.MetaClientCapabilities: objectOr(c.caps),
		metaClientInfo:                 objectOr(c.info),
	}
	if c.level >= 0 {
		mm[metaLogLevel], _ = json.Marshal(levels[c.level])
	}
	return mm
}

// metaLocked is metaMembersLocked as one _meta object.
func (c *Conn) metaLocked() []byte {
	out := []byte(`{}`)
	for k, v := range c.metaMembersLocked() {
		out, _ = jsonrpc.SetPath(out, v, k)
	}
	return out
}

// setParam is m with params[key] set to v.
func setParam(m *jsonrpc.Message, v []byte, key string) *jsonrpc.Message {
	p, ok := jsonrpc.SetPath(objectOr(m.Params), v, key)
	if !ok {
		return m
	}
	return m.WithParams(p)
}

// complete is a final result as a session-era client reads it: without
// the stateless era's result fields.
func complete(result []byte) []byte {
	result = withoutMembers(result, "resultType", "ttlMs", "cacheScope")
	if meta := jsonrpc.RawMember(result, "_meta"); meta != nil {
		if trimmed := withoutMembers(meta, metaServerInfo); len(trimmed) != len(meta) {
			if out, ok := jsonrpc.SetPath(result, trimmed, "_meta"); ok {
				result = out
			}
		}
	}
	return result
}

// codeResourceNotFound is the session era's error for a resource that
// does not exist; the stateless era says -32602 (invalid params).
const codeResourceNotFound = -32002

// sessionError is the upstream's error answer to req as a session-era
// client reads it: a resources/read that names a URI and is refused as
// invalid params was refused for that URI, which the session era calls
// resource not found (-32002).
func sessionError(req, m *jsonrpc.Message) *jsonrpc.Message {
	if req.Method != "resources/read" || m.ErrorCode() != jsonrpc.CodeInvalidParams || jsonrpc.StringMember(req.Params, "uri") == "" {
		return m
	}
	raw, ok := jsonrpc.SetPath(m.Raw, []byte(strconv.Itoa(codeResourceNotFound)), "error", "code")
	if !ok {
		return m
	}
	if n, err := jsonrpc.DecodeMessage(raw); err == nil {
		return n
	}
	return m
}

// objectOr is b when it is a JSON object, else {}.
func objectOr(b []byte) []byte {
	if i := jsonrpc.SkipSpace(b, 0); i < len(b) && b[i] == '{' {
		return b
	}
	return []byte(`{}`)
}
