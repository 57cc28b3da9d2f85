package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// startServe runs `spillway serve` in-process on a free loopback port with
// the given extra flags and returns its base URL.
func startServe(t *testing.T, data string, extra ...string) string {
	t.Helper()
	return "http://" + startServer(t, data, extra...).Addr()
}

// startServer is startServe returning the running server.
func startServer(t *testing.T, data string, extra ...string) *server {
	t.Helper()
	return startServerEnv(t, data, func(string) string { return "" }, extra...)
}

// startServerEnv is startServer with an environment (getenv); a later
// --listen in extra overrides the free port.
func startServerEnv(t *testing.T, data string, getenv func(string) string, extra ...string) *server {
	t.Helper()
	fs := newFlagSet("serve")
	var c serveConfig
	c.register(fs)
	args := append([]string{"--listen", "127.0.0.1:0", "--data", data, "--log-level", "warn"}, extra...)
	if err := parseLayered(fs, args, getenv); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := newServer(ctx, &c, slog.New(slog.DiscardHandler), io.Discard, io.Discard)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}

// putFile runs `spillway put` in-process and decodes the resource_link it prints.
func putFile(t *testing.T, base, data, file string, extra ...string) artifact.ResourceLink {
	t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"put", file, "--data", data, "--public-url", base, "--log-level", "warn"}, extra...)
	if code := run(context.Background(), args, nil, &out, &errb, func(string) string { return "" }); code != 0 {
		t.Fatalf("put exited %d: %s", code, errb.String())
	}
	var l artifact.ResourceLink
	if err := json.Unmarshal(out.Bytes(), &l); err != nil {
		t.Fatalf("put printed %q: %v", out.String(), err)
	}
	return l
}

func fetch(t *testing.T, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestQuickstart is the README's quickstart: put a 50 MB file, fetch it,
// tamper with the link, let it expire, ask for a range, serve HTML safely.
func TestQuickstart(t *testing.T) {
	data := t.TempDir()
	base := startServe(t, data)

	big := make([]byte, 50<<20)
	rnd := rand.NewChaCha8([32]byte{1})
	rnd.Read(big)
	file := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(file, big, 0o600); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(big)
	l := putFile(t, base, data, file, "--ttl", "10m")
	if l.Size != int64(len(big)) || l.Meta[artifact.MetaSHA256] != hex.EncodeToString(want[:]) || l.Name != "big.bin" {
		t.Fatalf("resource_link = %+v", l)
	}
	exp, err := time.Parse(time.RFC3339, l.HTTPURLExpiresAt)
	if err != nil || exp.Before(time.Now().Add(9*time.Minute)) || exp.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("httpUrlExpiresAt = %q", l.HTTPURLExpiresAt)
	}

	resp, got := fetch(t, l.HTTPURL)
	if resp.StatusCode != 200 || sha256.Sum256(got) != want {
		t.Fatalf("GET = %d, %d bytes, sha mismatch", resp.StatusCode, len(got))
	}

	resp, got = fetch(t, l.HTTPURL, "Range", "bytes=1000-1999")
	if resp.StatusCode != 206 || !bytes.Equal(got, big[1000:2000]) {
		t.Fatalf("Range = %d, %d bytes", resp.StatusCode, len(got))
	}

	i := strings.Index(l.HTTPURL, "t=") + 10
	c := byte('A')
	if l.HTTPURL[i] == 'A' {
		c = 'B'
	}
	tampered := l.HTTPURL[:i] + string(c) + l.HTTPURL[i+1:]
	if resp, b := fetch(t, tampered); resp.StatusCode != 403 || !strings.Contains(string(b), `"forbidden"`) {
		t.Fatalf("tampered = %d %s", resp.StatusCode, b)
	}

	// A small file, so that storing it under load cannot outlast its TTL.
	small := filepath.Join(t.TempDir(), "small.txt")
	os.WriteFile(small, []byte("short-lived"), 0o600)
	short := putFile(t, base, data, small, "--ttl", "3s")
	// Dead from httpUrlExpiresAt on: no clock leeway past the promised expiry.
	time.Sleep(time.Until(mustTime(t, short.HTTPURLExpiresAt)) + 50*time.Millisecond)
	if resp, b := fetch(t, short.HTTPURL); resp.StatusCode != 410 || !strings.Contains(string(b), `"expired"`) {
		t.Fatalf("expired = %d %s", resp.StatusCode, b)
	}

	html := filepath.Join(t.TempDir(), "page.html")
	os.WriteFile(html, []byte("<script>alert(document.cookie)</script>"), 0o600)
	hl := putFile(t, base, data, html)
	resp, _ = fetch(t, hl.HTTPURL)
	if resp.StatusCode != 200 || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), "sandbox") ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("HTML served with %v", resp.Header)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestServeHealth(t *testing.T) {
	base := startServe(t, t.TempDir())
	if resp, b := fetch(t, base+"/healthz"); resp.StatusCode != 200 || string(b) != "ok\n" {
		t.Fatalf("healthz = %d %q", resp.StatusCode, b)
	}
	resp, b := fetch(t, base+"/readyz")
	var ready struct {
		Ready  bool
		Checks map[string]string
	}
	if err := json.Unmarshal(b, &ready); err != nil || resp.StatusCode != 200 || !ready.Ready {
		t.Fatalf("readyz = %d %s", resp.StatusCode, b)
	}
	// Without inbound tokens, /metrics is for --api-listen only.
	if resp, b := fetch(t, base+"/metrics"); resp.StatusCode != 403 || strings.Contains(string(b), "spillway_") {
		t.Fatalf("metrics = %d %s", resp.StatusCode, b)
	}
	if resp, b := fetch(t, base+"/nope"); resp.StatusCode != 404 || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("unknown route = %d %s", resp.StatusCode, b)
	}
}

