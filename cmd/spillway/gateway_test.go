package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	bigtoolOnce sync.Once
	bigtoolPath string
	bigtoolErr  error
)

// bigtoolBin builds examples/bigtool once per test run.
func bigtoolBin(t *testing.T) string {
	t.Helper()
	bigtoolOnce.Do(func() {
		var dir string
		if dir, bigtoolErr = os.MkdirTemp("", "spillway-bigtool-"); bigtoolErr != nil {
			return
		}
		os.Chmod(dir, 0o755)
		bigtoolPath = filepath.Join(dir, "bigtool")
		if out, err := exec.Command("go", "build", "-o", bigtoolPath, "../../examples/bigtool/cmd/bigtool").CombinedOutput(); err != nil {
			bigtoolErr = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if bigtoolErr != nil {
		t.Fatal(bigtoolErr)
	}
	return bigtoolPath
}

// startEverythingServer runs the Go SDK's reference server over
// Streamable HTTP (sessions) on loopback and returns its /mcp URL.
func startEverythingServer(t *testing.T) string {
	t.Helper()
	bin := tool(t, "SPILLWAY_EVERYTHING_SERVER")
	addr := rsFreeAddr(t)
	cmd := exec.Command(bin, "-http="+addr, "-stateless=false")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		if time.Now().After(deadline) {
			t.Fatalf("everything-server never listened on %s", addr)
		}
	}
}

// writeServers (re)writes a config file in one step (a rename), so that
// a poll never reads it half written.
func writeServers(t *testing.T, name, text string) {
	t.Helper()
	writeServersMode(t, name, text, 0o600)
}

// writeServersMode is writeServers with the file's mode.
func writeServersMode(t *testing.T, name, text string, perm os.FileMode) {
	t.Helper()
	tmp := name + ".tmp"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

func bigtoolServer(name, bin string) string {
	return fmt.Sprintf("  - name: %s\n    command: %s\n", name, bin)
}

// One `spillway serve --stdio --config servers.yaml`, the process a
// desktop agent launches, in front of bigtool over stdio and the Go SDK's
// everything-server over Streamable HTTP: the TypeScript SDK v1 client
// lists both servers' tools under their prefixes and calls one of each.
func TestGatewayStdioConfig(t *testing.T) {
	rt := rsSetup(t)
	cfg := filepath.Join(t.TempDir(), "servers.yaml")
	writeServers(t, cfg, "servers:\n"+bigtoolServer("big", bigtoolBin(t))+
		"  - name: every\n    url: "+startEverythingServer(t)+"\n    transport: streamable\n")
	tools, reps := rsClient(t, rt, "v1",
		rsStdio(nil, spillwayBin(t), "serve", "--stdio", "--config", cfg, "--listen", "127.0.0.1:0", "--data", t.TempDir()),
		rsCall{Name: "big_small", Arguments: map[string]any{"echo": "through the gateway"}},
		rsCall{Name: "every_test_simple_text"})
	for _, want := range []string{"big_small", "big_query", "every_test_simple_text", "spillway_artifact_read"} {
		if !slices.Contains(tools, want) {
			t.Errorf("tools/list lacks %s: %v", want, tools)
		}
	}
	for _, unprefixed := range []string{"small", "test_simple_text"} {
		if slices.Contains(tools, unprefixed) {
			t.Errorf("tools/list has %s unprefixed", unprefixed)
		}
	}
	var small, simple rsResult
	json.Unmarshal(reps[0].Result, &small)
	json.Unmarshal(reps[1].Result, &simple)
	if reps[0].Error != "" || len(small.Content) != 1 || small.Content[0].Text != "ok through the gateway" {
		t.Errorf("big_small: %s %s", reps[0].Error, reps[0].Result)
	}
	if reps[1].Error != "" || simple.IsError || len(simple.Content) == 0 || simple.Content[0].Text == "" {
		t.Errorf("every_test_simple_text: %s %s", reps[1].Error, reps[1].Result)
	}
}

// bearerTransport adds an Authorization header to every request.
type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// Editing the config file of a running `spillway serve` adds a server and
// then removes one: a client connected over HTTP the whole time gets
// notifications/tools/list_changed each time, and its next tools/list
// shows the change. No restart.
func TestGatewayConfigReload(t *testing.T) {
	bin := bigtoolBin(t)
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "servers.yaml")
	writeServers(t, cfg, "servers:\n"+bigtoolServer("alpha", bin)+bigtoolServer("beta", bin))
	base := rsSpillwayIn(t, data, "--config", cfg)

	changed := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "reload-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport(mcpToken(t, data))}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // a session: notifications on its GET stream
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list := func() []string {
		var names []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, tool.Name)
		}
		return names
	}
	wantTools := func(step string, have, lack []string) {
		t.Helper()
		names := list()
		for _, n := range have {
			if !slices.Contains(names, n) {
				t.Errorf("%s: tools/list lacks %s: %v", step, n, names)
			}
		}
		for _, n := range lack {
			if slices.Contains(names, n) {
				t.Errorf("%s: tools/list still has %s: %v", step, n, names)
			}
		}
	}
	waitChanged := func(step string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no notifications/tools/list_changed within 20 s", step)
		}
		// The gateway may tell each server's change apart: let them land.
		time.Sleep(300 * time.Millisecond)
		for len(changed) > 0 {
			<-changed
		}
	}
	wantTools("start", []string{"alpha_small", "beta_small"}, []string{"gamma_small"})
	time.Sleep(500 * time.Millisecond)
	for len(changed) > 0 { // what the start may have said: each wait below wants a fresh one
		<-changed
	}

	writeServers(t, cfg, "servers:\n"+bigtoolServer("alpha", bin)+bigtoolServer("beta", bin)+bigtoolServer("gamma", bin))
	waitChanged("gamma added")
	wantTools("gamma added", []string{"alpha_small", "beta_small", "gamma_small"}, nil)
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gamma_small", Arguments: map[string]any{"echo": "new"}})
	if text, _ := firstText(r); err != nil || r.IsError || text != "ok new" {
		t.Errorf("gamma_small: %v %+v", err, r)
	}

	writeServers(t, cfg, "servers:\n"+bigtoolServer("beta", bin)+bigtoolServer("gamma", bin))
	waitChanged("alpha removed")
	wantTools("alpha removed", []string{"beta_small", "gamma_small"}, []string{"alpha_small"})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_small", Arguments: map[string]any{"echo": "gone"}}); err == nil {
		t.Errorf("alpha_small answered after alpha was removed")
	}
}

// firstText is the text of a result's first content item.
func firstText(r *mcp.CallToolResult) (string, bool) {
	if r == nil || len(r.Content) == 0 {
		return "", false
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		return "", false
	}
	return tc.Text, true
}
