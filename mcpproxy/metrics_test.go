package mcpproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/spillway-dev/spillway/mcpproxy"
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
