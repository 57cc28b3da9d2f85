package gateway

import (
	"encoding/json"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
)

// The stateless era (2026-07-28) on a Conn. Over HTTP the terminating face
// bridges such clients to the session era the Conn speaks; over stdio the
// client's messages reach the Conn as they are, so the Conn speaks that
// era too: a client that opens with server/discover, or with a request
// whose _meta names a stateless revision, has every upstream connected
// with the capabilities and client info of that first request (one stdio
// client, one set), its server/discover answered from the merged
// upstreams, the envelope's _meta kept from the upstreams (they speak the
// session era to the Conn), and every result it gets marked
// resultType "complete".

// statelessRequest reports whether req is a stateless-era client's.
func statelessRequest(req *jsonrpc.Message) bool {
	return req.Method == "server/discover" || mcpheader.Stateless(jsonrpc.MetaString(req, jsonrpc.MetaProtocolVersion))
}

// statelessInit is the initialize the upstreams are given for a
// stateless-era client, from its first request's _meta.
func statelessInit(req *jsonrpc.Message) *jsonrpc.Message {
	caps := jsonrpc.Meta(req, jsonrpc.MetaClientCapabilities)
	if len(caps) == 0 || caps[0] != '{' {
		caps = []byte(`{}`)
	}
	info := jsonrpc.Meta(req, "io.modelcontextprotocol/clientInfo")
	if len(info) == 0 || info[0] != '{' {
		info = []byte(`{"name":"spillway-gateway","version":"1"}`)
	}
	return jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":"gw-init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` +
		string(caps) + `,"clientInfo":` + string(info) + `}}`)
}

// startStateless connects every upstream for a stateless-era client whose
// first request is req; the client's requests wait for it (ready).
func (c *Conn) startStateless(req *jsonrpc.Message) {
	c.stateless.Store(true)
	ms, ok := c.connectAll(statelessInit(req))
	if !ok {
		return
	}
	init := c.initializeResult(statelessInit(req), ms)
	c.mu.Lock()
	c.discovered = init
	c.mu.Unlock()
	close(c.ready)
}

// discover answers server/discover from the merged upstreams.
func (c *Conn) discover(req *jsonrpc.Message) {
	c.mu.Lock()
	init := c.discovered
	c.mu.Unlock()
	if init == nil { // cannot be: requests wait for startStateless
		init = Initialize()
	}
	var r struct {
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions string          `json:"instructions,omitempty"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
	}
	json.Unmarshal(init, &r)
	out := map[string]any{"supportedVersions": []string{mcpheader.FirstStateless}, "capabilities": r.Capabilities,
		"_meta": map[string]any{"io.modelcontextprotocol/serverInfo": r.ServerInfo}}
	if r.Instructions != "" {
		out["instructions"] = r.Instructions
	}
	b, _ := json.Marshal(out)
	c.push(jsonrpc.Response(req.ID, b))
}

// cacheable are the methods whose stateless-era results carry ttlMs and
// cacheScope.
var cacheable = map[string]bool{"server/discover": true, "tools/list": true, "prompts/list": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true}

// asked remembers the method of a stateless-era client's request, for
// completed to shape its answer.
func (c *Conn) asked(req *jsonrpc.Message) {
	if c.stateless.Load() {
		c.methods.Store(jsonrpc.Key(req.ID), req.Method)
	}
}

// completed shapes a result for a stateless-era client: resultType
// "complete" unless the result says otherwise, and for a list, a read or
// discover ttlMs 0 and cacheScope "private" (nothing a gateway lists is
// the same for every client: the call decision filters it per tenant).
func (c *Conn) completed(msg *jsonrpc.Message) *jsonrpc.Message {
	if !c.stateless.Load() {
		return msg
	}
	method, _ := c.methods.LoadAndDelete(jsonrpc.Key(msg.ID))
	if msg.Result == nil || msg.Result[0] != '{' {
		return msg
	}
	r := msg.Result
	set := func(key string, v string) {
		if jsonrpc.RawMember(r, key) == nil {
			if out, ok := jsonrpc.SetPath(r, []byte(v), key); ok {
				r = out
			}
		}
	}
	set("resultType", `"complete"`)
	if m, _ := method.(string); cacheable[m] {
		set("ttlMs", "0")
		set("cacheScope", `"private"`)
	}
	if len(r) == len(msg.Result) {
		return msg
	}
	return msg.WithResult(r)
}
