package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/examples/bigtool"
)

// TestMain lets the test binary act as the bigtool command, so the tests run
// the real main in a child process without a separate build step.
func TestMain(m *testing.M) {
	if os.Getenv("BIGTOOL_TEST_RUN_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BIGTOOL_TEST_RUN_MAIN=1")
	return cmd
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "bigtool-cmd-test", Version: "1"}, nil)
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %+v", name, res.Content)
	}
	return res
}

// Over stdio, every tool at its default size, checked against the library.
func TestStdioDefaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := command()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := newClient().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v (stderr %s)", err, stderr.String())
		}
	}()

	var want bytes.Buffer
	wantSum, _ := bigtool.WriteJSON(&want, 0, bigtool.DefaultQueryRows)
	res := call(t, cs, "query", nil)
	text := res.Content[0].(*mcp.TextContent).Text
	if len(text) < 4_500_000 || sha([]byte(text)) != wantSum.SHA256 {
		t.Errorf("query: %d bytes sha %s, want %d bytes sha %s", len(text), sha([]byte(text)), wantSum.Bytes, wantSum.SHA256)
	}
	if sc, _ := json.Marshal(res.StructuredContent); !bytes.Contains(sc, []byte(wantSum.SHA256)) {
		t.Errorf("structuredContent %s lacks the rows' sha256", sc)
	}

	res = call(t, cs, "chart", nil)
	img := res.Content[1].(*mcp.ImageContent)
	cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || cfg.Width != 1280 || cfg.Height != 800 || len(img.Data) < 1_000_000 {
		t.Errorf("chart: %d bytes, %+v, %v", len(img.Data), cfg, err)
	}

	var wantCSV bytes.Buffer
	bigtool.WriteCSV(&wantCSV, 0, bigtool.DefaultCSVRows)
	res = call(t, cs, "export_csv", nil)
	er := res.Content[0].(*mcp.EmbeddedResource)
	if er.Resource.MIMEType != "text/csv" || er.Resource.Text != wantCSV.String() || wantCSV.Len() < 1_700_000 {
		t.Errorf("export_csv: %s, %d bytes, want %d", er.Resource.MIMEType, len(er.Resource.Text), wantCSV.Len())
	}

	res = call(t, cs, "slow_report", map[string]any{"seconds": 0.2})
	if n := len(res.Content[0].(*mcp.TextContent).Text); n != bigtool.DefaultReportSize {
		t.Errorf("slow_report: %d bytes", n)
	}

	res = call(t, cs, "small", nil)
	if got := res.Content[0].(*mcp.TextContent).Text; got != "ok " {
		t.Errorf("small: %q", got)
	}
}

var listening = regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/mcp)`)

// The command over HTTP on a free loopback port: same bytes as stdio for
// the same seed, /healthz, and a clean exit on SIGTERM.
func TestHTTPCommand(t *testing.T) {
	cmd := command("-http", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { done <- cmd.Wait() }()
	var endpoint string
	select {
	case endpoint = <-urlc:
	case err := <-done:
		done <- err
		t.Fatalf("bigtool exited before listening: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("bigtool did not report its address")
	}

	resp, err := http.Get(strings.TrimSuffix(endpoint, "/mcp") + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	for _, version := range []string{"", "2025-11-25"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cs, err := newClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		cancel()
		if err != nil {
			t.Fatalf("connect %q: %v", version, err)
		}
		var want bytes.Buffer
		wantSum, _ := bigtool.WriteJSON(&want, 42, 6000)
		res := call(t, cs, "query", map[string]any{"rows": 6000, "seed": 42})
		if got := sha([]byte(res.Content[0].(*mcp.TextContent).Text)); got != wantSum.SHA256 {
			t.Errorf("version %q: query sha %s, want %s", version, got, wantSum.SHA256)
		}
		cs.Close()
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("bigtool did not exit on SIGTERM")
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"-era", "x"}, 2, `era "x"`},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"-log-level", "loud"}, 2, "-log-level"},
		{[]string{"-h"}, 0, "-http address"},
		{[]string{"-http", "256.0.0.1:0"}, 1, "bigtool:"},
	} {
		var stderr bytes.Buffer
		code := run(context.Background(), tc.args, io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, &stderr)
		if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantErr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.wantCode, tc.wantErr)
		}
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
