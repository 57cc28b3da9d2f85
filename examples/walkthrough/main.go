// Command walkthrough plays an agent's session through Spillway to the
// bigtool demo server and shows what each side gets:
//
//  1. it starts `spillway serve --upstream-cmd bigtool` on a free loopback port;
//  2. as the agent, it initializes an MCP session and calls the `query` tool,
//     which returns about 5 MB of JSON;
//  3. it prints what the agent's context receives: a short preview and a
//     resource_link with httpUrl and httpUrlExpiresAt;
//  4. as the sandbox, it runs examples/sandbox/analyze.py on the httpUrl,
//     which fetches the full 5 MB with one plain GET and profiles it.
//
// Run it from the repository root: go run ./examples/walkthrough
// (it builds bin/spillway and bin/bigtool when they are missing).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	if err := run(*root, filepath.Join(*root, "bin"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "walkthrough:", err)
		os.Exit(1)
	}
}

// run plays the session; binaries missing from binDir are built there.
func run(root, binDir string, out io.Writer) error {
	bins, err := buildMissing(root, binDir)
	if err != nil {
		return err
	}
	data, err := os.MkdirTemp("", "walkthrough-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	addr, stop, err := serve(bins, data)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(out, "== Spillway on %s, in front of bigtool (stdio)\n\n", addr)
	a, err := connect(addr, data)
	if err != nil {
		return err
	}
	link, err := query(a, out)
	if err != nil {
		return err
	}
	return analyze(root, data, link, out)
}

// buildMissing builds spillway and bigtool into binDir unless they are
// there already, and returns their absolute paths by name.
func buildMissing(root, binDir string) (map[string]string, error) {
	bins := map[string]string{"spillway": "./cmd/spillway", "bigtool": "./examples/bigtool/cmd/bigtool"}
	for name, pkg := range bins {
		p := filepath.Join(binDir, name)
		if _, err := os.Stat(p); err != nil {
			cmd := exec.Command("go", "build", "-o", p, pkg)
			cmd.Dir, cmd.Stderr = root, os.Stderr
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("building %s: %w", name, err)
			}
		}
		bins[name], _ = filepath.Abs(p)
	}
	return bins, nil
}

// serve starts `spillway serve` in front of bigtool on a free loopback
// port, with its data in data, and returns its address once it is ready
// and the function that stops it.
func serve(bins map[string]string, data string) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr = ln.Addr().String()
	ln.Close()
	srv := exec.Command(bins["spillway"], "serve", "--listen", addr, "--data", data,
		"--upstream-cmd", bins["bigtool"], "--log-level", "warn")
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { srv.Process.Signal(os.Interrupt); srv.Wait() }
	if err := waitReady("http://" + addr + "/readyz"); err != nil {
		stop()
		return "", nil, err
	}
	return addr, stop, nil
}

// connect opens the agent's MCP session with the Spillway at addr.
// Without inbound tokens, /mcp wants the local token serve created in
// data.
func connect(addr, data string) (*agent, error) {
	tok, err := os.ReadFile(filepath.Join(data, "mcp.token"))
	if err != nil {
		return nil, err
	}
	a := &agent{url: "http://" + addr + "/mcp", token: strings.TrimSpace(string(tok))}
	if _, err := a.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"walkthrough","version":"1"}}`); err != nil {
		return nil, err
	}
	if err := a.notify("notifications/initialized"); err != nil {
		return nil, err
	}
	return a, nil
}

// query calls bigtool's query tool as the agent, prints what the agent's
// context receives, and returns the result's resource_link.
func query(a *agent, out io.Writer) (link map[string]any, err error) {
	fmt.Fprintln(out, `== agent: tools/call query {"rows": 25000}  (bigtool answers with ~5 MB of JSON)`)
	res, err := a.call("tools/call", `{"name":"query","arguments":{"rows":25000,"seed":7}}`)
	if err != nil {
		return nil, err
	}
	var r struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "== the agent's context receives %d bytes:\n\n", len(res))
	for _, c := range r.Content {
		switch c["type"] {
		case "text":
			fmt.Fprintf(out, "[text]\n%s\n\n", c["text"])
		case "resource_link":
			link = c
			b, _ := json.MarshalIndent(c, "", "  ")
			fmt.Fprintf(out, "[resource_link]\n%s\n\n", b)
		}
	}
	if link == nil {
		return nil, fmt.Errorf("no resource_link in the result: %.300s", res)
	}
	return link, nil
}

// analyze plays the sandbox: it hands link to examples/sandbox/analyze.py,
// which fetches the whole result with one GET (no MCP session) and
// profiles it on out.
func analyze(root, data string, link map[string]any, out io.Writer) error {
	fmt.Fprintln(out, "== sandbox: python3 examples/sandbox/analyze.py <httpUrl>  (no MCP session, one GET)")
	lf := filepath.Join(data, "link.json")
	b, _ := json.Marshal(link)
	if err := os.WriteFile(lf, b, 0o600); err != nil {
		return err
	}
	py := exec.Command("python3", filepath.Join(root, "examples", "sandbox", "analyze.py"), lf)
	py.Stdout, py.Stderr = out, os.Stderr
	return py.Run()
}

// waitReady waits up to 30 s for url to answer 200.
func waitReady(url string) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
	}
	return errors.New("spillway did not become ready")
}

// agent is the smallest session-era MCP client: raw JSON-RPC, so what it
// prints is exactly what a model's context would hold.
type agent struct {
	url, session, token string
	id                  int
}

// post sends body to the MCP endpoint in the agent's session, and
// remembers the session the server names.
func (a *agent) post(body string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, a.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+a.token)
	if a.session != "" {
		req.Header.Set("Mcp-Session-Id", a.session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil && resp.Header.Get("Mcp-Session-Id") != "" {
		a.session = resp.Header.Get("Mcp-Session-Id")
	}
	return resp, err
}

// notify sends the notification method, without params.
func (a *agent) notify(method string) error {
	resp, err := a.post(fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, method))
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// call sends the request method with params (JSON) and returns its
// result, read from a JSON or an event-stream answer.
func (a *agent) call(method, params string) (json.RawMessage, error) {
	a.id++
	resp, err := a.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, a.id, method, params))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var payloads [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(d) != "" {
				payloads = append(payloads, []byte(strings.TrimSpace(d)))
			}
		}
	} else {
		b, _ := io.ReadAll(resp.Body)
		payloads = append(payloads, b)
	}
	for _, p := range payloads {
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(p, &m) == nil && m.ID == a.id {
			if m.Error != nil {
				return nil, fmt.Errorf("%s: %s", method, m.Error)
			}
			return m.Result, nil
		}
	}
	return nil, fmt.Errorf("%s: no response (%s)", method, resp.Status)
}
