package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gopkg.in/yaml.v3"
)

// gwServers are four real upstreams of every kind, running, and
// examples/gateway/servers.yaml filled in with their addresses and paths.
type gwServers struct {
	cfg string // the config file
	// hello is a small file of the filesystem server's folder, helloText
	// its content; bigFile a large one, bigFileSum its SHA-256.
	hello, helloText, bigFile, bigFileSum string
	// evArgs make everything-server's json_schema_2020_12_tool answer a
	// large text (it echoes its arguments), evSum that text's SHA-256 as
	// the server answers it directly; eraSum is the SHA-256 of the
	// stateless-only server's "big" text, likewise.
	evArgs        map[string]any
	evSum, eraSum string
}

// gwStart starts the four upstreams: the Go SDK's everything-server over
// Streamable HTTP with sessions, the stateless-only eraserver over HTTP,
// and the config's stdio servers, server-filesystem on the pinned Node and
// bigtool.
func gwStart(t *testing.T, rt rsTools) gwServers {
	t.Helper()
	evURL, eraURL := startEverythingServer(t), rsEraServer(t)
	dir := t.TempDir()
	g := gwServers{hello: filepath.Join(dir, "hello.txt"), helloText: "hello from the fs server\n", bigFile: filepath.Join(dir, "big.txt")}
	var big strings.Builder
	for i := 0; big.Len() < 300<<10; i++ {
		big.WriteString("line " + strconv.Itoa(i) + " of a file too large for an agent's context\n")
	}
	g.bigFileSum = rsSum([]byte(big.String()))
	for name, text := range map[string]string{g.hello: g.helloText, g.bigFile: big.String()} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The calls reach client.mjs in one argument, which Linux bounds at
	// 128 KiB: 80 KiB of it here.
	g.evArgs = map[string]any{"email": strings.Repeat("a-very-long-address.", 4<<10) + "@example.com"}
	g.evSum = rsSum([]byte(gwDirect(t, evURL, "json_schema_2020_12_tool", g.evArgs)))
	g.eraSum = rsSum([]byte(gwDirect(t, eraURL, "big", nil)))
	g.cfg = gwConfig(t, map[string]string{
		"ev": evURL, "era": eraURL, "node": rt.node, "fs": rt.bin("server-filesystem"), "folder": dir, "big": bigtoolBin(t),
	})
	return g
}

// gwDirect calls a tool of the server at url with the Go SDK client, with
// no Spillway in between, and returns its text.
func gwDirect(t *testing.T, url, tool string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || r.IsError || len(r.Content) != 1 {
		t.Fatalf("%s directly: %v %+v", tool, err, r)
	}
	text, ok := firstText(r)
	if !ok || len(text) < 64<<10 {
		t.Fatalf("%s directly: %d bytes of text, want a large one", tool, len(text))
	}
	return text
}

