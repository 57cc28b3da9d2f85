package mcpproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/spillway-dev/spillway/examples/bigtool"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// The stdio face in front of a stdio child, measured: a call answered
// (ok), one the child dies on (upstream_error, kind closed) and one the
// client cancels (cancelled) are each observed once under the upstream
// "default". A second proxy on the same registry counts into the same
// series instead of failing or panicking.
func TestStdioFaceMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cmd, args := childCmd("plain")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newProxy := func() *mcpproxy.Proxy {
		p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: cmd, Args: args}, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	p, _ := newProxy(), newProxy()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { inW.Close() })
	go p.ServeStdio(ctx, inR, outW)
	go func() { <-ctx.Done(); outW.Close() }() // a line that never comes fails the test
	rd := bufio.NewReaderSize(outR, 1<<20)
	send := func(s string) { fmt.Fprintln(inW, s) }
	next := func(want string) {
		t.Helper()
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(line, want) {
				return
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	next(`"id":1`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}`)
	next(`"id":2`)
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"t"}}}`)
	next(`notifications/progress`)
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"no/such/method"}`)
	next(`"id":4`)
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"crash","arguments":{}}}`)
	next(`"id":5`)

	want := map[string]uint64{
		"initialize default ok":             1,
		"tools/call default ok":             1,
		"tools/call default cancelled":      1,
		"tools/call default upstream_error": 1,
		"other default ok":                  1, // the scripted child answers every method
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := requestCounts(t, reg)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spillway_mcp_request_duration_seconds counts = %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := counterOf(t, reg, "spillway_upstream_errors_total", "closed default"); v != 1 {
		t.Errorf("spillway_upstream_errors_total{upstream=default,kind=closed} = %v, want 1", v)
	}
}

// requestCounts are the sample counts of the request histogram, by
// "method upstream outcome".
func requestCounts(t *testing.T, g prometheus.Gatherer) map[string]uint64 {
	t.Helper()
	got := map[string]uint64{}
	for _, m := range gathered(t, g, "spillway_mcp_request_duration_seconds") {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		got[l["method"]+" "+l["upstream"]+" "+l["outcome"]] += m.GetHistogram().GetSampleCount()
	}
	return got
}

// counterOf is the counter name's series whose label values, in the
// order of their names, are values.
func counterOf(t *testing.T, g prometheus.Gatherer, name, values string) float64 {
	t.Helper()
	for _, m := range gathered(t, g, name) {
		var vs []string
		for _, p := range m.GetLabel() {
			vs = append(vs, p.GetValue())
		}
		if strings.Join(vs, " ") == values {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func gathered(t *testing.T, g prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// The HTTP face in front of a Streamable HTTP upstream (the relay, over
// bigtool): an offloaded call is ok and counts its bytes (stored, and
// kept out of the context) under its tool's name, a tool bigtool does not
// have is the upstream's JSON-RPC error (its tool "other"); a proxy whose upstream is down answers
// upstream_error of kind connect. All under the upstream "default".
func TestRelayMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := bigtool.NewHandler(bigtool.NewServer(nil), bigtool.EraSession)
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(t)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: serve(t, h), Transport: "streamable"}, Artifacts: svc,
		Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{}), SpillDir: t.TempDir(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	url := serve(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sid := initSession(t, ctx, url)
	for _, msg := range []string{`"tools/list"`, `"tools/call","params":{"name":"query","arguments":{"rows":2000}}`,
		`"tools/call","params":{"name":"no_such_tool","arguments":{}}`} {
		resp, err := sessionPost(ctx, url, sid, `{"jsonrpc":"2.0","id":5,"method":`+msg+`}`)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	// A second proxy on the same registry, its upstream a closed port.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	q, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: down, Transport: "streamable"}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	resp, err := sessionPost(ctx, serve(t, q), "", initBody)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	got := requestCounts(t, reg)
	for k, want := range map[string]uint64{
		"initialize default ok":             1,
		"tools/call default ok":             1,
		"tools/call default error":          1,
		"tools/list default ok":             1,
		"initialize default upstream_error": 1,
	} {
		if got[k] != want {
			t.Errorf("%s: %d requests, want %d (all: %v)", k, got[k], want, got)
		}
	}
	if v := counterOf(t, reg, "spillway_upstream_errors_total", "connect default"); v != 1 {
		t.Errorf("spillway_upstream_errors_total{upstream=default,kind=connect} = %v, want 1", v)
	}
	stored, saved := counterOf(t, reg, "spillway_offload_bytes_stored_total", "text"), counterOf(t, reg, "spillway_offload_bytes_saved_total", "text")
	if n := counterOf(t, reg, "spillway_offloads_total", "text"); n != 1 || stored < 300_000 || saved <= 0 || saved >= stored {
		t.Errorf("offloads %v, bytes stored %v, saved %v; want 1 text item of ~400 kB, most of it saved", n, stored, saved)
	}
	// A tool the list named is counted by its name, another as other.
	for _, labels := range []string{"ok query default", "error other default"} {
		if v := counterOf(t, reg, "spillway_mcp_tool_calls_total", labels); v != 1 {
			t.Errorf("spillway_mcp_tool_calls_total{outcome tool upstream = %s} = %v, want 1", labels, v)
		}
	}
}
