package terminating

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/era"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
)

// The bridge: a stateless-era (2026-07-28) client in front of an upstream
// that speaks only the session era. Spillway holds the upstream sessions
// and speaks the stateless era to the client:
//
//   - server/discover is answered from the upstream's initialize result;
//   - a request goes on a session of its tenant's whose initialize
//     declared exactly the capabilities the request declares (its
//     clientCapabilities), so nothing the client did not declare is
//     promised upstream and no session is shared between tenants;
//   - the envelope's _meta (revision, client info, capabilities, log
//     level) is the bridge's and does not go upstream;
//   - every result gets resultType "complete", a cacheable one (a list, a
//     read, discover) ttlMs 0 and cacheScope "private"; resource not found
//     (-32002) becomes the stateless era's -32602;
//   - a server request during a call (sampling, elicitation, roots)
//     becomes an input_required result; the client's retry, carrying
//     inputResponses and the requestState, answers the waiting upstream
//     request, and the call goes on. A Streamable HTTP upstream sends a
//     call's server requests on the call's own response stream, so calls
//     share their session (Options.RelatedStreams). Elsewhere nothing in
//     a server request says which call caused it, so a request whose
//     client declared a capability that lets the server ask gets a
//     session no other request uses meanwhile (at most
//     Options.BridgeSessions; past them it waits for one): the server's
//     request can only be that call's.
//
// subscriptions/listen is served by Spillway (listen.go). What the bridge
// does not carry (tasks) is refused with a JSON-RPC error that names it.

// DefaultBridgeSessions is Options.BridgeSessions' default: the sessions
// of one tenant and one set of declared capabilities that serve calls
// able to receive server requests, one call each at a time.
const DefaultBridgeSessions = 4

// DefaultBridgeWait is Options.BridgeWait's default: about the request
// timeout of the SDKs' clients (the TypeScript SDK's is 60 s).
const DefaultBridgeWait = time.Minute

// maxCapsKey bounds the declared capabilities a session is keyed by.
const maxCapsKey = 4 << 10

// bridging reports whether a stateless request must be bridged: the
// upstream is known to speak the session era only.
func (f *Face) bridging(ctx context.Context) bool {
	if f.o.Eras == nil {
		return false
	}
	e, err := f.o.Eras.Get(ctx)
	if err != nil {
		f.log.Warn("forwarding without bridging", "err", err)
		return false
	}
	return !e.Stateless() && e.Session()
}

// asking are the client capabilities that let a session-era server send
// requests of its own during a call.
var asking = []string{"sampling", "elicitation", "roots"}

// bridgeCaps returns the capabilities a bridged request declares, as the
// canonical JSON of the members a session-era initialize knows (tasks are
// not bridged), and whether they let the server ask the client.
func bridgeCaps(m *jsonrpc.Message) (caps []byte, asks bool, err error) {
	var all map[string]any
	if raw := jsonrpc.Meta(m, jsonrpc.MetaClientCapabilities); raw != nil {
		if err := json.Unmarshal(raw, &all); err != nil {
			return nil, false, errors.New("clientCapabilities is not an object")
		}
	}
	kept := map[string]any{}
	for _, k := range append([]string{"experimental"}, asking...) {
		if v, ok := all[k]; ok {
			kept[k] = v
			asks = asks || k != "experimental"
		}
	}
	caps, _ = json.Marshal(kept) // map keys sorted: one spelling per set
	if len(caps) > maxCapsKey {
		return nil, false, errors.New("clientCapabilities too large")
	}
	return caps, asks, nil
}

// bridgeInit is the initialize of a bridged session: the session-era
// revision, and the capabilities the client declared.
func bridgeInit(caps []byte) *jsonrpc.Message {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "spillway-init", "method": "initialize",
		"params": map[string]any{"protocolVersion": era.Session, "capabilities": json.RawMessage(caps),
			"clientInfo": map[string]string{"name": "spillway", "version": "1"}}})
	return jsonrpc.MustDecode(string(b))
}

