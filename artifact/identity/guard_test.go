package identity

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestGuard(t *testing.T) {
	g := &Guard{Hosts: []string{"spill.example.com"}, Origins: []string{"https://app.example.com"}}
	tests := []struct {
		name   string
		g      *Guard
		method string
		host   string
		hdr    map[string]string
		want   error
	}{
		{"loopback IP", nil, "GET", "127.0.0.1:8080", nil, nil},
		{"IPv6 loopback", nil, "GET", "[::1]:8080", nil, nil},
		{"pod IP (probes)", nil, "GET", "10.1.2.3:8080", nil, nil},
		{"localhost", nil, "GET", "localhost:8080", nil, nil},
		{"rebinding name", nil, "GET", "evil.example:8080", nil, ErrHost},
		{"empty Host", nil, "GET", "", nil, ErrHost},
		{"listed host with port", g, "GET", "spill.example.com:443", nil, nil},
		{"listed host", g, "GET", "spill.example.com", nil, nil},
		{"other host", g, "GET", "spill.example.org", nil, ErrHost},
		{"any host", &Guard{Hosts: []string{"*"}}, "GET", "whatever.example", nil, nil},
		{"same origin", nil, "GET", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:8080"}, nil},
		{"foreign origin", nil, "GET", "127.0.0.1:8080", map[string]string{"Origin": "http://evil.example"}, ErrOrigin},
		{"null origin", nil, "GET", "127.0.0.1:8080", map[string]string{"Origin": "null"}, ErrOrigin},
		{"listed origin", g, "POST", "spill.example.com", map[string]string{"Origin": "https://APP.example.com",
			"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, nil},
		{"cross-site text/plain POST", nil, "POST", "127.0.0.1:8080", map[string]string{
			"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, ErrCrossSite},
		{"same-site (other port) POST", nil, "POST", "localhost:8080", map[string]string{
			"Sec-Fetch-Site": "same-site", "Content-Type": "application/octet-stream"}, ErrCrossSite},
		{"same-origin POST", nil, "POST", "localhost:8080", map[string]string{
			"Sec-Fetch-Site": "same-origin", "Content-Type": "application/octet-stream"}, nil},
		{"simple POST without browser headers", nil, "POST", "127.0.0.1:8080", map[string]string{"Content-Type": "text/plain; charset=utf-8"}, ErrCrossSite},
		{"form POST", nil, "POST", "127.0.0.1:8080", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, ErrCrossSite},
		{"POST without Content-Type", nil, "POST", "127.0.0.1:8080", nil, ErrCrossSite},
		{"POST with bad Content-Type", nil, "POST", "127.0.0.1:8080", map[string]string{"Content-Type": "text/plain;;"}, ErrCrossSite},
		{"POST with Authorization", nil, "POST", "127.0.0.1:8080", map[string]string{"Authorization": "Bearer x", "Content-Type": "text/plain"}, nil},
		{"POST with X-Spillway header", nil, "POST", "127.0.0.1:8080", map[string]string{"X-Spillway-Name": "a.txt", "Content-Type": "text/plain"}, nil},
		{"JSON POST", nil, "POST", "127.0.0.1:8080", map[string]string{"Content-Type": "application/json"}, nil},
		{"DELETE", nil, "DELETE", "127.0.0.1:8080", nil, nil},
		{"cross-site DELETE", nil, "DELETE", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, ErrCrossSite},
		{"cross-site GET", nil, "GET", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, nil},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(tt.method, "http://x/v1/artifacts", nil)
		r.Host = tt.host
		for k, v := range tt.hdr {
			r.Header.Set(k, v)
		}
		if err := tt.g.Check(r); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("%s: Check = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// BenchmarkGuardCheck: the check every MCP message's POST passes (twice
// through cmd/spillway: its route and the proxy).
func BenchmarkGuardCheck(b *testing.B) {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Session-Id": "s1", "Mcp-Protocol-Version": "2025-11-25", "User-Agent": "Go-http-client/1.1"} {
		r.Header.Set(k, v)
	}
	g := &Guard{}
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Check(r); err != nil {
			b.Fatal(err)
		}
	}
}
