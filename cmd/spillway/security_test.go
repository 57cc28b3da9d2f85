package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newServeErr builds `spillway serve` with args and returns why it refused.
func newServeErr(t *testing.T, args ...string) error {
	t.Helper()
	fs := newFlagSet("serve")
	var c serveConfig
	c.register(fs)
	args = append([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir()}, args...)
	if err := parseLayered(fs, args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	s, err := newServer(context.Background(), &c, slog.New(slog.DiscardHandler), io.Discard)
	if err == nil {
		s.deps.Close()
		s.ln.Close()
	}
	return err
}

// apiCall sends one request to the running server.
func apiCall(t *testing.T, method, url string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// Tokens can come from a file that only the owner can read, and base64
// padding in a token survives the token=tenant split.
func TestServeAuthTokensFile(t *testing.T) {
	const token = "c2VjcmV0LXRva2VuLTAxMjM0NTY3OA=="
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# the team\n"+token+"=team\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := newServeErr(t, "--auth-tokens-file", file); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("group-readable token file: err = %v", err)
	}
	if err := newServeErr(t, "--auth-tokens-file", file, "--auth-tokens", "abcdefghijklmnop=x"); err == nil {
		t.Fatal("both token flags accepted")
	}
	os.Chmod(file, 0o600)
	base := startServe(t, t.TempDir(), "--auth-tokens-file", file)
	resp, b := apiCall(t, "POST", base+"/v1/artifacts", strings.NewReader("hello"),
		"Authorization", "Bearer "+token, "Content-Type", "application/octet-stream")
	if resp.StatusCode != 201 {
		t.Fatalf("upload with the file's token = %d %s", resp.StatusCode, b)
	}
	if resp, _ := apiCall(t, "POST", base+"/v1/artifacts", strings.NewReader("hello"),
		"Authorization", "Bearer "+strings.TrimRight(token, "="), "Content-Type", "application/octet-stream"); resp.StatusCode != 401 {
		t.Fatalf("upload with the token unpadded = %d", resp.StatusCode)
	}
}
