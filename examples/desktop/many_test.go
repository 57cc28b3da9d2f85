package desktop_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// npmTools finds the pinned Node and npm packages `make tools` installs;
// without them the test skips, or fails when CI is set.
func npmTools(t *testing.T) (node, npm string) {
	t.Helper()
	node, npm = os.Getenv("SPILLWAY_NODE"), os.Getenv("SPILLWAY_NPM")
	for _, p := range []string{node, npm} {
		if _, err := os.Stat(p); p == "" || err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("SPILLWAY_NODE and SPILLWAY_NPM are needed (make tools): %q %q", node, npm)
			}
			t.Skipf("SPILLWAY_NODE and SPILLWAY_NPM are needed (make tools): %q %q", node, npm)
		}
	}
	return node, npm
}

// localizeServers rewrites many/servers.yaml for this machine: the test's
// bigtool, the pinned npm packages run by the pinned Node instead of npx,
// temporary paths, and a free port. It returns the new file's name.
func localizeServers(t *testing.T, bigtoolBin, node, npm, listen string) string {
	t.Helper()
	b, err := os.ReadFile("many/servers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the files server\n"), 0o644)
	text := strings.ReplaceAll(string(b), "/ABSOLUTE/PATH/TO/a/folder", dir)
	text = strings.ReplaceAll(text, "/ABSOLUTE/PATH/TO/memory.jsonl", filepath.Join(dir, "memory.jsonl"))
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["listen"] = listen
	for _, s := range cfg["servers"].([]any) {
		s := s.(map[string]any)
		switch s["command"] {
		case "bigtool":
			s["command"] = bigtoolBin
		case "npx":
			args := s["args"].([]any) // -y @modelcontextprotocol/PKG ARGS...
			pkg := strings.TrimPrefix(args[1].(string), "@modelcontextprotocol/")
			s["command"] = node
			s["args"] = append([]any{filepath.Join(npm, "@modelcontextprotocol", pkg, "dist", "index.js")}, args[2:]...)
		default:
			t.Fatalf("server %v: command %v", s["name"], s["command"])
		}
	}
	out, _ := yaml.Marshal(cfg)
	name := filepath.Join(dir, "servers.yaml")
	if err := os.WriteFile(name, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// The many-servers example runs as a desktop agent would start it: one
// `spillway serve --stdio --config servers.yaml` in front of bigtool, the
// filesystem server (read-only) and the memory server, their tools under
// their names.
func TestManyServers(t *testing.T) {
	spillway, bt := binaries(t)
	node, npm := npmTools(t)
	b, err := os.ReadFile("many/claude_desktop_config.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		MCPServers map[string]server `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || len(doc.MCPServers) != 1 {
		t.Fatalf("many/claude_desktop_config.json: %v, %d servers", err, len(doc.MCPServers))
	}
	entry := doc.MCPServers["tools"]
	listen := freeAddr(t)
	cfg := localizeServers(t, bt, node, npm, listen)
	args := slices.Clone(entry.Args)
	i := slices.Index(args, "--config")
	if entry.Command != "spillway" || i < 0 || !strings.HasSuffix(args[i+1], "/examples/desktop/many/servers.yaml") || !slices.Contains(args, "--stdio") {
		t.Fatalf("entry %+v", entry)
	}
	args[i+1] = cfg
	args = append(args, "--data", t.TempDir())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, spillway, args...)
	cmd.Env = environ(nil)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
		if t.Failed() {
			t.Logf("spillway %s\nstderr:\n%s", strings.Join(args, " "), stderr.String())
		}
	}()
	c := &stdioRPC{in: stdin, dec: json.NewDecoder(bufio.NewReaderSize(stdout, 1<<20))}
	c.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "desktop-many", "version": "1"}})
	c.notify(t, "notifications/initialized")
	var tools struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	json.Unmarshal(c.call(t, "tools/list", map[string]any{}), &tools)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"big_query", "big_small", "files_read_text_file", "files_list_allowed_directories", "notes_read_graph"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	if slices.Contains(names, "files_write_file") {
		t.Errorf("tools/list has files_write_file, which the example denies")
	}
	read := c.call(t, "tools/call", map[string]any{"name": "files_read_text_file",
		"arguments": map[string]any{"path": filepath.Join(filepath.Dir(cfg), "hello.txt")}})
	if !strings.Contains(string(read), "hello from the files server") {
		t.Errorf("files_read_text_file: %s", read)
	}
	small := c.call(t, "tools/call", map[string]any{"name": "big_small", "arguments": map[string]any{"echo": "many"}})
	if !strings.Contains(string(small), `"ok many"`) {
		t.Errorf("big_small: %s", small)
	}
}
