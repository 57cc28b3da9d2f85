package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gatewayConfig writes a config file of two servers: tools (bigtool) and
// gone (a URL nothing answers, with a header from a private file holding
// secretValue). It returns the file's name and the secret file's.
func gatewayConfig(t *testing.T) (cfg, secret string) {
	t.Helper()
	dir := t.TempDir()
	secret = filepath.Join(dir, "gone.token")
	if err := os.WriteFile(secret, []byte(secretValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(dir, "servers.yaml")
	writeServers(t, cfg, "servers:\n"+bigtoolServer("tools", bigtoolBin(t))+goneServer(secret))
	return cfg, secret
}

func goneServer(secretFile string) string {
	return "  - name: gone\n    url: http://127.0.0.1:1/mcp\n    headers:\n      Authorization: {file: " + secretFile + "}\n"
}

// readyzBody fetches /readyz and decodes it.
func readyzBody(t *testing.T, url string) (int, string, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	json.Unmarshal(b, &body)
	return resp.StatusCode, string(b), body
}

// /readyz tells each server's connections, up and down, and its last
// error, to the callers that get details (here --api-listen), and no
// header value; a server that is down leaves the process ready.
func TestGatewayReadyz(t *testing.T) {
	cfg, _ := gatewayConfig(t)
	data := t.TempDir()
	s := startServer(t, data, "--config", cfg, "--api-listen", "127.0.0.1:0")
	base := "http://" + s.Addr()
	// A session connects to every server.
	resp := mcpPost(t, base+"/mcp", mcpToken(t, data), "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %s", resp.Status)
	}
	var raw string
	eventually(t, 20*time.Second, "readyz reports tools up and gone down", func() bool {
		code, b, body := readyzBody(t, "http://"+s.APIAddr()+"/readyz")
		raw = b
		checks, _ := body["checks"].(map[string]any)
		return code == http.StatusOK && body["ready"] == true && checks["servers"] == "down: gone" &&
			strings.Contains(b, `{"name":"tools","up":1,"down":0`) && strings.Contains(b, `{"name":"gone","up":0,"down":1,"lastError":"`)
	})
	if strings.Contains(raw, secretValue) {
		t.Errorf("/readyz tells a header value: %s", raw)
	}
	// On --listen, without an inbound token, no details.
	code, b, body := readyzBody(t, base+"/readyz")
	if code != http.StatusOK || body["servers"] != nil || strings.Contains(b, "gone") {
		t.Errorf("/readyz on --listen: %d %s", code, b)
	}
}

// The config file's changes are applied and logged by name: added,
// removed, changed servers; a file that fails is logged and the running
// servers stay; another key's change is logged as needing a restart.
// Header values are never logged.
func TestGatewayReloadLog(t *testing.T) {
	cfg, secret := gatewayConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	base, done, log := serveRun(t, ctx, t.TempDir(), "--config", cfg)
	defer func() {
		cancel()
		<-done
		if strings.Contains(log.String(), secretValue) || strings.Contains(log.String(), "another-secret-value") {
			t.Errorf("the log tells a header value:\n%s", log.String())
		}
	}()
	if exited, code := waitUp(t, base, done); exited {
		t.Fatalf("serve exited %d:\n%s", code, log.String())
	}
	if !strings.Contains(log.String(), `servers="[tools gone]"`) {
		t.Errorf("the start does not name the servers:\n%s", log.String())
	}
	// gone's header now comes from another file: gone changed; more is added.
	other := filepath.Join(filepath.Dir(secret), "other.token")
	if err := os.WriteFile(other, []byte("another-secret-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := bigtoolBin(t)
	writeServers(t, cfg, "servers:\n"+bigtoolServer("tools", bin)+goneServer(other)+bigtoolServer("more", bin))
	eventually(t, 10*time.Second, "the change is logged", func() bool {
		return strings.Contains(log.String(), `msg="servers reloaded from the config file" added=[more] removed=[] changed=[gone]`)
	})
	writeServers(t, cfg, "servers:\n"+bigtoolServer("tools", bin))
	eventually(t, 10*time.Second, "the removal is logged", func() bool {
		return strings.Contains(log.String(), `added=[] removed="[gone more]" changed=[]`)
	})
	writeServers(t, cfg, "servers:\n  - name: 1tools\n    command: x\n")
	eventually(t, 10*time.Second, "the refusal is logged", func() bool {
		return strings.Contains(log.String(), `msg="config file not applied; the running servers stay"`) &&
			strings.Contains(log.String(), `name \"1tools\"`)
	})
	writeServersMode(t, cfg, "servers:\n  - name: tools\n    url: http://127.0.0.1:1/mcp\n    headers: {X-Key: {value: "+secretValue+"}}\n", 0o644)
	eventually(t, 10*time.Second, "a literal header in a file others read is refused", func() bool {
		return strings.Contains(log.String(), "sets a header's value")
	})
	writeServers(t, cfg, "log-level: debug\nservers:\n"+bigtoolServer("tools", bin))
	eventually(t, 10*time.Second, "another key's change is logged", func() bool {
		return strings.Contains(log.String(), `they apply at the next restart" keys=[log-level]`)
	})
}

// The policy's call decision governs a gateway's calls: with the example
// gateway policy, the read-only tenant is listed none of bigtool's tools
// (none of them reads by name) and refused a call by name, while another
// tenant calls them, but not with DROP in a query.
func TestGatewayCallPolicy(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "servers.yaml")
	writeServers(t, cfg, "servers:\n"+bigtoolServer("db", bigtoolBin(t))+bigtoolServer("other", bigtoolBin(t)))
	const analyst, ops = "analyst-token-0123456789abcdef0123456789", "ops-token-0123456789abcdef0123456789abc"
	getenv := func(k string) string {
		if k == "SPILLWAY_AUTH_TOKENS" {
			return analyst + "=analyst," + ops + "=ops"
		}
		return ""
	}
	s := startServerEnv(t, t.TempDir(), getenv, "--config", cfg, "--policy", "../../examples/policies/gateway")
	connect := func(tok string) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "policy-test", Version: "1"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://" + s.Addr() + "/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport(tok)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	names := func(cs *mcp.ClientSession) []string {
		var out []string
		for tool, err := range cs.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tool.Name)
		}
		return out
	}
	a, o := connect(analyst), connect(ops)
	if got := names(a); slices.Contains(got, "db_small") || slices.Contains(got, "other_query") {
		t.Errorf("the read-only tenant is listed %v", got)
	}
	if got := names(o); !slices.Contains(got, "db_small") || !slices.Contains(got, "other_query") {
		t.Errorf("ops is listed %v", got)
	}
	if r, err := a.CallTool(t.Context(), &mcp.CallToolParams{Name: "db_small", Arguments: map[string]any{"echo": "x"}}); err == nil && !r.IsError {
		t.Errorf("the read-only tenant called db_small: %+v", r)
	}
	if r, err := o.CallTool(t.Context(), &mcp.CallToolParams{Name: "db_small", Arguments: map[string]any{"echo": "x"}}); err != nil || r.IsError {
		t.Errorf("ops db_small: %v %+v", err, r)
	}
	_, err := o.CallTool(t.Context(), &mcp.CallToolParams{Name: "db_query", Arguments: map[string]any{"rows": 1, "query": "DROP TABLE users"}})
	if err == nil || !strings.Contains(err.Error(), "DROP is not allowed") {
		t.Errorf("ops db_query with DROP: %v", err)
	}
}

