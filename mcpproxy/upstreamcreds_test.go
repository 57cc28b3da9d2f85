package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/artifact/identity/oauthtest"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// The client's credentials of the tests below: a static token, and an
// OAuth access token of the client's own authorization server.
const credsStatic = "static-client-token-0123456789"

const credsResource = "http://spillway.test/mcp"

// hostile is a real MCP server (the official SDK, both eras; tools echo
// and big, 44 kB of text) behind a
// handler that records every header it receives, as an upstream curious
// about its clients' credentials would. With as set, it refuses (401 and
// a challenge naming its protected-resource metadata) a request whose
// bearer token as did not grant or that expired; with refuse set, it
// refuses every request so.
type hostile struct {
	as     *oauthtest.AS
	refuse bool
	mu     sync.Mutex
	seen   []http.Header
	url    string
	// revoked are tokens refused although as granted them.
	revoked sync.Map
}

func newHostile(t *testing.T, as *oauthtest.AS, refuse bool) *hostile {
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("big output ", 4000)}}}, nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	h := &hostile{as: as, refuse: refuse}
	h.url = serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Clone())
		h.mu.Unlock()
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		_, revoked := h.revoked.Load(tok)
		if h.refuse || revoked || (h.as != nil && !h.as.Granted(tok)) {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://upstream.test/.well-known/oauth-protected-resource"`)
			http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	return h
}

// headers returns every request's headers so far, as text.
func (h *hostile) headers() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, hd := range h.seen {
		hd.Write(&b)
		b.WriteString("\n")
	}
	return b.String()
}

// authorizations returns every Authorization the upstream received.
func (h *hostile) authorizations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, hd := range h.seen {
		out = append(out, hd.Values("Authorization")...)
	}
	return out
}

// credsProxy serves a proxy of up on loopback whose /mcp accepts
// credsStatic and access tokens of clientAS; it returns its URL.
func credsProxy(t *testing.T, up mcpproxy.Upstream, clientAS *oauthtest.AS, o mcpproxy.Options) string {
	t.Helper()
	tenants, err := identity.NewTenants(map[string]string{credsStatic: "static"})
	if err != nil {
		t.Fatal(err)
	}
	oa, err := identity.NewOAuth(identity.OAuthConfig{Issuer: clientAS.URL, JWKSURL: clientAS.JWKSURL(), Resource: credsResource})
	if err != nil {
		t.Fatal(err)
	}
	o.Upstream, o.Tenants = up, tenants.WithOAuth(oa)
	p, err := mcpproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return serve(t, p)
}

// answer is one JSON-RPC exchange as the client saw it.
type answer struct {
	status    int
	challenge string
	session   string
	msgs      []map[string]json.RawMessage
}

// last is the answer's last message, its result or its error, as text.
func (a answer) last() (result, errText string) {
	if len(a.msgs) == 0 {
		return "", ""
	}
	m := a.msgs[len(a.msgs)-1]
	return string(m["result"]), string(m["error"])
}

// mcpCall posts one JSON-RPC request with the given token and headers,
// and reads its answer (a JSON body or an event stream).
func mcpCall(t *testing.T, url, tok string, hdr map[string]string, id int, method string, params any) answer {
	t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}
	if strings.HasPrefix(method, "notifications/") {
		delete(m, "id")
	}
	body, _ := json.Marshal(m)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, challenge: resp.Header.Get("WWW-Authenticate"), session: resp.Header.Get("Mcp-Session-Id")}
	var one map[string]json.RawMessage
	if json.Unmarshal(b, &one) == nil {
		a.msgs = append(a.msgs, one)
		return a
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		var m map[string]json.RawMessage
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && json.Unmarshal([]byte(d), &m) == nil {
			a.msgs = append(a.msgs, m)
		}
	}
	return a
}

// callEcho calls the echo tool (named tool) with token in era, and
// returns the client's answer to the call (the initialize's, when that
// failed).
func callEcho(t *testing.T, url, tok, era, tool string) answer {
	t.Helper()
	args := map[string]any{"name": tool, "arguments": map[string]any{"text": "hi"}}
	if era == "2026-07-28" {
		args["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": era, "io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/clientInfo": map[string]any{"name": "t", "version": "1"}}
		return mcpCall(t, url, tok, map[string]string{"Mcp-Protocol-Version": era, "Mcp-Method": "tools/call", "Mcp-Name": tool}, 2, "tools/call", args)
	}
	init := mcpCall(t, url, tok, nil, 1, "initialize", map[string]any{"protocolVersion": era, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "t", "version": "1"}})
	if init.status != http.StatusOK || init.session == "" {
		return init
	}
	hdr := map[string]string{"Mcp-Session-Id": init.session, "Mcp-Protocol-Version": era}
	mcpCall(t, url, tok, hdr, 0, "notifications/initialized", nil)
	return mcpCall(t, url, tok, hdr, 2, "tools/call", args)
}