func TestServeRefusesExposureWithoutAuth(t *testing.T) {
	fs := newFlagSet("serve")
	var c serveConfig
	c.register(fs)
	parseLayered(fs, []string{"--listen", "0.0.0.0:0", "--data", t.TempDir()}, func(string) string { return "" })
	if _, err := newServer(context.Background(), &c, slog.New(slog.DiscardHandler), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "insecure-no-auth") {
		t.Fatalf("non-loopback without auth: err = %v", err)
	}
}

func TestKeyPersistsAcrossRestarts(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(t.TempDir(), "a.txt")
	os.WriteFile(file, []byte("hello"), 0o600)
	base := startServe(t, data)
	l := putFile(t, base, data, file)
	// A second instance on the same data folder verifies the first one's links.
	base2 := startServe(t, data)
	u := strings.Replace(l.HTTPURL, base, base2, 1)
	if resp, b := fetch(t, u); resp.StatusCode != 200 || string(b) != "hello" {
		t.Fatalf("second instance = %d %q", resp.StatusCode, b)
	}
}

func TestConfigLayers(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "spillway.yaml")
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:9999\npublic-url: https://from-file\nauth-tokens:\n  abcdefghijklmnop: acme\n"), 0o600)
	fs := newFlagSet("serve")
	var c serveConfig
	c.register(fs)
	env := map[string]string{"SPILLWAY_PUBLIC_URL": "https://from-env"}
	if err := parseLayered(fs, []string{"--config", cfg, "--listen", "127.0.0.1:1"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if c.listen != "127.0.0.1:1" || c.publicURL != "https://from-env" || c.authTokens != "abcdefghijklmnop=acme" {
		t.Fatalf("layered config = listen %q public %q tokens %q", c.listen, c.publicURL, c.authTokens)
	}
	// A config file holding a secret is refused when others may read it.
	os.Chmod(cfg, 0o644)
	fs = newFlagSet("serve")
	c.register(fs)
	if err := parseLayered(fs, []string{"--config", cfg}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "config sets auth-tokens") {
		t.Fatalf("a config file with tokens, mode 0644: err = %v", err)
	}
	os.WriteFile(cfg, []byte("no-such-flag: 1\n"), 0o600)
	fs = newFlagSet("serve")
	c.register(fs)
	if err := parseLayered(fs, []string{"--config", cfg}, func(string) string { return "" }); err == nil {
		t.Fatal("unknown config key accepted")
	}
}

// Secret files others may read are refused at start, with the flag named.
func TestServeRefusesOpenSecretFiles(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "secret")
	os.WriteFile(open, []byte("k1:"+strings.Repeat("A", 44)+"\n"), 0o600)
	os.Chmod(open, 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--key-file", open}, "chmod 600"},
		{[]string{"--store", "s3://bucket?endpoint=127.0.0.1:1&secure=false", "--store-secret-file", open}, "--store-secret-file"},
	} {
		fs := newFlagSet("serve")
		var c serveConfig
		c.register(fs)
		parseLayered(fs, append([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir()}, tt.args...), func(string) string { return "" })
		if _, err := newServer(context.Background(), &c, slog.New(slog.DiscardHandler), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
}