// A server run as a command could read Spillway's command line: secret
// flags are refused there, as with --upstream-cmd.
func TestGatewayRefusesArgvSecrets(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "servers.yaml")
	writeServers(t, cfg, "servers:\n"+bigtoolServer("db", "/bin/true"))
	serveMustRefuse(t, "--auth-tokens is refused on the command line with --upstream-cmd or a server's command",
		"--config", cfg, "--auth-tokens", "tok-0123456789abcdef0123456789abcdef=team")
	// A URL server runs nothing: the flag is taken.
	writeServers(t, cfg, "servers:\n  - name: db\n    url: http://127.0.0.1:1/mcp\n")
	if configRunsCommands(cfg) {
		t.Errorf("a URL server counted as a command")
	}
}

// A server's offload block applies to its results alone: the same large
// query result is offloaded from one server and kept inline from the
// other, whose offload.never names the tool.
func TestGatewayServerOffload(t *testing.T) {
	bin := bigtoolBin(t)
	cfg := filepath.Join(t.TempDir(), "servers.yaml")
	writeServers(t, cfg, "servers:\n"+bigtoolServer("off", bin)+bigtoolServer("keep", bin)+"    offload: {never: [query]}\n")
	data := t.TempDir()
	s := startServer(t, data, "--config", cfg)
	c := mcp.NewClient(&mcp.Implementation{Name: "offload-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://" + s.Addr() + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport(mcpToken(t, data))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	links := func(name string) (int, int) {
		r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"rows": 500, "seed": 1}})
		if err != nil || r.IsError {
			t.Fatalf("%s: %v %+v", name, err, r)
		}
		n, size := 0, 0
		for _, c := range r.Content {
			switch c := c.(type) {
			case *mcp.ResourceLink:
				n++
			case *mcp.TextContent:
				size += len(c.Text)
			}
		}
		return n, size
	}
	if n, _ := links("off_query"); n == 0 {
		t.Errorf("off_query: no link, the result was not offloaded")
	}
	if n, size := links("keep_query"); n != 0 || size < 10000 {
		t.Errorf("keep_query: %d links, %d bytes of text: want it inline", n, size)
	}
}

// A header file's new content reaches its server without a restart: the
// server is reconnected with it, as the log says by name, without either
// value.
func TestGatewayHeaderFileRotation(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")] = true
		mu.Unlock()
		http.Error(w, "no MCP here", http.StatusServiceUnavailable)
	}))
	defer up.Close()
	saw := func(v string) bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[v]
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	writeSecret := func(v string) {
		if err := os.WriteFile(secret+".tmp", []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(secret+".tmp", secret); err != nil {
			t.Fatal(err)
		}
	}
	writeSecret(secretValue)
	cfg := filepath.Join(dir, "servers.yaml")
	writeServers(t, cfg, "servers:\n"+bigtoolServer("tools", bigtoolBin(t))+
		"  - name: api\n    url: "+up.URL+"/mcp\n    headers: {Authorization: {file: "+secret+"}}\n")
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	base, done, log := serveRun(t, ctx, data, "--config", cfg)
	defer func() {
		cancel()
		<-done
		if strings.Contains(log.String(), secretValue) || strings.Contains(log.String(), "rotated-value") {
			t.Errorf("the log tells a header value:\n%s", log.String())
		}
	}()
	if exited, code := waitUp(t, base, done); exited {
		t.Fatalf("serve exited %d:\n%s", code, log.String())
	}
	// A session connects to api, with the header, and keeps trying.
	resp := mcpPost(t, base+"/mcp", mcpToken(t, data), "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	eventually(t, 10*time.Second, "api gets the header", func() bool { return saw(secretValue) })
	writeSecret("rotated-value")
	eventually(t, 10*time.Second, "api gets the new header", func() bool { return saw("rotated-value") })
	eventually(t, 5*time.Second, "the reconnection is logged", func() bool {
		return strings.Contains(log.String(), `msg="servers reconnected: a header file changed" changed=[api]`)
	})
}