// credsUpstreams are the two ways an HTTP upstream is configured: alone
// (the relay face, and its bridges) and as a gateway's server (the
// terminating face); the tool's name as a client calls it.
func credsUpstreams(up *mcpproxy.HTTPUpstream) map[string]struct {
	up   mcpproxy.Upstream
	tool string
} {
	return map[string]struct {
		up   mcpproxy.Upstream
		tool string
	}{
		"relay":   {up, "echo"},
		"gateway": {&mcpproxy.Gateway{Servers: []mcpproxy.Server{{Name: "crm", Upstream: up}}}, "echo"},
	}
}

var credsEras = []string{"2025-11-25", "2026-07-28"}

// An upstream configured for the client credentials grant receives
// Spillway's own token, granted by its authorization server, and never
// a client's credential (a static token or an OAuth access token), in
// both eras, alone or behind the gateway. The token is fetched once,
// reused until shortly before it expires, then fetched again.
func TestUpstreamGetsSpillwaysToken(t *testing.T) {
	clientAS := oauthtest.New(t)
	clientTok := clientAS.Mint(t, map[string]any{"sub": "alice", "aud": credsResource})
	for name, tt := range credsUpstreams(nil) {
		t.Run(name, func(t *testing.T) {
			upAS := oauthtest.New(t)
			upAS.SetTokenTTL(3 * time.Second)
			h := newHostile(t, upAS, false)
			hu := &mcpproxy.HTTPUpstream{URL: h.url, OAuth: &mcpproxy.OAuthClient{TokenURL: upAS.URL + "/token",
				ClientID: upAS.ClientID, ClientSecret: upAS.ClientSecret, Scopes: []string{"tools.read"}}}
			up := tt.up
			if g, ok := up.(*mcpproxy.Gateway); ok {
				g.Servers[0].Upstream = hu
			} else {
				up = hu
			}
			url := credsProxy(t, up, clientAS, mcpproxy.Options{})
			calls := func() {
				for _, era := range credsEras {
					for _, tok := range []string{credsStatic, clientTok} {
						a := callEcho(t, url, tok, era, tt.tool)
						if res, e := a.last(); !strings.Contains(res, "echo hi") {
							t.Fatalf("%s: %d %s %s", era, a.status, res, e)
						}
					}
				}
			}
			calls()
			if n := upAS.Grants(); n != 1 {
				t.Errorf("%d tokens granted for calls within one token's life", n)
			}
			time.Sleep(3100 * time.Millisecond) // the token expired
			calls()
			if n := upAS.Grants(); n != 2 {
				t.Errorf("%d tokens granted after the first expired, want 2", n)
			}
			seen := h.headers()
			for _, tok := range []string{credsStatic, clientTok} {
				if strings.Contains(seen, tok) {
					t.Errorf("a client's token reached the upstream:\n%s", seen)
				}
			}
			auths := h.authorizations()
			for _, a := range auths {
				if tok, ok := strings.CutPrefix(a, "Bearer "); !ok || tok == clientTok || !strings.HasPrefix(tok, "ey") {
					t.Errorf("the upstream got Authorization %.30q", a)
				}
			}
			if len(auths) < 8 {
				t.Errorf("the upstream got %d requests with a token", len(auths))
			}
		})
	}
}

// An upstream with no credentials of its own configured still gets none
// of the client's, in both eras, alone or behind the gateway.
func TestUpstreamGetsNoClientToken(t *testing.T) {
	clientAS := oauthtest.New(t)
	clientTok := clientAS.Mint(t, map[string]any{"sub": "alice", "aud": credsResource})
	h := newHostile(t, nil, false)
	for name, tt := range credsUpstreams(&mcpproxy.HTTPUpstream{URL: h.url}) {
		url := credsProxy(t, tt.up, clientAS, mcpproxy.Options{})
		for _, era := range credsEras {
			for _, tok := range []string{credsStatic, clientTok} {
				if res, e := callEcho(t, url, tok, era, tt.tool).last(); !strings.Contains(res, "echo hi") {
					t.Fatalf("%s %s: %s %s", name, era, res, e)
				}
			}
		}
	}
	if a := h.authorizations(); len(a) > 0 {
		t.Errorf("the upstream got Authorization %q", a)
	}
	if seen := h.headers(); strings.Contains(seen, credsStatic) || strings.Contains(seen, clientTok) || !strings.Contains(seen, "Mcp-Session-Id") {
		t.Errorf("the upstream's headers:\n%s", seen)
	}
}

