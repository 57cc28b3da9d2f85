package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// BenchmarkSmallCall is one small tools/call round trip (session era,
// SSE response) directly to an official-SDK server, through a bare
// httputil.ReverseProxy, and through Spillway with offloading on: the
// in-process view of what cmd/spillway-load measures across processes.
// Compare CPU profiles and allocations of the last two.
func BenchmarkSmallCall(b *testing.B) {
	s := mcp.NewServer(&mcp.Implementation{Name: "small", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok " + strings.Repeat("x", 200)}}}, nil
		})
	up := serve(b, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	target, _ := url.Parse(up)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	svc := newService(b)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up, Transport: "streamable"}, Artifacts: svc,
		Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	for _, side := range []struct{ name, url string }{
		{"direct", up},
		{"reverseproxy", serve(b, rp)},
		{"spillway", serve(b, p)},
	} {
		b.Run(side.name, func(b *testing.B) {
			c := &rawClient{url: side.url}
			c.do(b, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
			c.notify(b, "notifications/initialized")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c.do(b, "tools/call", `{"name":"echo","arguments":{}}`)
			}
		})
	}
}

// rawClient is the least a session-era client does: one POST per
// message, the whole response read.
type rawClient struct {
	url, session string
	id           int
	buf          bytes.Buffer
	hc           *http.Client // nil: http.DefaultClient
}

func (c *rawClient) post(b testing.TB, body string) *http.Response {
	resp, err := c.send(body)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

// send posts one message and keeps the session id the server gives.
func (c *rawClient) send(body string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	hc := c.hc
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.session = s
	}
	return resp, nil
}

func (c *rawClient) do(b testing.TB, method, params string) {
	if err := c.try(method, params); err != nil {
		b.Fatal(err)
	}
}

// try makes one request and reads its whole answer, which must be a
// result. Unlike do it may run on any goroutine.
func (c *rawClient) try(method, params string) error {
	c.id++
	resp, err := c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.id, method, params))
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	c.buf.Reset()
	_, err = c.buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("%s: %s: %w", method, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(c.buf.Bytes(), []byte(`"result"`)) {
		return fmt.Errorf("%s: %s %.300s", method, resp.Status, c.buf.Bytes())
	}
	return nil
}

func (c *rawClient) notify(b testing.TB, method string) {
	resp := c.post(b, fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, method))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
