package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/spillway-dev/spillway/artifact/identity/oauthtest"
	"github.com/spillway-dev/spillway/policy/policytest"
)

const oauthInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestOAuthServe runs serve as an OAuth resource server in front of the
// everything server, with a static token beside it and debug logging: the
// metadata is served, access tokens are accepted or refused with the
// spec's challenges, the management routes keep their static-token rule,
// and no token reaches the log or the upstream.
func TestOAuthServe(t *testing.T) {
	as := oauthtest.New(t)
	up, seen := recordingUpstream(t, startEverythingServer(t))
	const static = "static-token-0123456789abcdef"
	base, log := runServeLog(t, "--data", t.TempDir(), "--upstream-url", up, "--log-level", "debug",
		"--oauth-issuer", as.URL, "--oauth-jwks-url", as.JWKSURL(), "--auth-tokens", static+"=ops")
	resource := base + "/mcp"
	metaURL := base + "/.well-known/oauth-protected-resource/mcp"
	for _, u := range []string{metaURL, base + "/.well-known/oauth-protected-resource"} {
		checkServedMetadata(t, u, resource, as.URL)
	}

	good := as.Mint(t, map[string]any{"sub": "alice", "aud": resource})
	toks := map[string]string{
		"valid":          good,
		"static":         static,
		"wrong audience": as.Mint(t, map[string]any{"sub": "alice", "aud": "http://other.example/mcp"}),
		"wrong issuer":   as.Mint(t, map[string]any{"sub": "alice", "aud": resource, "iss": "http://evil.example"}),
		"expired":        as.Mint(t, map[string]any{"sub": "alice", "aud": resource, "exp": time.Now().Add(-time.Hour).Unix()}),
		"alg none":       b64JSON(`{"alg":"none","kid":"k1"}`) + "." + b64JSON(`{"iss":"`+as.URL+`","sub":"alice","aud":"`+resource+`","exp":9999999999}`) + ".",
	}
	challenge := `Bearer resource_metadata="` + metaURL + `"`
	for name, tok := range toks {
		resp := mcpPost(t, resource, tok, "", oauthInit)
		resp.Body.Close()
		want, wantCh := http.StatusUnauthorized, challenge+`, error="invalid_token"`
		if name == "valid" || name == "static" {
			want, wantCh = http.StatusOK, ""
		}
		if resp.StatusCode != want || resp.Header.Get("WWW-Authenticate") != wantCh {
			t.Errorf("%s: %s, WWW-Authenticate %q; want %d %q", name, resp.Status, resp.Header.Get("WWW-Authenticate"), want, wantCh)
		}
	}
	resp := mcpPost(t, resource, "", "", oauthInit)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != challenge {
		t.Errorf("no token: %s, %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	// The management routes keep their rule: the static tokens.
	for _, tt := range []struct {
		tok  string
		want int
	}{{good, http.StatusUnauthorized}, {static, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tt.tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("/metrics: %s, want %d", resp.Status, tt.want)
		}
	}
	for _, want := range []string{"/mcp accepts OAuth access tokens", `level=DEBUG msg="access token refused" reason="wrong audience"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, rsTail(log.String()))
		}
	}
	for name, tok := range toks {
		if strings.Contains(log.String(), tok) {
			t.Errorf("the log holds the %s token", name)
		}
		if strings.Contains(seen(), tok) {
			t.Errorf("the upstream received the %s token", name)
		}
	}
	if !strings.Contains(seen(), "POST /mcp") {
		t.Errorf("the upstream saw no request: %q", seen())
	}
}

// recordingUpstream puts a reverse proxy on loopback in front of the MCP
// server at target; seen returns every request line and header it
// passed on, as text.
func recordingUpstream(t *testing.T, target string) (string, func() string) {
	t.Helper()
	u, _ := url.Parse(target)
	var mu sync.Mutex
	var b strings.Builder
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.Path)
		r.Header.Write(&b)
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path, func() string {
		mu.Lock()
		defer mu.Unlock()
		return b.String()
	}
}

// TestOAuthScopeRequired: a valid token without a required scope gets 403
// insufficient_scope, with the scope named.
func TestOAuthScopeRequired(t *testing.T) {
	as := oauthtest.New(t)
	up := startEverythingServer(t)
	base, _ := runServeLog(t, "--data", t.TempDir(), "--upstream-url", up,
		"--oauth-issuer", as.URL, "--oauth-jwks-url", as.JWKSURL(), "--oauth-scopes", "mcp:tools")
	resource := base + "/mcp"
	for _, tt := range []struct {
		scope string
		want  int
		ch    string
	}{
		{"mcp:read", http.StatusForbidden, `Bearer resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp", error="insufficient_scope", scope="mcp:tools"`},
		{"mcp:read mcp:tools", http.StatusOK, ""},
	} {
		resp := mcpPost(t, resource, as.Mint(t, map[string]any{"sub": "alice", "aud": resource, "scope": tt.scope}), "", oauthInit)
		resp.Body.Close()
		if resp.StatusCode != tt.want || resp.Header.Get("WWW-Authenticate") != tt.ch {
			t.Errorf("scope %q: %s %q", tt.scope, resp.Status, resp.Header.Get("WWW-Authenticate"))
		}
	}
}

// TestOAuthFlags: OAuth flags without an issuer, or an issuer without
// keys, are refused; OAuth alone lets --listen leave loopback, not
// --api-listen (whose API it does not open).
func TestOAuthFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--oauth-jwks-url", "http://127.0.0.1:1/jwks"}, "need --oauth-issuer"},
		{[]string{"--oauth-issuer", "http://127.0.0.1:1"}, "--oauth-jwks-url"},
		{[]string{"--oauth-issuer", "http://127.0.0.1:1", "--oauth-jwks-url", "http://127.0.0.1:1/jwks", "--oauth-jwks-file", "x"}, "--oauth-jwks-url"},
		{[]string{"--oauth-issuer", "http://127.0.0.1:1", "--oauth-jwks-url", "http://127.0.0.1:1/jwks", "--api-listen", "0.0.0.0:0"}, "--api-listen"},
	} {
		fs := newFlagSet("serve")
		var c serveConfig
		c.register(fs)
		if err := parseLayered(fs, append([]string{"--data", t.TempDir()}, tt.args...), func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		err := c.oauth.check()
		if err == nil {
			err = c.checkExposures(nil)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
	var c serveConfig
	c.listen, c.oauth.issuer = "0.0.0.0:8080", "http://127.0.0.1:1"
	if err := c.checkExposures(nil); err != nil {
		t.Errorf("OAuth on a public --listen: %v", err)
	}
}

// TestOAuthTypeScriptClient: the TypeScript SDK's client, told only the
// MCP URL and its client credentials, reads the challenge and the
// protected-resource metadata, gets a token from the test authorization
// server and calls a tool through Spillway.
func TestOAuthTypeScriptClient(t *testing.T) {
	rt := rsSetup(t)
	as := oauthtest.New(t)
	up := startEverythingServer(t)
	base := runServe(t, "--data", t.TempDir(), "--upstream-url", up,
		"--oauth-issuer", as.URL, "--oauth-jwks-url", as.JWKSURL(), "--oauth-scopes", "mcp:tools")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stderr := new(policytest.Buffer)
	cmd, in, out := rt.start(t, ctx, stderr, "oauthclient.mjs", base+"/mcp", as.URL, as.ClientID, as.ClientSecret, "mcp:tools", "test_simple_text", `{}`)
	in.Close()
	var got struct {
		Tools  []string
		Result struct {
			Content []struct{ Text string }
		}
		URLs  []string
		Error string
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	io.Copy(io.Discard, out)
	cmd.Wait()
	if err := json.Unmarshal([]byte(line), &got); err != nil || got.Error != "" {
		t.Fatalf("client: %v %s; printed %.2000s; stderr:\n%s", err, got.Error, line, rsTail(stderr.String()))
	}
	if !slices.Contains(got.Tools, "test_simple_text") || len(got.Result.Content) == 0 || got.Result.Content[0].Text == "" {
		t.Errorf("tools %v, result %+v", got.Tools, got.Result)
	}
	// It was refused, read the metadata Spillway named, got a token, retried.
	for _, want := range []string{
		"POST " + base + "/mcp 401",
		"GET " + base + "/.well-known/oauth-protected-resource/mcp 200",
		"POST " + as.URL + "/token 200",
		"POST " + base + "/mcp 200",
	} {
		if !slices.Contains(got.URLs, want) {
			t.Errorf("the client did not fetch %q; it fetched:\n%s", want, strings.Join(got.URLs, "\n"))
		}
	}
}

// checkServedMetadata fetches an RFC 9728 document and checks its fields
// and their types.
func checkServedMetadata(t *testing.T, u, resource, issuer string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: %s %s %v", u, resp.Status, resp.Header.Get("Content-Type"), err)
	}
	want := map[string]any{"resource": resource, "authorization_servers": []any{issuer}, "bearer_methods_supported": []any{"header"}}
	gotJSON, _ := json.Marshal(doc)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("%s: %s, want %s", u, gotJSON, wantJSON)
	}
}

func b64JSON(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestOAuthJWKSFile: --oauth-jwks-file takes a JWKS or PEM public keys,
// and the resource defaults to the public URL's /mcp.
func TestOAuthJWKSFile(t *testing.T) {
	k := oauthtest.NewKey(t, "file-key")
	pub, err := k.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	var raw ecdsa.PublicKey
	if err := jwk.Export(pub, &raw); err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&raw)
	set := jwk.NewSet()
	set.AddKey(pub)
	setJSON, _ := json.Marshal(set)
	dir := t.TempDir()
	files := map[string][]byte{"keys.jwks": setJSON, "keys.pem": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})}
	public, _ := url.Parse("https://spill.example.com/base")
	for name, b := range files {
		path := filepath.Join(dir, name)
		os.WriteFile(path, b, 0o644)
		f := oauthFlags{issuer: "https://as.example.com", jwksFile: path, tenantClaim: "sub", clockSkew: time.Second}
		v, err := f.build(public, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := v.Metadata().Resource; got != "https://spill.example.com/base/mcp" {
			t.Errorf("resource %q", got)
		}
		tok := oauthtest.MintWith(t, k, map[string]any{"iss": "https://as.example.com", "sub": "alice",
			"aud": "https://spill.example.com/base/mcp", "exp": time.Now().Add(time.Minute).Unix()})
		if p, err := v.Verify(context.Background(), tok); err != nil || p.Tenant != "alice" {
			t.Errorf("%s: %+v, %v", name, p, err)
		}
	}
}
