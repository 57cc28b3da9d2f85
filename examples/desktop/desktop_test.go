package desktop_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/spillway-dev/spillway/examples/bigtool"
)

// ---------------------------------------------------------------------------
// The snippets

type server struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

func snippets(t *testing.T) map[string]server {
	t.Helper()
	files, _ := filepath.Glob("*.json")
	if len(files) < 4 {
		t.Fatalf("found %d snippets", len(files))
	}
	all := map[string]server{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			MCPServers map[string]server `json:"mcpServers"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(doc.MCPServers) != 1 {
			t.Fatalf("%s: %d servers, want 1", f, len(doc.MCPServers))
		}
		for name, s := range doc.MCPServers {
			switch {
			case s.Command == "spillway":
				if len(s.Args) == 0 || s.Args[0] != "serve" {
					t.Errorf("%s: args %v do not start with serve", f, s.Args)
				}
			case s.Type == "http":
				if u, err := url.Parse(s.URL); err != nil || u.Path != "/mcp" {
					t.Errorf("%s: url %q", f, s.URL)
				}
			default:
				t.Errorf("%s: server %s neither runs spillway nor connects over http", f, name)
			}
			all[f] = s
		}
	}
	return all
}

// flagsUsed lists every spillway flag the snippets and spillway.yaml set.
func flagsUsed(t *testing.T) map[string]string {
	used := map[string]string{}
	for f, s := range snippets(t) {
		for _, a := range s.Args {
			if name, ok := strings.CutPrefix(a, "--"); ok {
				used[name] = f
			}
		}
		for k := range s.Env {
			if rest, ok := strings.CutPrefix(k, "SPILLWAY_"); ok {
				used[strings.ReplaceAll(strings.ToLower(rest), "_", "-")] = f + " env"
			}
		}
	}
	b, err := os.ReadFile("spillway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("spillway.yaml: %v", err)
	}
	for k := range cfg {
		used[k] = "spillway.yaml"
	}
	return used
}

func TestSnippetsParse(t *testing.T) {
	used := flagsUsed(t)
	for _, want := range []string{"stdio", "upstream-cmd", "upstream-url", "config", "listen"} {
		if used[want] == "" {
			t.Errorf("no snippet shows --%s", want)
		}
	}
}

// ---------------------------------------------------------------------------
// The binaries

var (
	buildOnce          sync.Once
	binDir, buildError string
)

// binaries builds spillway and bigtool once per test run. Until spillway
// builds and has the MCP proxy's flags, the tests that need it skip, or fail
// when CI is set.
func binaries(t *testing.T) (spillway, bigtoolBin string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "desktop-test-")
		if err != nil {
			buildError = err.Error()
			return
		}
		binDir = dir
		for name, pkg := range map[string]string{"spillway": "./cmd/spillway", "bigtool": "./examples/bigtool/cmd/bigtool"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
			cmd.Dir = "../.."
			if out, err := cmd.CombinedOutput(); err != nil {
				buildError += fmt.Sprintf("go build %s: %v\n%s", pkg, err, out)
			}
		}
	})
	if buildError == "" {
		out, _ := exec.Command(filepath.Join(binDir, "spillway"), "serve", "-h").CombinedOutput()
		for _, f := range []string{"stdio", "upstream-cmd", "upstream-url"} {
			if !regexp.MustCompile(`(?m)^  --?` + f + `\b`).Match(out) {
				buildError = fmt.Sprintf("spillway serve has no --%s yet:\n%s", f, out)
			}
		}
	}
	if buildError != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(buildError)
		}
		t.Skip(buildError)
	}
	return filepath.Join(binDir, "spillway"), filepath.Join(binDir, "bigtool")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func TestFlagsExist(t *testing.T) {
	spillway, _ := binaries(t)
	out, _ := exec.Command(spillway, "serve", "-h").CombinedOutput()
	for f, where := range flagsUsed(t) {
		if !regexp.MustCompile(`(?m)^  --?` + regexp.QuoteMeta(f) + `(?:[ \t]|$)`).Match(out) {
			t.Errorf("--%s (%s) is not a flag of spillway serve", f, where)
		}
	}
}

// ---------------------------------------------------------------------------
// Running the snippets

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// localize rewrites a snippet's arguments for this machine: test binaries,
// a free port, a temporary data dir, and the test's own bigtool URL.
func localize(t *testing.T, args []string, bigtoolBin, upstreamURL string) (out []string, listen string) {
	t.Helper()
	listen = freeAddr(t)
	out = append([]string(nil), args...)
	hasListen := false
	for i := 1; i < len(args); i++ { // not len(out): --config appends arguments
		switch out[i-1] {
		case "--listen":
			out[i], hasListen = listen, true
		case "--upstream-cmd":
			out[i] = bigtoolBin + strings.TrimPrefix(out[i], "bigtool")
		case "--upstream-url":
			out[i] = upstreamURL
		case "--config":
			abs, _ := filepath.Abs("spillway.yaml")
			out[i] = strings.Replace(out[i], "/ABSOLUTE/PATH/TO/examples/desktop/spillway.yaml", abs, 1)
			// The file names bare "bigtool" and port 8080: override both on the command line.
			out = append(out, "--upstream-cmd", bigtoolBin)
		}
	}
	if !hasListen {
		out = append(out, "--listen", listen)
	}
	return append(out, "--data", t.TempDir()), listen
}

func environ(extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPILLWAY_") {
			env = append(env, kv)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// startBigtoolHTTP runs bigtool -http on a free port and returns its /mcp URL.
func startBigtoolHTTP(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "-http", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`at (http://\S+/mcp)`).FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	select {
	case u := <-urlc:
		return u
	case <-time.After(20 * time.Second):
		t.Fatal("bigtool -http did not report its address")
	}
	return ""
}

// rpc is a minimal JSON-RPC client: the go-sdk's ResourceLink type has no
// httpUrl field, and httpUrl is what these tests are about.
type rpc interface {
	call(t *testing.T, method string, params any) json.RawMessage
	notify(t *testing.T, method string)
}

type stdioRPC struct {
	in  io.Writer
	dec *json.Decoder
	id  int
}

func (r *stdioRPC) notify(t *testing.T, method string) {
	fmt.Fprintf(r.in, `{"jsonrpc":"2.0","method":%q}`+"\n", method)
}

func (r *stdioRPC) call(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	r.id++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.id, "method": method, "params": params})
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	for {
		var msg struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := r.dec.Decode(&msg); err != nil {
			t.Fatalf("%s: reading stdout: %v", method, err)
		}
		if msg.ID == nil || msg.Method != "" || *msg.ID != r.id {
			continue // a notification, or a request from the server we do not answer
		}
		if msg.Error != nil {
			t.Fatalf("%s: error %s", method, msg.Error)
		}
		return msg.Result
	}
}

