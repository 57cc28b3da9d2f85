package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/spillway-dev/spillway/artifact/identity/oauthtest"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// A server's oauth key becomes its upstream's client credentials grant,
// the secret read from its source; every mistake is refused before a
// secret is read, and no error quotes the secret.
func TestServersOAuth(t *testing.T) {
	const good = `
servers:
  - name: crm
    url: http://127.0.0.1:9000/mcp
    headers: {X-Team: {env: DB_TEAM}}
    oauth:
      token_url: http://127.0.0.1:9001/token
      client_id: spillway
      client_secret: {file: SECRET_FILE}
      scopes: [tools.read, tools.call]
      resource: http://127.0.0.1:9000/mcp
`
	ls, err := loadServers(writeConfig(t, t.TempDir(), good, 0o644), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	hu, ok := ls.servers[0].Upstream.(*mcpproxy.HTTPUpstream)
	if !ok || !reflect.DeepEqual(hu.OAuth, &mcpproxy.OAuthClient{TokenURL: "http://127.0.0.1:9001/token", ClientID: "spillway",
		ClientSecret: secretValue, Scopes: []string{"tools.read", "tools.call"}, Resource: "http://127.0.0.1:9000/mcp"}) {
		t.Fatalf("upstream %+v", ls.servers[0].Upstream)
	}
	if !ls.files {
		t.Error("a secret from a file is not watched")
	}
	const base = "servers:\n  - name: crm\n    url: http://127.0.0.1:9000/mcp\n"
	for _, tt := range []struct{ name, text, want string }{
		{"with Authorization", base + "    headers: {authorization: {env: DB_TEAM}}\n    oauth: {token_url: http://h/t, client_id: a, client_secret: {env: DB_TEAM}}\n", "exclude each other"},
		{"on a command", "servers:\n  - name: c\n    command: /bin/true\n    oauth: {token_url: http://h/t, client_id: a, client_secret: {env: DB_TEAM}}\n", "not a command"},
		{"relative token_url", base + "    oauth: {token_url: /token, client_id: a, client_secret: {env: DB_TEAM}}\n", "token_url: want an absolute"},
		{"credentials in token_url", base + "    oauth: {token_url: 'http://a:b@h/t', client_id: a, client_secret: {env: DB_TEAM}}\n", "not in the URL"},
		{"no client_id", base + "    oauth: {token_url: http://h/t, client_secret: {env: DB_TEAM}}\n", "want client_id and client_secret"},
		{"no secret", base + "    oauth: {token_url: http://h/t, client_id: a}\n", "want client_id and client_secret"},
		{"secret literal", base + "    oauth: {token_url: http://h/t, client_id: a, client_secret: " + secretValue + "}\n", "want {file: PATH}"},
		{"bad scope", base + "    oauth: {token_url: http://h/t, client_id: a, client_secret: {env: DB_TEAM}, scopes: ['a b']}\n", "not a scope token"},
		{"bad resource", base + "    oauth: {token_url: http://h/t, client_id: a, client_secret: {env: DB_TEAM}, resource: 'x#y'}\n", "resource"},
		{"unknown key", base + "    oauth: {token_url: http://h/t, client_id: a, client_secret: {env: DB_TEAM}, grant: password}\n", "grant"},
		{"open secret file", base + "    oauth: {token_url: http://h/t, client_id: a, client_secret: {file: OPEN_FILE}}\n", "client_secret: file"},
		{"unset variable", base + "    oauth: {token_url: http://h/t, client_id: a, client_secret: {env: NOPE}}\n", "NOPE is not set"},
	} {
		_, err := loadServers(writeConfig(t, t.TempDir(), tt.text, 0o600), testEnv)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), secretValue) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
}

