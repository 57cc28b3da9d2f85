package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// secretValue is in every header file and variable of these tests: no
// error may quote it.
const secretValue = "s3cr3t-header-value"

// writeConfig writes a config file of mode perm in dir; "SECRET_FILE" in
// text names a private file holding secretValue, "OPEN_FILE" a
// world-readable one.
func writeConfig(t *testing.T, dir, text string, perm os.FileMode) string {
	t.Helper()
	priv, open := filepath.Join(dir, "token"), filepath.Join(dir, "open-token")
	for p, m := range map[string]os.FileMode{priv: 0o600, open: 0o644} {
		if err := os.WriteFile(p, []byte(secretValue+"\n"), m); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, m)
	}
	text = strings.ReplaceAll(strings.ReplaceAll(text, "SECRET_FILE", priv), "OPEN_FILE", open)
	name := filepath.Join(dir, "servers.yaml")
	if err := os.WriteFile(name, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
	os.Chmod(name, perm)
	return name
}

func testEnv(k string) string {
	return map[string]string{"DB_TEAM": secretValue, "PATH": "/bin"}[k]
}

func TestLoadServers(t *testing.T) {
	const good = `
server-prefix: collision
servers:
  - name: db
    url: http://127.0.0.1:9000/mcp
    transport: streamable
    headers:
      Authorization: {file: SECRET_FILE}
      X-Team: {env: DB_TEAM}
    connect_timeout: 10s
    call_timeout: 1m
    tools: {allow: ["*"], deny: ["drop_*"]}
    offload: {result_budget: 8192, text_threshold: 16384, binary_threshold: 100, never: ["small"], link_ttl: 15m}
  - name: fs-2
    command: /usr/bin/node
    args: ["/srv/index.js", "/srv/data"]
    env: [PATH, "NODE_OPTIONS=--max-old-space-size=256"]
    dir: /srv
`
	ls, err := loadServers(writeConfig(t, t.TempDir(), good, 0o644), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.servers) != 2 || ls.flags["server-prefix"] != "collision" {
		t.Fatalf("servers %+v flags %v", ls.servers, ls.flags)
	}
	db := ls.servers[0]
	hu, ok := db.Upstream.(*mcpproxy.HTTPUpstream)
	if !ok || hu.URL != "http://127.0.0.1:9000/mcp" || hu.Transport != "streamable" ||
		hu.Header.Get("Authorization") != secretValue || hu.Header.Get("X-Team") != secretValue {
		t.Errorf("db upstream %+v", db.Upstream)
	}
	if db.ConnectTimeout != 10*time.Second || db.CallTimeout != time.Minute ||
		strings.Join(db.Allow, ",") != "*" || strings.Join(db.Deny, ",") != "drop_*" {
		t.Errorf("db %+v", db)
	}
	if o := db.Offload; o == nil || o.Budget != 8192 || o.TextThreshold != 16384 || o.BinaryThreshold != 100 ||
		o.TTL != 15*time.Minute || strings.Join(o.Never, ",") != "small" {
		t.Errorf("db offload %+v", db.Offload)
	}
	cu, ok := ls.servers[1].Upstream.(*mcpproxy.CommandUpstream)
	if !ok || ls.servers[1].Name != "fs-2" || cu.Command != "/usr/bin/node" || strings.Join(cu.Args, " ") != "/srv/index.js /srv/data" ||
		strings.Join(cu.Env, " ") != "PATH NODE_OPTIONS=--max-old-space-size=256" || cu.Dir != "/srv" || ls.servers[1].Offload != nil {
		t.Errorf("fs-2 %+v %+v", ls.servers[1], cu)
	}
}

func TestLoadServersNone(t *testing.T) {
	for _, text := range []string{"", "listen: 127.0.0.1:0\n", "servers:\n"} {
		ls, err := loadServers(writeConfig(t, t.TempDir(), text, 0o644), testEnv)
		if err != nil || ls.servers != nil {
			t.Errorf("%q: %v, %v", text, ls, err)
		}
	}
}