type httpRPC struct {
	url     string
	headers map[string]string
	session string
	id      int
}

func (r *httpRPC) post(t *testing.T, body []byte) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	if r.session != "" {
		req.Header.Set("Mcp-Session-Id", r.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		r.session = s
	}
	return resp
}

func (r *httpRPC) notify(t *testing.T, method string) {
	resp := r.post(t, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, method)))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%s: %s", method, resp.Status)
	}
}

func (r *httpRPC) call(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	r.id++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.id, "method": method, "params": params})
	resp := r.post(t, b)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s %s", method, resp.Status, body)
	}
	var payloads [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 64<<20)
		var data []byte
		for sc.Scan() {
			line := sc.Text()
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " ")...)
			} else if line == "" && len(data) > 0 {
				payloads, data = append(payloads, data), nil
			}
		}
		if len(data) > 0 {
			payloads = append(payloads, data)
		}
	} else {
		body, _ := io.ReadAll(resp.Body)
		payloads = append(payloads, body)
	}
	for _, p := range payloads {
		var msg struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(p, &msg) == nil && msg.ID != nil && *msg.ID == r.id {
			if msg.Error != nil {
				t.Fatalf("%s: error %s", method, msg.Error)
			}
			return msg.Result
		}
	}
	t.Fatalf("%s: no response among %d messages", method, len(payloads))
	return nil
}