// The --upstream-oauth-* flags: the grant of --upstream-url, complete or
// refused.
func TestUpstreamOAuthFlags(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(secretValue+"\n"), 0o600)
	full := upstreamOAuthFlags{tokenURL: "http://127.0.0.1:9/token", clientID: "spillway", secretFile: secret, scopes: "a,b"}
	f := proxyFlags{upstreamURL: "http://127.0.0.1:8/mcp", upstreamTrans: "auto", upstreamOAuth: full, streamMode: mcpproxy.StreamDirect}
	up, err := f.upstream()
	hu, _ := up.(*mcpproxy.HTTPUpstream)
	if err != nil || hu == nil || hu.OAuth == nil || hu.OAuth.ClientSecret != secretValue || strings.Join(hu.OAuth.Scopes, " ") != "a b" {
		t.Fatalf("upstream %+v, %v", up, err)
	}
	noID := full
	noID.clientID = ""
	for _, tt := range []struct {
		name    string
		f       proxyFlags
		wantErr string
	}{
		{"no client id", proxyFlags{upstreamURL: f.upstreamURL, upstreamTrans: "auto", upstreamOAuth: noID}, "need --upstream-oauth-token-url, --upstream-oauth-client-id"},
		{"with Authorization", proxyFlags{upstreamURL: f.upstreamURL, upstreamTrans: "auto", upstreamOAuth: full,
			upstreamHeader: headerList{"Authorization": {"Bearer x"}}}, "exclude each other"},
		{"with servers", proxyFlags{servers: []mcpproxy.Server{{Name: "a"}}, upstreamOAuth: full}, "are for --upstream-url"},
		{"missing file", proxyFlags{upstreamURL: f.upstreamURL, upstreamTrans: "auto",
			upstreamOAuth: upstreamOAuthFlags{tokenURL: full.tokenURL, clientID: "a", secretFile: secret + ".nope"}}, "--upstream-oauth-client-secret-file"},
	} {
		tt.f.streamMode = mcpproxy.StreamDirect
		err := tt.f.check()
		if err == nil {
			_, err = tt.f.upstream()
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), secretValue) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

// spillway serve with --upstream-oauth-*: the upstream, which accepts
// only tokens its authorization server granted, receives Spillway's own
// and never the client's; neither the secret nor a token reaches the log.
func TestUpstreamOAuthServe(t *testing.T) {
	as := oauthtest.New(t)
	var mu sync.Mutex
	var auths []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		a := r.Header.Get("Authorization")
		mu.Lock()
		auths = append(auths, a)
		mu.Unlock()
		if tok, _ := strings.CutPrefix(a, "Bearer "); !as.Granted(tok) {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://upstream.test/.well-known/oauth-protected-resource"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`))
	}))
	defer up.Close()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(as.ClientSecret+"\n"), 0o600)
	data := t.TempDir()
	base, log := runServeLog(t, "--data", data, "--upstream-url", up.URL+"/mcp", "--upstream-transport", "streamable", "--log-level", "debug",
		"--upstream-oauth-token-url", as.URL+"/token", "--upstream-oauth-client-id", as.ClientID,
		"--upstream-oauth-client-secret-file", secret, "--upstream-oauth-scopes", "tools.read")
	tok := mcpToken(t, data)
	for range 3 {
		resp := mcpPost(t, base+"/mcp", tok, "", oauthInit)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"serverInfo"`) {
			t.Fatalf("%s %s", resp.Status, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if as.Grants() != 1 || len(auths) < 3 {
		t.Errorf("%d tokens granted for %d requests", as.Grants(), len(auths))
	}
	for _, a := range auths {
		if strings.Contains(a, tok) || !strings.HasPrefix(a, "Bearer ey") {
			t.Errorf("the upstream got Authorization %.30q", a)
		}
		if strings.Contains(log.String(), strings.TrimPrefix(a, "Bearer ")) {
			t.Error("the log holds Spillway's token")
		}
	}
	if strings.Contains(log.String(), as.ClientSecret) {
		t.Error("the log holds the client secret")
	}
	if !strings.Contains(log.String(), "fetched an access token for the upstream") {
		t.Errorf("the log lacks the fetch:\n%s", rsTail(log.String()))
	}
}
