package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	shows := func(names, have, lack []string) bool {
		for _, n := range have {
			if !slices.Contains(names, n) {
				return false
			}
		}
		for _, n := range lack {
			if slices.Contains(names, n) {
				return false
			}
		}
		return true
	}
	// afterChange waits for a list_changed and lists, again at each next
	// one, until the list shows the change: an added server's tools come
	// with the list_changed of its connection, which may follow the one
	// of the update.
	afterChange := func(step string, have, lack []string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		var names []string
		for {
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("%s: no list_changed within 20 s after which tools/list shows it; last %v", step, names)
			}
			if names = list(); shows(names, have, lack) {
				return
			}
		}
	}
	if names := list(); !shows(names, []string{"alpha_small", "beta_small"}, []string{"gamma_small"}) {
		t.Fatalf("start: tools/list %v", names)
	}
	time.Sleep(500 * time.Millisecond)
	for len(changed) > 0 { // what the start may have said: each wait below wants a fresh one
		<-changed
	}

	writeServers(t, cfg, "servers:\n"+bigtoolServer("alpha", bin)+bigtoolServer("beta", bin)+bigtoolServer("gamma", bin))
	afterChange("gamma added", []string{"alpha_small", "beta_small", "gamma_small"}, nil)
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gamma_small", Arguments: map[string]any{"echo": "new"}})
	if text, _ := firstText(r); err != nil || r.IsError || text != "ok new" {
		t.Errorf("gamma_small: %v %+v", err, r)
	}

	writeServers(t, cfg, "servers:\n"+bigtoolServer("beta", bin)+bigtoolServer("gamma", bin))
	afterChange("alpha removed", []string{"beta_small", "gamma_small"}, []string{"alpha_small"})
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

// The stdio face, as a desktop agent holds it, follows the config file
// too: a server added to it while the agent is connected brings a
// notifications/tools/list_changed on stdout and its tools in the next
// tools/list.
func TestGatewayStdioReload(t *testing.T) {
	bin := bigtoolBin(t)
	cfg := filepath.Join(t.TempDir(), "servers.yaml")
	// With one server, names are prefixed only when the file says so.
	writeServers(t, cfg, "server-prefix: always\nservers:\n"+bigtoolServer("alpha", bin))
	cmd := exec.Command(spillwayBin(t), "serve", "--stdio", "--config", cfg, "--data", t.TempDir(),
		"--listen", "127.0.0.1:0", "--log-level", "warn")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
		if t.Failed() {
			t.Logf("spillway stderr:\n%s", stderr.String())
		}
	}()
	lines := readLines(stdout)
	changed := 0 // notifications/tools/list_changed seen and not yet awaited
	await := func(what string, match func(id, method string) bool) string {
		t.Helper()
		if match("", "notifications/tools/list_changed") && changed > 0 {
			changed--
			return ""
		}
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("%s: stdout ended", what)
				}
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				json.Unmarshal([]byte(l), &m)
				if match(string(m.ID), m.Method) {
					return l
				}
				if m.Method == "notifications/tools/list_changed" {
					changed++
				}
			case <-timeout:
				t.Fatalf("%s: nothing within 20 s", what)
			}
		}
	}
	answer := func(id string) func(string, string) bool {
		return func(got, method string) bool { return got == id && method == "" }
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	await("initialize", answer("1"))
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	if l := await("tools/list", answer("2")); !strings.Contains(l, `"alpha_small"`) || strings.Contains(l, `"beta_small"`) {
		t.Fatalf("tools/list before: %.500s", l)
	}
	writeServers(t, cfg, "server-prefix: always\nservers:\n"+bigtoolServer("alpha", bin)+bigtoolServer("beta", bin))
	// The gateway says list_changed when beta is configured and again
	// when its connection is up; a list between the two names beta as
	// missing in its _meta. A client lists again at each.
	for id := 3; ; id++ {
		await("list_changed", func(_, method string) bool { return method == "notifications/tools/list_changed" })
		fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", id)
		l := await("tools/list", answer(fmt.Sprint(id)))
		if strings.Contains(l, `"beta_small"`) && strings.Contains(l, `"alpha_small"`) {
			break
		}
		if id == 6 {
			t.Fatalf("tools/list after: %s", l[max(0, len(l)-600):])
		}
	}
}