// exercise runs the agent's side of a session through Spillway to bigtool:
// the small result passes untouched, the large one comes back as a link
// whose bytes are exactly what bigtool produced.
func exercise(t *testing.T, c rpc, listen string) {
	t.Helper()
	init := c.call(t, "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "desktop-test", "version": "1"},
	})
	if !bytes.Contains(init, []byte(`"protocolVersion"`)) {
		t.Fatalf("initialize: %s", init)
	}
	c.notify(t, "notifications/initialized")

	var tools struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	json.Unmarshal(c.call(t, "tools/list", map[string]any{}), &tools)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range bigtool.ToolNames {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Errorf("tools/list %v lacks %s", names, want)
		}
	}

	small := c.call(t, "tools/call", map[string]any{"name": "small", "arguments": map[string]any{"echo": "desk"}})
	var sr struct {
		Content []map[string]any `json:"content"`
	}
	json.Unmarshal(small, &sr)
	if len(sr.Content) != 1 || sr.Content[0]["type"] != "text" || sr.Content[0]["text"] != "ok desk" {
		t.Errorf("small came back as %s", small)
	}

	var want bytes.Buffer
	sum, _ := bigtool.WriteJSON(&want, 9, 20000)
	res := c.call(t, "tools/call", map[string]any{"name": "query", "arguments": map[string]any{"rows": 20000, "seed": 9}})
	if len(res) > 64<<10 {
		t.Errorf("query result is %d bytes through Spillway: not offloaded", len(res))
	}
	var qr struct {
		Content           []map[string]any `json:"content"`
		StructuredContent bigtool.Summary  `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &qr); err != nil {
		t.Fatal(err)
	}
	if qr.StructuredContent.SHA256 != sum.SHA256 || qr.StructuredContent.Rows != 20000 {
		t.Errorf("structuredContent changed on the way: %+v", qr.StructuredContent)
	}
	var link string
	for _, c := range qr.Content {
		if c["type"] == "resource_link" {
			link, _ = c["httpUrl"].(string)
		}
	}
	u, err := url.Parse(link)
	if link == "" || err != nil {
		t.Fatalf("no resource_link with an httpUrl in %.400s", res)
	}
	if u.Host != listen {
		t.Errorf("link host %s, want the --listen address %s", u.Host, listen)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := sha256.Sum256(body)
	if resp.StatusCode != 200 || hex.EncodeToString(got[:]) != sum.SHA256 {
		t.Errorf("fetched %s, %d bytes, sha %x; want %d bytes sha %s", resp.Status, len(body), got, sum.Bytes, sum.SHA256)
	}
}

func TestStdioSnippets(t *testing.T) {
	spillway, bt := binaries(t)
	for f, s := range snippets(t) {
		if s.Command != "spillway" {
			continue
		}
		t.Run(f, func(t *testing.T) {
			upstream := ""
			if strings.Contains(strings.Join(s.Args, " "), "--upstream-url") {
				upstream = startBigtoolHTTP(t, bt)
			}
			args, listen := localize(t, s.Args, bt, upstream)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, spillway, args...)
			cmd.Env = environ(s.Env)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				stdin.Close() // end of input ends a stdio server
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					var ee *exec.ExitError
					if err != nil && !errors.As(err, &ee) {
						t.Errorf("spillway: %v", err)
					}
				case <-time.After(15 * time.Second):
					cmd.Process.Kill()
					t.Errorf("spillway did not exit when stdin closed")
				}
				if t.Failed() {
					t.Logf("spillway %s\nstderr:\n%s", strings.Join(args, " "), stderr.String())
				}
			}()
			exercise(t, &stdioRPC{in: stdin, dec: json.NewDecoder(bufio.NewReaderSize(stdout, 1<<20))}, listen)
		})
	}
}

func TestHTTPSnippet(t *testing.T) {
	spillway, bt := binaries(t)
	s := snippets(t)["mcp.http.json"]
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	listen := freeAddr(t)
	u.Host = listen
	const token = "desktop-test-token-0123456789"
	headers := map[string]string{}
	for k, v := range s.Headers {
		headers[k] = regexp.MustCompile(`REPLACE\S*`).ReplaceAllString(v, token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// In the environment: with --upstream-cmd, --auth-tokens is refused on
	// the command line, which the child could read.
	cmd := exec.CommandContext(ctx, spillway, "serve", "--listen", listen, "--upstream-cmd", bt,
		"--data", t.TempDir())
	cmd.Env = environ(map[string]string{"SPILLWAY_AUTH_TOKENS": token + "=desk"})
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("spillway stderr:\n%s", stderr.String())
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + listen + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("spillway not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	exercise(t, &httpRPC{url: u.String(), headers: headers}, listen)
}