// gwConfig fills examples/gateway/servers.yaml in for this machine (at
// keys: the two URLs, node, the filesystem server's script and folder,
// bigtool) and writes it to a private file, whose name it returns.
func gwConfig(t *testing.T, at map[string]string) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/gateway/servers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg["servers"].([]any) {
		s := s.(map[string]any)
		switch name := s["name"].(string); name {
		case "ev", "era":
			s["url"] = at[name]
		case "fs":
			s["command"], s["args"] = at["node"], []string{at["fs"], at["folder"]}
		case "big":
			s["command"] = at["big"]
		default:
			t.Fatalf("examples/gateway/servers.yaml: server %q is new to the test", name)
		}
	}
	out, _ := yaml.Marshal(cfg)
	name := filepath.Join(t.TempDir(), "servers.yaml")
	if err := os.WriteFile(name, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// gwCalls are the calls each client makes: a small read that shows the
// prefixed name reached the filesystem server under its own, then a
// large output of each server.
func (g gwServers) calls() []rsCall {
	return []rsCall{
		{Name: "fs_read_text_file", Arguments: map[string]any{"path": g.hello}},
		{Name: "fs_read_text_file", Arguments: map[string]any{"path": g.bigFile}},
		{Name: "big_query", Arguments: map[string]any{"rows": 20000}},
		{Name: "era_big"},
		{Name: "ev_json_schema_2020_12_tool", Arguments: g.evArgs},
	}
}

// check checks what a client listed and got: every server's tools under
// its prefix (the filesystem server's writing tools denied), the small
// read inline, and each large output as a link whose bytes are the
// upstream's, byte for byte.
func (g gwServers) check(t *testing.T, tools []string, reps []rsReport) {
	t.Helper()
	for _, want := range []string{"ev_test_simple_text", "era_echo", "fs_read_text_file", "big_query", "spillway_artifact_read"} {
		if !slices.Contains(tools, want) {
			t.Errorf("tools/list lacks %s: %v", want, tools)
		}
	}
	for _, lack := range []string{"fs_write_file", "read_text_file", "query"} {
		if slices.Contains(tools, lack) {
			t.Errorf("tools/list has %s: %v", lack, tools)
		}
	}
	var small rsResult
	json.Unmarshal(reps[0].Result, &small)
	if reps[0].Error != "" || len(small.Content) != 1 || small.Content[0].Text != g.helloText {
		t.Errorf("fs_read_text_file %s: %s %.300s", g.hello, reps[0].Error, reps[0].Result)
	}
	var query struct {
		Structured struct {
			SHA256 string `json:"sha256"`
		} `json:"structuredContent"`
	}
	json.Unmarshal(reps[2].Result, &query)
	for i, want := range []string{1: g.bigFileSum, 2: query.Structured.SHA256, 3: g.eraSum, 4: g.evSum} {
		if i > 0 {
			gwLinked(t, reps[i], want)
		}
	}
}

// gwLinked checks that a call's result was offloaded: a small result
// with a resource_link whose URL serves bytes of SHA-256 want.
func gwLinked(t *testing.T, rep rsReport, want string) {
	t.Helper()
	var r rsResult
	json.Unmarshal(rep.Result, &r)
	var got []string
	for _, c := range r.Content {
		if c.Type == "resource_link" && c.Meta.Link.HTTPURL != "" {
			got = append(got, rsGet(t, c.Meta.Link.HTTPURL))
		}
	}
	switch {
	case rep.Error != "" || want == "":
		t.Errorf("%s: error %q, want sha %q: %.300s", rep.Name, rep.Error, want, rep.Result)
	case len(rep.Result) > 64<<10:
		t.Errorf("%s: a %d-byte result: not offloaded", rep.Name, len(rep.Result))
	case !slices.Contains(got, want):
		t.Errorf("%s: its links serve %v, want the upstream's %s: %.500s", rep.Name, got, want, rep.Result)
	}
}

// One Spillway in front of four real upstreams at once (everything-server
// over Streamable HTTP, a stateless-only server over HTTP,
// server-filesystem and bigtool over stdio), run from
// examples/gateway/servers.yaml: the TypeScript SDK clients, v1 and v2 in
// the session era and v2 pinned to the stateless era, on its HTTP face and
// on its stdio face, list every server's tools under its
// prefix, call each under its own name and get each one's large output as
// a byte-exact link.
func TestGatewayRealServers(t *testing.T) {
	rt := rsSetup(t)
	g := gwStart(t, rt)
	base, token := rsSpillway(t, "--config", g.cfg)
	for _, sdk := range []string{"v1", "v2", "v2pin"} {
		t.Run("http/"+sdk, func(t *testing.T) {
			tools, reps := rsClient(t, rt, sdk, rsHTTP(base+"/mcp", token), g.calls()...)
			g.check(t, tools, reps)
		})
	}
	stdio := func(t *testing.T) []string {
		return rsStdio(nil, spillwayBin(t), "serve", "--stdio", "--config", g.cfg, "--listen", "127.0.0.1:0", "--data", t.TempDir())
	}
	for _, sdk := range []string{"v1", "v2", "v2pin"} {
		t.Run("stdio/"+sdk, func(t *testing.T) {
			tools, reps := rsClient(t, rt, sdk, stdio(t), g.calls()...)
			g.check(t, tools, reps)
		})
	}
}