func TestLoadServersRefused(t *testing.T) {
	const http1 = "servers:\n  - name: db\n    url: http://127.0.0.1:9/mcp\n"
	const cmd1 = "servers:\n  - name: fs\n    command: /bin/true\n"
	for _, tt := range []struct {
		name, text string
		perm       os.FileMode
		wantErr    string
	}{
		{"empty list", "servers: []\n", 0o600, "the list is empty"},
		{"bad name digit", "servers:\n  - name: 1db\n    command: x\n", 0o600, `name "1db"`},
		{"bad name underscore", "servers:\n  - name: a_b\n    command: x\n", 0o600, `name "a_b"`},
		{"long name", "servers:\n  - name: a" + strings.Repeat("b", 32) + "\n    command: x\n", 0o600, "up to 31"},
		{"no name", "servers:\n  - command: x\n", 0o600, `name ""`},
		{"duplicate", cmd1 + "  - name: fs\n    url: http://127.0.0.1:9/mcp\n", 0o600, `server "fs": the name is used twice`},
		{"both url and command", http1 + "    command: /bin/true\n", 0o600, "exactly one of url and command"},
		{"neither", "servers:\n  - name: db\n", 0o600, "exactly one of url and command"},
		{"unknown key", http1 + "    urls: x\n", 0o600, "field urls not found"},
		{"unknown offload key", http1 + "    offload: {budget: 1}\n", 0o600, "field budget not found"},
		{"unknown tools key", http1 + "    tools: {allowed: [a]}\n", 0o600, "field allowed not found"},
		{"unknown top key", "servers:\n  - name: db\n    url: http://127.0.0.1:9/mcp\nserverz: 1\n", 0o600, ""}, // a flag key: readConfig's to refuse
		{"world-readable header file", http1 + "    headers: {Authorization: {file: OPEN_FILE}}\n", 0o600, "header Authorization: file:"},
		{"missing header file", http1 + "    headers: {Authorization: {file: /nonexistent/x}}\n", 0o600, "header Authorization: file:"},
		{"unset env", http1 + "    headers: {X-Team: {env: NOPE}}\n", 0o600, "env: NOPE is not set"},
		{"plain string header", http1 + "    headers: {Authorization: " + secretValue + "}\n", 0o600, "want {file: PATH}"},
		{"two sources", http1 + "    headers: {Authorization: {env: DB_TEAM, value: x}}\n", 0o600, "want {file: PATH}"},
		{"unknown source", http1 + "    headers: {Authorization: {secret: x}}\n", 0o600, "want {file: PATH}"},
		{"literal in an open file", http1 + "    headers: {X-Static: {value: " + secretValue + "}}\n", 0o644, "sets a header's value"},
		{"bad header name", http1 + "    headers: {\"X Team\": {env: DB_TEAM}}\n", 0o600, "not a header name"},
		{"header twice", http1 + "    headers: {X-Team: {env: DB_TEAM}, x-team: {env: DB_TEAM}}\n", 0o600, "given twice"},
		{"bad transport", http1 + "    transport: ws\n", 0o600, "transport"},
		{"url credentials", "servers:\n  - name: db\n    url: http://u:" + secretValue + "@127.0.0.1:9/mcp\n", 0o600, "credentials go in headers"},
		{"relative url", "servers:\n  - name: db\n    url: /mcp\n", 0o600, "absolute http(s) URL"},
		{"headers on a command", cmd1 + "    headers: {X-Team: {env: DB_TEAM}}\n", 0o600, "for a url, not a command"},
		{"args on a url", http1 + "    args: [a]\n", 0o600, "for a command, not a url"},
		{"secret env", cmd1 + "    env: [SPILLWAY_AUTH_TOKENS]\n", 0o600, "must not hold Spillway's secrets"},
		{"bad env", cmd1 + "    env: [\"=x\"]\n", 0o600, "not NAME or NAME=VALUE"},
		{"bad glob", cmd1 + "    tools: {deny: [\"[\"]}\n", 0o600, "pattern"},
		{"negative offload", cmd1 + "    offload: {result_budget: -1}\n", 0o600, "offload"},
		{"bad duration", cmd1 + "    call_timeout: soon\n", 0o600, "into time.Duration"},
		{"not a list", "servers: {name: db}\n", 0o600, "cannot unmarshal"},
		{"headers a string", http1 + "    headers: \"" + secretValue + "\"\n", 0o600, "cannot unmarshal !!str into map"},
		{"env a string", cmd1 + "    env: \"X=" + secretValue + "\"\n", 0o600, "cannot unmarshal !!str into []string"},
		{"args a map", cmd1 + "    args: {a: " + secretValue + "}\n", 0o600, "cannot unmarshal !!map into []string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadServers(writeConfig(t, t.TempDir(), tt.text, tt.perm), testEnv)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secretValue) || strings.Contains(err.Error(), secretValue[:7]) {
				t.Errorf("the error quotes a header value: %v", err)
			}
		})
	}
}

// TestConfigServersKey: servers is the one key that is no flag; the
// others stay refused.
func TestConfigServersKey(t *testing.T) {
	dir := t.TempDir()
	for text, wantErr := range map[string]string{
		"servers:\n  - name: db\n    url: http://127.0.0.1:9/mcp\nlisten: 127.0.0.1:0\n": "",
		"servers:\n  - name: db\n    url: http://127.0.0.1:9/mcp\nserverz: 1\n":          `unknown setting "serverz"`,
	} {
		name := writeConfig(t, dir, text, 0o600)
		fs := newFlagSet("serve")
		var c serveConfig
		c.register(fs)
		err := parseLayered(fs, []string{"--config", name}, func(string) string { return "" })
		if (wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("%q: err %v, want %q", text, err, wantErr)
		}
	}
}

