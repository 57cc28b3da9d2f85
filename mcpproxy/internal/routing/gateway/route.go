package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/policy/decision"
)

// CodeDenied is the JSON-RPC error code of a request the call decision
// refused; the message and data say why.
const CodeDenied = -32006

// sessionVersions are the revisions a Conn answers initialize in: the
// client's when it is one of them, else the newest.
var sessionVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// initialize connects every upstream with the client's handshake, waits
// for each one's first attempt (bounded by its connect timeout), and
// answers with the capabilities and instructions of those that are up.
func (c *Conn) initialize(_ context.Context, req *jsonrpc.Message) {
	ms, ok := c.connectAll(req)
	if !ok {
		return
	}
	c.push(jsonrpc.Response(req.ID, c.initializeResult(req, ms)))
	close(c.ready)
}

// connectAll starts every upstream with the handshake init and waits for
// each one's first attempt; ok is false when init is not the first (it is
// answered with an error) or the Conn closed meanwhile.
func (c *Conn) connectAll(init *jsonrpc.Message) (ms []*member, ok bool) {
	c.mu.Lock()
	if c.init != nil {
		c.mu.Unlock()
		c.push(jsonrpc.ErrorResponse(init.ID, jsonrpc.CodeInvalidRequest, "initialize was already sent"))
		return nil, false
	}
	c.init = init
	for _, name := range c.order {
		ms = append(ms, c.members[name])
	}
	c.mu.Unlock()
	for _, m := range ms {
		m.start()
	}
	for _, m := range ms {
		select {
		case <-m.firstTry:
		case <-c.done:
			return nil, false
		}
	}
	return ms, true
}

// initializeResult merges the upstreams' initialize results: the Conn
// always offers tools, prompts and resources with list_changed (an
// upstream may come later), logging and completions when an upstream
// does, and each upstream's instructions under its name.
func (c *Conn) initializeResult(req *jsonrpc.Message, ms []*member) []byte {
	version := jsonrpc.StringMember(req.Params, "protocolVersion")
	if !slices.Contains(sessionVersions, version) {
		version = sessionVersions[0]
	}
	caps := baseCapabilities()
	var instructions []string
	for _, m := range ms {
		res := m.initResult()
		if res == nil {
			continue
		}
		for _, k := range []string{"logging", "completions"} {
			if jsonrpc.Path(res, "capabilities", k) != nil {
				caps[k] = map[string]any{}
			}
		}
		if s := jsonrpc.StringMember(res, "instructions"); s != "" {
			instructions = append(instructions, "## "+m.spec.Name+c.instructionsNote(m)+"\n\n"+s)
		}
	}
	out := map[string]any{"protocolVersion": version, "capabilities": caps,
		"serverInfo": map[string]any{"name": "spillway-gateway", "version": "1"}}
	if len(instructions) > 0 {
		out["instructions"] = strings.Join(instructions, "\n\n")
	}
	b, _ := json.Marshal(out)
	return b
}

// baseCapabilities are what a Conn offers whatever its upstreams: tools,
// prompts and resources with list_changed (an upstream may come later,
// or go and come back) and resource subscriptions.
func baseCapabilities() map[string]any {
	return map[string]any{
		"tools":     map[string]any{"listChanged": true},
		"prompts":   map[string]any{"listChanged": true},
		"resources": map[string]any{"listChanged": true, "subscribe": true},
	}
}

// Initialize is an initialize result that declares what every Conn
// offers (baseCapabilities), for a face that must know it before any Conn
// is made: which change notifications a stateless-era client's
// subscriptions/listen stream may carry.
func Initialize() []byte {
	b, _ := json.Marshal(map[string]any{"protocolVersion": sessionVersions[0], "capabilities": baseCapabilities(),
		"serverInfo": map[string]any{"name": "spillway-gateway", "version": "1"}})
	return b
}

// instructionsNote says how an upstream's tool names are prefixed.
func (c *Conn) instructionsNote(m *member) string {
	if c.mode() == PrefixAlways {
		return " (tools named " + prefixed(m.spec.Name, c.r.o.Separator, "…") + ")"
	}
	return ""
}

// mode is the prefix mode in force now.
func (c *Conn) mode() string {
	c.mu.Lock()
	n := len(c.order)
	c.mu.Unlock()
	return c.r.prefixMode(n)
}

// request serves one client request after initialize.
func (c *Conn) request(ctx context.Context, req *jsonrpc.Message) {
	if c.stateless.Load() {
		req = mcpheader.StripEnvelope(req)
	}
	switch req.Method {
	case "ping":
		c.push(jsonrpc.Response(req.ID, []byte(`{}`)))
	case "server/discover":
		c.discover(req)
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list":
		c.list(ctx, req)
	case "tools/call":
		c.named(ctx, req, kindTool, []string{"name"}, c.afterCall)
	case "prompts/get":
		c.named(ctx, req, kindPrompt, []string{"name"}, nil)
	case "resources/read":
		c.named(ctx, req, kindResource, []string{"uri"}, c.afterRead)
	case "resources/subscribe", "resources/unsubscribe":
		c.named(ctx, req, kindResource, []string{"uri"}, nil)
	case "completion/complete":
		c.complete(ctx, req)
	case "logging/setLevel":
		c.setLevel(ctx, req)
	default:
		ms := c.upMembers()
		if len(ms) == 1 {
			c.forward(ctx, ms[0], req, nil)
			return
		}
		c.push(jsonrpc.ErrorResponse(req.ID, jsonrpc.CodeMethodNotFound, "Method not found: the gateway does not route "+req.Method))
	}
}