// refusedCleanly fails t unless a is an upstream error: no 401, no
// challenge, a JSON-RPC error naming why.
func refusedCleanly(t *testing.T, what string, a answer, why string) {
	t.Helper()
	res, e := a.last()
	if a.status == http.StatusUnauthorized || a.challenge != "" || res != "" || !strings.Contains(e, why) {
		t.Errorf("%s: %d, WWW-Authenticate %q, result %s, error %s; want an upstream error saying %q", what, a.status, a.challenge, res, e, why)
	}
}

// An upstream's own 401, with its challenge, reaches the client as an
// upstream error, never as a 401 or a WWW-Authenticate (which would send
// an MCP client into an OAuth flow against Spillway), on every face and
// in both eras.
func TestUpstream401IsAnUpstreamError(t *testing.T) {
	clientAS := oauthtest.New(t)
	h := newHostile(t, nil, true)
	for name, tt := range credsUpstreams(&mcpproxy.HTTPUpstream{URL: h.url, Header: http.Header{"Authorization": {"Bearer spillway-own"}}}) {
		url := credsProxy(t, tt.up, clientAS, mcpproxy.Options{})
		for _, era := range credsEras {
			why := map[string]string{"relay": "refused Spillway's credentials", "gateway": "upstream answered 401"}[name]
			refusedCleanly(t, name+" "+era, callEcho(t, url, credsStatic, era, tt.tool), why)
		}
	}
	if len(h.authorizations()) == 0 {
		t.Fatal("the upstream was never asked")
	}
}

// A token endpoint that is down: the client gets an upstream error
// saying Spillway has no credentials for the upstream, not a 401, and
// the upstream is never asked.
func TestUpstreamTokenEndpointDown(t *testing.T) {
	clientAS := oauthtest.New(t)
	h := newHostile(t, nil, false)
	down := serve(t, http.NotFoundHandler())
	hu := &mcpproxy.HTTPUpstream{URL: h.url, OAuth: &mcpproxy.OAuthClient{TokenURL: strings.TrimSuffix(down, "/mcp") + "/token",
		ClientID: "spillway", ClientSecret: "upstream-secret-0123"}}
	for name, tt := range credsUpstreams(hu) {
		url := credsProxy(t, tt.up, clientAS, mcpproxy.Options{})
		for _, era := range credsEras {
			a := callEcho(t, url, credsStatic, era, tt.tool)
			why := map[string]string{"relay": "could not get its credentials", "gateway": "upstreamauth: no credentials for the upstream"}[name]
			refusedCleanly(t, name+" "+era, a, why)
			if _, e := a.last(); strings.Contains(e, "upstream-secret") {
				t.Errorf("the error holds the secret: %s", e)
			}
		}
	}
	if n := len(h.headers()); n != 0 {
		t.Errorf("the upstream was asked %d times without a token", n)
	}
}