// TestGatewayFlags: servers exclude the single-upstream flags, and the
// gateway's flags need servers.
func TestGatewayFlags(t *testing.T) {
	srv := []mcpproxy.Server{{Name: "a", Upstream: &mcpproxy.CommandUpstream{Command: "x"}}}
	for _, tt := range []struct {
		name    string
		f       proxyFlags
		wantErr string
	}{
		{"servers and url", proxyFlags{servers: srv, upstreamURL: "http://127.0.0.1:1/mcp"}, "exclude each other"},
		{"servers and cmd", proxyFlags{servers: srv, upstreamCmd: "x"}, "exclude each other"},
		{"servers and header", proxyFlags{servers: srv, upstreamHeader: headerList{"A": {"b"}}}, "--upstream-header is for --upstream-url"},
		{"prefix without servers", proxyFlags{serverPrefix: "always"}, "need servers"},
		{"separator without servers", proxyFlags{serverSep: "."}, "need servers"},
		{"bad prefix", proxyFlags{servers: srv, serverPrefix: "sometimes"}, "--server-prefix"},
		{"ok", proxyFlags{servers: srv, serverPrefix: "never", serverSep: "."}, ""},
	} {
		tt.f.streamMode = mcpproxy.StreamDirect
		err := tt.f.check()
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
		}
	}
	f := proxyFlags{servers: srv, serverPrefix: "never", serverSep: "."}
	up, err := f.upstream()
	if g, ok := up.(*mcpproxy.Gateway); err != nil || !ok || len(g.Servers) != 1 || g.Prefix != "never" || g.Separator != "." {
		t.Errorf("upstream %+v, %v", up, err)
	}
}

func FuzzServersFromBytes(f *testing.F) {
	f.Add([]byte("servers:\n  - name: db\n    url: http://127.0.0.1:9/mcp\n    headers: {A: {value: x}}\n"))
	f.Add([]byte("servers:\n  - name: fs\n    command: /bin/true\n    env: [PATH]\n    tools: {allow: ['*']}\n"))
	f.Add([]byte("servers: [{name: a, command: x, offload: {result_budget: 1, link_ttl: 1m}}]\nlisten: x\n"))
	f.Add([]byte("servers:\n  - name: db\n    headers: {A: [1]}\n"))
	f.Add([]byte("servers:\n  - name: db\n    url: http://127.0.0.1:9/mcp\n    oauth: {token_url: http://127.0.0.1:8/t, client_id: a, client_secret: {value: s}, scopes: [x]}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := serversFromBytes(b, func(string) string { return "v" })
		if err != nil {
			return
		}
		for _, s := range ps.servers {
			if !validServerName.MatchString(s.Name) || s.Upstream == nil {
				t.Fatalf("accepted server %+v", s)
			}
		}
	})
}

// The desktop example of many servers parses, strictly, as the servers it
// documents.
func TestDesktopServersExample(t *testing.T) {
	ls, err := loadServers("../../examples/desktop/many/servers.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if names := serverNames(ls.servers); strings.Join(names, ",") != "big,files,notes" {
		t.Errorf("servers %v", names)
	}
	for _, s := range ls.servers {
		if _, ok := s.Upstream.(*mcpproxy.CommandUpstream); !ok {
			t.Errorf("%s is not a command", s.Name)
		}
	}
	if files := ls.servers[1]; !strings.Contains(strings.Join(files.Deny, ","), "write_file") || files.Offload == nil {
		t.Errorf("files %+v", files)
	}
	for _, k := range []string{"listen", "default-ttl", "log-level"} {
		if _, ok := ls.flags[k]; !ok {
			t.Errorf("no %s", k)
		}
	}
	// Its other keys are flags of spillway serve.
	fs := newFlagSet("serve")
	var c serveConfig
	c.register(fs)
	for k := range ls.flags {
		if fs.Lookup(k) == nil {
			t.Errorf("%s is not a flag", k)
		}
	}
}

// The top-level README's many-servers config parses as it says.
func TestReadmeServersExample(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, "\nservers:") {
			continue
		}
		found++
		// Parsed and checked; not resolved: its secret files are not on
		// this machine.
		cf, err := parseConfig([]byte(block))
		if err == nil && cf.Servers == nil {
			err = errors.New("no servers")
		}
		if err == nil {
			err = checkServers(*cf.Servers)
		}
		if err != nil {
			t.Errorf("README's servers example: %v\n%s", err, block)
		}
	}
	if found == 0 {
		t.Skip("no servers example in README.md")
	}
}