// named serves a request that names one tool, prompt or resource at the
// params path: the name is resolved to its upstream, checked against the
// upstream's tool lists and the call decision, and the request goes there
// under the upstream's own name.
func (c *Conn) named(ctx context.Context, req *jsonrpc.Message, kind string, path []string, after func(*member) func(*jsonrpc.Message) *jsonrpc.Message) {
	name := stringAt(req.Params, path...)
	m, orig, errMsg := c.resolve(kind, name)
	if errMsg != nil {
		c.push(errMsg(req.ID))
		return
	}
	if req.Method != "resources/subscribe" && req.Method != "resources/unsubscribe" {
		if deny := c.authorize(ctx, m, kind, orig, jsonrpc.RawMember(req.Params, "arguments"), false); deny != nil {
			c.push(deny(req.ID))
			return
		}
	}
	if kind == kindTool {
		c.learnTool(ctx, m, orig)
	}
	if orig != name {
		req = req.WithParams(setString(req.Params, orig, path...))
	}
	var a func(*jsonrpc.Message) *jsonrpc.Message
	if after != nil {
		a = after(m)
	}
	c.forward(ctx, m, req, a)
}

// complete routes completion/complete by its reference: a prompt's name or
// a resource template's URI.
func (c *Conn) complete(ctx context.Context, req *jsonrpc.Message) {
	switch stringAt(req.Params, "ref", "type") {
	case "ref/prompt":
		c.named(ctx, req, kindPrompt, []string{"ref", "name"}, nil)
	case "ref/resource":
		c.named(ctx, req, kindResource, []string{"ref", "uri"}, nil)
	default:
		c.push(jsonrpc.ErrorResponse(req.ID, jsonrpc.CodeInvalidParams, "completion/complete: ref.type must be ref/prompt or ref/resource"))
	}
}

// setLevel sends logging/setLevel to every upstream that is up and
// answers it itself: each upstream's level is its own affair.
func (c *Conn) setLevel(ctx context.Context, req *jsonrpc.Message) {
	var wg sync.WaitGroup
	for _, m := range c.upMembers() {
		mx := m.current()
		if mx == nil || jsonrpc.Path(m.initResult(), "capabilities", "logging") == nil {
			continue
		}
		wg.Go(func() {
			if _, err := ownRequest(ctx, m, mx, req.Method, req.Params); err != nil {
				m.log.Debug("logging/setLevel failed", "err", err)
			}
		})
	}
	wg.Wait()
	c.push(jsonrpc.Response(req.ID, []byte(`{}`)))
}

// resolve finds the upstream of a tool, prompt or resource URI the client
// named, and its name there. A tool the upstream's lists exclude is
// unknown, as it was never listed.
func (c *Conn) resolve(kind, name string) (*member, string, func(id []byte) *jsonrpc.Message) {
	unknown := func(id []byte) *jsonrpc.Message {
		if kind == kindResource {
			return errorWithData(id, -32002, "Resource not found", map[string]any{"uri": name})
		}
		return jsonrpc.ErrorResponse(id, jsonrpc.CodeInvalidParams, "Unknown "+kind+": "+name)
	}
	if name == "" {
		return nil, "", unknown
	}
	ms := c.upMembers()
	up, orig, ok := c.names.lookup(kind, name)
	if !ok && c.mode() != PrefixNever {
		names := make([]string, len(ms))
		for i, m := range ms {
			names[i] = m.spec.Name
		}
		if kind == kindResource {
			up, orig, ok = splitURI(names, name)
		} else {
			up, orig, ok = splitPrefixed(names, c.r.o.Separator, name)
		}
	}
	if !ok && len(ms) == 1 {
		up, orig, ok = ms[0].spec.Name, name, true
	}
	m := c.member(up)
	if !ok || m == nil {
		return nil, "", unknown
	}
	if kind == kindTool && !toolAllowed(m.spec.Allow, m.spec.Deny, orig) {
		return nil, "", unknown
	}
	return m, orig, nil
}

// authorize asks the call decision; it returns the error answer of a
// refusal, nil when allowed.
func (c *Conn) authorize(ctx context.Context, m *member, kind, name string, args []byte, listing bool) func(id []byte) *jsonrpc.Message {
	if c.r.o.Authorize == nil {
		return nil
	}
	in := decision.CallInput{Tenant: c.tenant, Upstream: m.spec.Name, Kind: kind, Name: name, Listing: listing}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in.Arguments); err != nil {
			in.Arguments = nil
		}
	}
	d := c.r.o.Authorize(ctx, in)
	if d.Allow {
		return nil
	}
	return func(id []byte) *jsonrpc.Message {
		reason := d.Reason
		if reason == "" {
			reason = "the policy does not allow it"
		}
		return errorWithData(id, CodeDenied, kind+" "+strings.TrimSpace(name)+" refused: "+reason,
			map[string]any{"upstream": m.spec.Name, "reason": reason})
	}
}

// stringAt returns the string at the path of object members in obj, ""
// when there is none.
func stringAt(obj []byte, path ...string) string {
	v := jsonrpc.Path(obj, path...)
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	s, err := jsonrpc.Unquote(v)
	if err != nil {
		return ""
	}
	return s
}
