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
	bins := map[string]string{"spillway": "./cmd/spillway", "bigtool": "./examples/bigtool/cmd/bigtool"}
	for name, pkg := range bins {
		p := filepath.Join(binDir, name)
		if _, err := os.Stat(p); err != nil {
			cmd := exec.Command("go", "build", "-o", p, pkg)
			cmd.Dir, cmd.Stderr = root, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("building %s: %w", name, err)
			}
		}
		bins[name], _ = filepath.Abs(p)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	data, err := os.MkdirTemp("", "walkthrough-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	srv := exec.Command(bins["spillway"], "serve", "--listen", addr, "--data", data,
		"--upstream-cmd", bins["bigtool"], "--log-level", "warn")
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	if err := waitReady("http://" + addr + "/readyz"); err != nil {
		return err
	}
	fmt.Fprintf(out, "== Spillway on %s, in front of bigtool (stdio)\n\n", addr)

	// Without inbound tokens, /mcp wants the local token serve created.
	tok, err := os.ReadFile(filepath.Join(data, "mcp.token"))
	if err != nil {
		return err
	}
	a := &agent{url: "http://" + addr + "/mcp", token: strings.TrimSpace(string(tok))}
	if _, err := a.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"walkthrough","version":"1"}}`); err != nil {
		return err
	}
	if err := a.notify("notifications/initialized"); err != nil {
		return err
	}
	fmt.Fprintln(out, `== agent: tools/call query {"rows": 25000}  (bigtool answers with ~5 MB of JSON)`)
	res, err := a.call("tools/call", `{"name":"query","arguments":{"rows":25000,"seed":7}}`)
	if err != nil {
		return err
	}
	var r struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	fmt.Fprintf(out, "== the agent's context receives %d bytes:\n\n", len(res))
	var link map[string]any
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
		return fmt.Errorf("no resource_link in the result: %.300s", res)
	}
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

func waitReady(url string) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
	}
	return fmt.Errorf("spillway did not become ready")
}

// agent is the smallest session-era MCP client: raw JSON-RPC, so what it
// prints is exactly what a model's context would hold.
type agent struct {
	url, session, token string
	id                  int
}

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

func (a *agent) notify(method string) error {
	resp, err := a.post(fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, method))
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

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