// checkHeaders validates a bridged request's routing headers: Mcp-Method
// and Mcp-Name against the body (a session-era server's tools bind no
// Mcp-Param-* headers).
func checkHeaders(_ context.Context, r *http.Request, _ ownmethods.Request, m *jsonrpc.Message, _ *mux.Mux) *jsonrpc.Message {
	err := mcpheader.Check(r.Header, []*jsonrpc.Message{m})
	if err == nil {
		return nil
	}
	var e *mcpheader.Error
	if errors.As(err, &e) {
		return jsonrpc.ErrorResponse(m.ID, e.Code, e.Message)
	}
	return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest, err.Error())
}

// discoverResult answers server/discover from the upstream's initialize
// result: the stateless revision, its capabilities, instructions and
// (in _meta) serverInfo.
func discoverResult(initResult []byte) []byte {
	var init struct {
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions string          `json:"instructions,omitempty"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
	}
	json.Unmarshal(initResult, &init)
	if init.Capabilities == nil || init.Capabilities[0] != '{' {
		init.Capabilities = json.RawMessage(`{}`)
	}
	r := map[string]any{"supportedVersions": []string{era.Stateless}, "capabilities": init.Capabilities,
		"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
	if init.Instructions != "" {
		r["instructions"] = init.Instructions
	}
	if init.ServerInfo != nil {
		r["_meta"] = map[string]any{"io.modelcontextprotocol/serverInfo": init.ServerInfo}
	}
	b, _ := json.Marshal(r)
	return b
}

// cacheable are the methods whose stateless-era results carry ttlMs and
// cacheScope.
var cacheable = map[string]bool{"server/discover": true, "tools/list": true, "prompts/list": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true}

// codeResourceNotFound is the session era's resource-not-found error; the
// stateless era says -32602.
const codeResourceNotFound = -32002

// toStateless makes a session-era response one of the stateless era, for
// the client's request id.
func toStateless(m *jsonrpc.Message, id []byte, method string) *jsonrpc.Message {
	m = m.WithID(id)
	if m.Error != nil {
		if m.ErrorCode() == codeResourceNotFound {
			if raw, ok := jsonrpc.SetPath(m.Raw, []byte(strconv.Itoa(jsonrpc.CodeInvalidParams)), "error", "code"); ok {
				if n, err := jsonrpc.DecodeMessage(raw); err == nil {
					return n
				}
			}
		}
		return m
	}
	r := m.Result
	if i := jsonrpc.SkipSpace(r, 0); i >= len(r) || r[i] != '{' {
		return m
	}
	set := func(v string, key string) {
		if jsonrpc.RawMember(r, key) == nil {
			if out, ok := jsonrpc.SetPath(r, []byte(v), key); ok {
				r = out
			}
		}
	}
	set(`"complete"`, "resultType")
	if cacheable[method] {
		set(`0`, "ttlMs")
		set(`"private"`, "cacheScope")
	}
	return m.WithResult(r)
}

// bridgeCall is one bridged request (or batch) as a response is written
// for it.
type bridgeCall struct {
	methods map[string]string // the client's id → the request's method
	// id, for a resumed call, is the client's id in this round (its
	// response arrives with the first round's), and method its method.
	id     []byte
	method string
	sm     *mux.Mux // the connection, to refuse what cannot be parked
	// park turns the server requests that arrived into the client's
	// input_required result, keeping the call waiting upstream; nil when
	// the call cannot take server requests.
	park func(ins []*jsonrpc.Message) *jsonrpc.Message
}

// finish makes a response to the call one of the stateless era.
func (bc *bridgeCall) finish(m *jsonrpc.Message) *jsonrpc.Message {
	if bc.id != nil {
		return toStateless(m, bc.id, bc.method)
	}
	return toStateless(m, m.ID, bc.methods[jsonrpc.Key(m.ID)])
}

// Parked calls: waiting upstream for the answers to server requests the
// client was sent in an input_required result.

// parkedTTL is how long a parked call waits for its client's retry before
// it is cancelled upstream.
const parkedTTL = 2 * time.Minute

// maxParked bounds one tenant's parked calls.
const maxParked = 16

type parked struct {
	tenant  string
	method  string
	q       *queue
	scope   *mux.Scope
	sm      *mux.Mux
	release func()
	asked   map[string][]byte // input request key → the upstream's request id
	timer   *time.Timer
}

// parkTable holds parked calls under unguessable tokens (the
// requestState), bound to their tenant. Safe for concurrent use.
type parkTable struct {
	mu     sync.Mutex
	calls  map[string]*parked
	counts map[string]int // tenant → parked calls
}

func newParkTable() *parkTable {
	return &parkTable{calls: map[string]*parked{}, counts: map[string]int{}}
}

// errTooManyParked is returned by put past a tenant's bound.
var errTooManyParked = errors.New("too many calls of this client wait for input")

// newToken is a requestState: 192 random bits, so that no client can
// guess another's.
func newToken() string {
	var b [24]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// put parks p under tok; expire runs if no retry takes it within
// parkedTTL.
func (t *parkTable) put(tok string, p *parked, expire func(*parked)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts[p.tenant] >= maxParked {
		return errTooManyParked
	}
	t.calls[tok] = p
	t.counts[p.tenant]++
	p.timer = time.AfterFunc(parkedTTL, func() {
		if t.remove(tok, p) {
			expire(p)
		}
	})
	return nil
}

// take returns the call parked under tok for tenant and forgets it; nil
// when there is none (unknown, expired, taken, or another tenant's: that
// one stays parked for its own client).
func (t *parkTable) take(tok, tenant string) *parked {
	t.mu.Lock()
	p := t.calls[tok]
	t.mu.Unlock()
	if p == nil || p.tenant != tenant || !t.remove(tok, p) {
		return nil
	}
	p.timer.Stop()
	return p
}

func (t *parkTable) remove(tok string, p *parked) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls[tok] != p {
		return false
	}
	delete(t.calls, tok)
	if t.counts[p.tenant]--; t.counts[p.tenant] <= 0 {
		delete(t.counts, p.tenant)
	}
	return true
}

// drain removes every parked call (Close).
func (t *parkTable) drain() []*parked {
	t.mu.Lock()
	defer t.mu.Unlock()
	var all []*parked
	for tok, p := range t.calls {
		p.timer.Stop()
		all = append(all, p)
		delete(t.calls, tok)
	}
	t.counts = map[string]int{}
	return all
}

// inputRequired is the client's input_required result for the server
// requests ins, whose answers go back upstream under the keys it names.
func inputRequired(id []byte, ins []*jsonrpc.Message, state string) (*jsonrpc.Message, map[string][]byte) {
	reqs := map[string]any{}
	asked := map[string][]byte{}
	for i, in := range ins {
		key := "spillway-" + strconv.Itoa(i+1)
		r := map[string]any{"method": in.Method}
		if in.Params != nil {
			r["params"] = json.RawMessage(in.Params)
		}
		reqs[key] = r
		asked[key] = in.ID
	}
	b, _ := json.Marshal(map[string]any{"resultType": "input_required", "inputRequests": reqs, "requestState": state})
	return jsonrpc.Response(id, b), asked
}

// answerUpstream sends the client's inputResponses to the upstream
// requests they answer; one the client left out is answered with an
// error, so that no upstream request waits for ever.
func answerUpstream(ctx context.Context, p *parked, responses []byte) {
	for key, upID := range p.asked {
		r := jsonrpc.RawMember(responses, key)
		var out *jsonrpc.Message
		if r == nil || r[0] != '{' {
			out = jsonrpc.ErrorResponse(upID, jsonrpc.CodeInternalError, "the client sent no response to this request")
		} else {
			out = jsonrpc.Response(upID, r)
		}
		p.sm.Send(ctx, out)
	}
}

// refuseUpstream answers server requests that cannot reach a client.
func refuseUpstream(sm *mux.Mux, ins []*jsonrpc.Message, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, in := range ins {
		sm.Send(ctx, jsonrpc.ErrorResponse(in.ID, jsonrpc.CodeMethodNotFound, why))
	}
}

// notBridged is the error for a stateless feature the bridge does not
// carry to a session-era upstream; "" when method is bridged.
func notBridged(m *jsonrpc.Message) string {
	switch {
	case strings.HasPrefix(m.Method, "tasks/"), jsonrpc.Path(m.Params, "task") != nil:
		return "tasks are not bridged to this upstream, which speaks only the session era; call without a task"
	}
	return ""
}
