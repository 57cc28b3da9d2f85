package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mcpToken is the token `serve` created in data to guard /mcp.
func mcpToken(t *testing.T, data string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "mcp.token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// mcpPost posts body to url as tok (none: "") in session (none: ""),
// with the extra headers hdr (name, value).
func mcpPost(t *testing.T, url, tok, session, body string, hdr ...[2]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for _, h := range hdr {
		req.Header.Set(h[0], h[1])
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream, */*")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The serve command wires the proxy's options: resources/stream in each
// mode and the inline-read cap, through `spillway serve` itself.
func TestServeWiresTheProxy(t *testing.T) {
	bigtool := filepath.Join(t.TempDir(), "bigtool")
	if out, err := exec.Command("go", "build", "-o", bigtool, "../../examples/bigtool/cmd/bigtool").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	data := t.TempDir()
	payload := make([]byte, 3<<20)
	rand.Read(payload)
	file := filepath.Join(t.TempDir(), "blob.bin")
	if err := writeFile(file, payload); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"direct", "download"} {
		base := startServe(t, data, "--upstream-cmd", bigtool, "--stream-mode", mode, "--max-inline-read", "1048576")
		link := putFile(t, base, data, file)
		tok := mcpToken(t, data)
		resp := mcpPost(t, base+"/mcp", tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"resourceStreaming":{}},"clientInfo":{"name":"t","version":"1"}}}`)
		resp.Body.Close()
		session := resp.Header.Get("Mcp-Session-Id")
		resp = mcpPost(t, base+"/mcp", tok, session, `{"jsonrpc":"2.0","id":2,"method":"resources/stream","params":{"uri":"`+link.URI+`"}}`)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if mode == "download" {
			var r struct {
				Result struct{ DownloadURL string } `json:"result"`
			}
			json.Unmarshal(body, &r)
			if r.Result.DownloadURL == "" {
				t.Fatalf("download mode: %.300s", body)
			}
			_, body = fetch(t, r.Result.DownloadURL)
		}
		if !bytes.Equal(body, payload) {
			t.Errorf("%s mode: %d bytes (%.100q), want the %d stored", mode, len(body), body, len(payload))
		}
		// 3 MiB is over --max-inline-read: resources/read refuses it.
		resp = mcpPost(t, base+"/mcp", tok, session, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"`+link.URI+`"}}`)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(body, []byte("resources/stream")) {
			t.Errorf("resources/read over the cap: %.300s", body)
		}
	}
}

func writeFile(name string, b []byte) error { return os.WriteFile(name, b, 0o644) }

// --upstream-env: the child of --upstream-cmd sees the allow-list and what
// was configured, never Spillway's settings or store credentials.
func TestUpstreamEnv(t *testing.T) {
	t.Setenv("SPILLWAY_TEST_SECRET", "secret-1")
	t.Setenv("SPILLWAY_OTHER", "secret-2")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-3")
	t.Setenv("PASS_ME", "yes")
	out := filepath.Join(t.TempDir(), "env")
	data := t.TempDir()
	base := startServe(t, data, "--upstream-cmd", `sh -c "env > `+out+`; exec cat > /dev/null"`,
		"--upstream-env", "PASS_ME,SET_ME=v=1", "--upstream-env", "SPILLWAY_TEST_SECRET")
	// The child starts with the session; it never answers, nor need it.
	go func() {
		c := &http.Client{Timeout: 2 * time.Second}
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+mcpToken(t, data))
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var env string
	for deadline := time.Now().Add(10 * time.Second); !strings.HasSuffix(env, "\n"); time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(out)
		env = string(b)
		if time.Now().After(deadline) {
			t.Fatal("the child did not start")
		}
	}
	time.Sleep(100 * time.Millisecond) // env writes in one go, but be sure it is done
	b, _ := os.ReadFile(out)
	env = string(b)
	for _, want := range []string{"PASS_ME=yes\n", "SET_ME=v=1\n", "SPILLWAY_TEST_SECRET=secret-1\n", "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("the child did not see %q:\n%s", want, env)
		}
	}
	for _, secret := range []string{"secret-2", "secret-3", "SPILLWAY_OTHER", "AWS_"} {
		if strings.Contains(env, secret) {
			t.Errorf("the child saw %s:\n%s", secret, env)
		}
	}
}

func TestUpstreamEnvFlag(t *testing.T) {
	var l envList
	for _, bad := range []string{"=v", "A B=1"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("--upstream-env %q accepted", bad)
		}
	}
	if err := l.Set("A, B=x=y"); err != nil || l.String() != "A,B=x=y" {
		t.Fatalf("Set: %v %q", err, l.String())
	}
	f := proxyFlags{upstreamURL: "http://127.0.0.1:1/mcp", upstreamEnv: envList{"A"}, streamMode: "direct"}
	if _, err := f.build(nil, nil, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "--upstream-env needs --upstream-cmd") {
		t.Fatalf("build = %v", err)
	}
}

// --store-stall-timeout must bound storing: 0 or less is refused, not
// read as "never".
func TestStoreStallFlag(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		f := proxyFlags{upstreamURL: "http://127.0.0.1:1/mcp", upstreamTrans: "auto", streamMode: "direct", storeStall: d}
		if _, err := f.build(nil, nil, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "--store-stall-timeout") {
			t.Errorf("--store-stall-timeout %v: build = %v", d, err)
		}
	}
}

// --artifact-tools: on by default, the artifact tools follow the
// upstream's in tools/list; --artifact-tools=false leaves the list as the
// upstream sent it.
func TestArtifactToolsFlag(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		result := map[string]string{
			"initialize": `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"u","version":"1"}}`,
			"tools/list": `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`,
		}[m.Method]
		if m.ID == nil || result == "" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
	}))
	defer up.Close()
	for flags, want := range map[string]string{
		"":                       `["echo","spillway_artifact_read","spillway_artifact_grep","spillway_artifact_jq"]`,
		"--artifact-tools=false": `["echo"]`,
	} {
		data := t.TempDir()
		args := []string{"--upstream-url", up.URL, "--upstream-transport", "streamable"}
		if flags != "" {
			args = append(args, flags)
		}
		base := startServe(t, data, args...)
		tok := mcpToken(t, data)
		resp := mcpPost(t, base+"/mcp", tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		resp.Body.Close()
		resp = mcpPost(t, base+"/mcp", tok, resp.Header.Get("Mcp-Session-Id"), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
		var r struct {
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		var names []string
		for _, tl := range r.Result.Tools {
			names = append(names, tl.Name)
		}
		if got, _ := json.Marshal(names); string(got) != want {
			t.Errorf("%q: tools/list shows %s, want %s", flags, got, want)
		}
	}
}