// The caller's access token claims reach the call decision: a policy
// that allows a tool only to members of the admins group (its groups
// claim) lets alice call it, refuses bob, and refuses a static token,
// which has no claims, in both eras.
func TestClaimsReachCallPolicy(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.rego"), []byte(`package spillway

default call := {"allow": false, "reason": "admins only"}

call := {"allow": true} if "admins" in input.claims.groups
`), 0o600)
	eng, err := policy.New(context.Background(), policy.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	clientAS := oauthtest.New(t)
	h := newHostile(t, nil, false)
	url := credsProxy(t, &mcpproxy.Gateway{Servers: []mcpproxy.Server{{Name: "crm", Upstream: &mcpproxy.HTTPUpstream{URL: h.url}}}},
		clientAS, mcpproxy.Options{CallPolicy: eng})
	alice := clientAS.Mint(t, map[string]any{"sub": "alice", "aud": credsResource, "groups": []string{"ops", "admins"}})
	bob := clientAS.Mint(t, map[string]any{"sub": "bob", "aud": credsResource, "groups": []string{"users"}})
	for _, era := range credsEras {
		if res, e := callEcho(t, url, alice, era, "echo").last(); !strings.Contains(res, "echo hi") {
			t.Errorf("%s: alice, an admin: %s %s", era, res, e)
		}
		for name, tok := range map[string]string{"bob": bob, "static": credsStatic} {
			if res, e := callEcho(t, url, tok, era, "echo").last(); res != "" || !strings.Contains(e, "admins only") {
				t.Errorf("%s: %s: %s %s", era, name, res, e)
			}
		}
	}
}

// The caller's claims reach the offload and mint decisions too: a policy
// that offloads, and mints a link, only for alice's calls offloads her
// big result and keeps bob's inline.
func TestClaimsReachOffloadPolicy(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.rego"), []byte(`package spillway

default offload := {"offload": false}

offload := {"offload": true, "ttl_seconds": 600} if {
	input.size > 16384
	input.claims.sub == "alice"
}

default mint := {"allow": false, "reason": "no caller"}

mint := {"allow": true} if input.claims.sub == "alice"

default fetch := {"allow": false}
`), 0o600)
	eng, err := policy.New(context.Background(), policy.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	svc := newService(t)
	svc.Mint = eng
	clientAS := oauthtest.New(t)
	h := newHostile(t, nil, false)
	url := credsProxy(t, &mcpproxy.HTTPUpstream{URL: h.url, Transport: "streamable"}, clientAS,
		mcpproxy.Options{Artifacts: svc, Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})})
	alice := clientAS.Mint(t, map[string]any{"sub": "alice", "aud": credsResource})
	bob := clientAS.Mint(t, map[string]any{"sub": "bob", "aud": credsResource})
	for _, era := range credsEras {
		res, e := callEcho(t, url, alice, era, "big").last()
		if len(res) > 16384 || !strings.Contains(res, "/a/") {
			t.Errorf("%s: alice's big result was not offloaded (%d bytes): %.300s %s", era, len(res), res, e)
		}
		if res, e := callEcho(t, url, bob, era, "big").last(); len(res) < 40000 {
			t.Errorf("%s: bob's big result was not kept inline (%d bytes): %.300s %s", era, len(res), res, e)
		}
	}
}

// An Authorization header beside OAuth is refused, alone and as a
// gateway's server: which of the two would reach the upstream is not to
// be guessed.
func TestUpstreamOAuthWithAuthorizationRefused(t *testing.T) {
	hu := &mcpproxy.HTTPUpstream{URL: "http://127.0.0.1:1/mcp", Header: http.Header{"Authorization": {"Bearer x"}},
		OAuth: &mcpproxy.OAuthClient{TokenURL: "http://127.0.0.1:2/token", ClientID: "a", ClientSecret: "b"}}
	for name, tt := range credsUpstreams(hu) {
		p, err := mcpproxy.New(mcpproxy.Options{Upstream: tt.up})
		if err == nil {
			p.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "exclude each other") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

// An upstream that refuses Spillway's cached token (revoked before it
// expired) gets the request again with a fresh one: the client sees its
// answer, not the refusal.
func TestUpstreamRevokedTokenRefreshed(t *testing.T) {
	clientAS, upAS := oauthtest.New(t), oauthtest.New(t)
	h := newHostile(t, upAS, false)
	url := credsProxy(t, &mcpproxy.HTTPUpstream{URL: h.url, Transport: "streamable", OAuth: &mcpproxy.OAuthClient{TokenURL: upAS.URL + "/token",
		ClientID: upAS.ClientID, ClientSecret: upAS.ClientSecret}}, clientAS, mcpproxy.Options{})
	era := "2026-07-28"
	if res, e := callEcho(t, url, credsStatic, era, "echo").last(); !strings.Contains(res, "echo hi") {
		t.Fatalf("%s %s", res, e)
	}
	first := h.authorizations()[0]
	h.revoked.Store(strings.TrimPrefix(first, "Bearer "), true)
	time.Sleep(5100 * time.Millisecond) // a token younger than 5 s is not dropped on a 401
	if res, e := callEcho(t, url, credsStatic, era, "echo").last(); !strings.Contains(res, "echo hi") {
		t.Fatalf("after the revocation: %s %s", res, e)
	}
	auths := h.authorizations()
	if upAS.Grants() != 2 || auths[len(auths)-1] == first || auths[len(auths)-2] != first {
		t.Errorf("%d grants; the upstream got %d requests, the last with the first token: %v", upAS.Grants(), len(auths), auths[len(auths)-1] == first)
	}
}
