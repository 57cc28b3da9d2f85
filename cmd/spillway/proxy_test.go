package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func mcpPost(t *testing.T, url, session, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
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
		resp := mcpPost(t, base+"/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"resourceStreaming":{}},"clientInfo":{"name":"t","version":"1"}}}`)
		resp.Body.Close()
		session := resp.Header.Get("Mcp-Session-Id")
		resp = mcpPost(t, base+"/mcp", session, `{"jsonrpc":"2.0","id":2,"method":"resources/stream","params":{"uri":"`+link.URI+`"}}`)
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
		resp = mcpPost(t, base+"/mcp", session, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"`+link.URI+`"}}`)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(body, []byte("resources/stream")) {
			t.Errorf("resources/read over the cap: %.300s", body)
		}
	}
}

func writeFile(name string, b []byte) error { return os.WriteFile(name, b, 0o644) }
