package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// answersInitialize is a stdio MCP server that answers initialize and
// nothing else: enough for a client to open a session.
const answersInitialize = `sh -c 'while read l; do case "$l" in *initialize*) echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}";; esac; done'`

// In every documented mode, a process that holds one narrow link (a
// sandbox) reaches that link and nothing else on the listener it points
// at: no MCP session (which would list and read every artifact and call
// every tool), no management API. Before, with no inbound tokens (the
// default, `make run`, --stdio, --api-listen), /mcp answered initialize
// to anyone.
func TestLinkHolderReadsOnlyItsLink(t *testing.T) {
	const owner = "owner-token-0123456789"
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sandbox","version":"1"}}}`
	for _, mode := range []struct {
		name   string
		args   []string
		tenant string
	}{
		{"default (make run)", nil, ""},
		{"--stdio", []string{"--stdio"}, ""},
		{"--auth-tokens", []string{"--auth-tokens", owner + "=team"}, "team"},
		{"--api-listen", []string{"--api-listen", "127.0.0.1:0"}, ""},
	} {
		t.Run(mode.name, func(t *testing.T) {
			data := t.TempDir()
			s := startServer(t, data, append([]string{"--upstream-cmd", answersInitialize}, mode.args...)...)
			base := "http://" + s.Addr()
			a, l := narrowLink(t, s, mode.tenant)
			for _, tok := range []string{"", linkToken(t, l)} {
				resp := mcpPost(t, base+"/mcp", tok, "", initialize)
				resp.Body.Close()
				if resp.StatusCode != 401 && resp.StatusCode != 404 {
					t.Errorf("initialize (link token sent: %v) = %d (session %q), want 401 or 404", tok != "", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
				}
			}
			for _, path := range []string{"/v1/artifacts/" + a.ID, "/v1/artifacts/" + a.ID + "/links"} {
				if resp, b := apiCall(t, "GET", base+path, nil, "Authorization", "Bearer "+linkToken(t, l)); resp.StatusCode != 401 && resp.StatusCode != 404 && resp.StatusCode != 405 {
					t.Errorf("GET %s = %d %s", path, resp.StatusCode, b)
				}
			}
			stillThere(t, l)
		})
	}
}

// The token that guards /mcp without inbound tokens opens it, and
// survives a restart (an agent is configured once).
func TestLocalMCPToken(t *testing.T) {
	data := t.TempDir()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"agent","version":"1"}}}`
	base := startServe(t, data, "--upstream-cmd", answersInitialize)
	tok := mcpToken(t, data)
	resp := mcpPost(t, base+"/mcp", tok, "", initialize)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize with the local token = %d", resp.StatusCode)
	}
	base = startServe(t, data, "--upstream-cmd", answersInitialize)
	if again := mcpToken(t, data); again != tok {
		t.Fatal("a restart made a new token")
	}
	// The API stays off: the local token is no inbound identity.
	if resp, b := apiCall(t, "POST", base+"/v1/artifacts", strings.NewReader("x"), "Authorization", "Bearer "+tok,
		"Content-Type", "application/octet-stream"); resp.StatusCode != 404 {
		t.Fatalf("upload with the local MCP token = %d %s", resp.StatusCode, b)
	}
}

// The Kubernetes mode: the shipped config and policy (deploy/kubernetes),
// tokens from SPILLWAY_AUTH_TOKENS as the secret sets them, and only what
// a test machine lacks overridden (addresses, store, key file, upstream).
func TestLinkHolderKubernetesConfig(t *testing.T) {
	const owner = "k8s-owner-token-0123456789"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
	}))
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	data := t.TempDir()
	env := map[string]string{"SPILLWAY_AUTH_TOKENS": owner + "=team"}
	s := startServerEnv(t, data, func(k string) string { return env[k] },
		"--config", "../../deploy/kubernetes/config/spillway.yaml", "--policy", "../../deploy/kubernetes/policy",
		"--listen", addr, "--public-url", "http://"+addr, "--store", filepath.Join(data, "artifacts"),
		"--key-file", filepath.Join(data, "signing.keys"), "--upstream-url", up.URL+"/mcp", "--decision-log", "")
	base := "http://" + addr
	a, l := narrowLink(t, s, "team")
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sandbox","version":"1"}}}`
	for _, tok := range []string{"", linkToken(t, l)} {
		resp := mcpPost(t, base+"/mcp", tok, "", initialize)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("initialize (link token sent: %v) = %d, want 401", tok != "", resp.StatusCode)
		}
	}
	if resp, b := apiCall(t, "GET", base+"/v1/artifacts/"+a.ID, nil, "Authorization", "Bearer "+linkToken(t, l)); resp.StatusCode != 401 {
		t.Errorf("GET /v1 with the link token = %d %s", resp.StatusCode, b)
	}
	stillThere(t, l)
	// The secret's token is the way in.
	resp := mcpPost(t, base+"/mcp", owner, "", initialize)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("initialize with the secret's token = %d", resp.StatusCode)
	}
}
