package mcpproxy_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// gatewayClients is how many sessions call at once in
// BenchmarkGatewaySmallCall, as in the benchmark (4 upstreams × 8
// concurrent clients).
const gatewayClients = 8

// BenchmarkGatewaySmallCall is bigtool's small tools/call from 8
// concurrent sessions (session era, over HTTP) through a single-upstream
// proxy (one bigtool child per session, as `--upstream-cmd` runs it),
// through a Gateway of one bigtool (the same, with the gateway's routing
// in between), and through a Gateway of four, each session's calls spread
// over the four servers' prefixed tools: the in-process view of what
// cmd/spillway-load -gateway-only measures across processes. ns/op is wall
// time over all sessions' calls (1/throughput); p50-µs and p99-µs are
// each call's latency; cpu-µs/op is this process's CPU time per call (the
// clients' and the proxy's). Compare CPU profiles of the sides.
func BenchmarkGatewaySmallCall(b *testing.B) {
	bt := buildBigtool(b)
	one := []mcpproxy.Server{{Name: "b1", Upstream: &mcpproxy.CommandUpstream{Command: bt}}}
	var four []mcpproxy.Server
	for i := range 4 {
		four = append(four, mcpproxy.Server{Name: fmt.Sprintf("b%d", i+1), Upstream: &mcpproxy.CommandUpstream{Command: bt}})
	}
	for _, side := range []struct {
		name     string
		upstream mcpproxy.Upstream
		tool     func(client, n int) string
	}{
		{"single", &mcpproxy.CommandUpstream{Command: bt}, func(int, int) string { return "small" }},
		{"gateway1", &mcpproxy.Gateway{Servers: one}, func(int, int) string { return "small" }},
		{"gateway4", &mcpproxy.Gateway{Servers: four}, func(client, n int) string { return fmt.Sprintf("b%d_small", (client+n)%4+1) }},
	} {
		url := serve(b, benchProxy(b, side.upstream))
		b.Run(side.name, func(b *testing.B) { smallCallsAtOnce(b, url, side.tool) })
	}
}

// benchProxy is a proxy in front of up with offloading on and, for a
// Gateway, the policy engine as its call decision, as spillway serve
// runs them.
func benchProxy(b *testing.B, up mcpproxy.Upstream) *mcpproxy.Proxy {
	svc := newService(b)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	o := mcpproxy.Options{Upstream: up, Artifacts: svc, Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{}),
		Registerer: prometheus.NewRegistry()}
	if os.Getenv("SPILLWAY_BENCH_NO_METRICS") != "" { // the cost of the proxy's series, beside
		o.Registerer = nil
	}
	if _, ok := up.(*mcpproxy.Gateway); ok {
		o.CallPolicy = eng
	}
	p, err := mcpproxy.New(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

// smallCallsAtOnce opens gatewayClients sessions at url, warms each up
// with a call of every tool it will call, then has them make b.N small
// calls between them, all at once; tool names the tool of a session's
// n-th call. It reports each call's p50 and p99.
func smallCallsAtOnce(b *testing.B, url string, tool func(client, n int) string) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * gatewayClients}}
	b.Cleanup(hc.CloseIdleConnections)
	cs := make([]*rawClient, gatewayClients)
	for i := range cs {
		cs[i] = &rawClient{url: url, hc: hc}
		cs[i].do(b, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
		cs[i].notify(b, "notifications/initialized")
		for n := range 4 {
			cs[i].do(b, "tools/call", smallParams(tool(i, n)))
		}
	}
	var next atomic.Int64
	lat := make([][]time.Duration, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	cpu0 := processCPU()
	b.ResetTimer()
	for i, c := range cs {
		wg.Go(func() {
			for n := int(next.Add(1)); n <= b.N; n = int(next.Add(1)) {
				t0 := time.Now()
				if errs[i] = c.try("tools/call", smallParams(tool(i, n))); errs[i] != nil {
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu := processCPU() - cpu0
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the CPU time this process (the clients and the proxy, not
// the upstream children) has used: a figure per call less at the mercy of
// a shared machine than latency.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// smallParams are the params of bigtool's small call of tool.
func smallParams(tool string) string {
	return fmt.Sprintf(`{"name":%q,"arguments":{"echo":"x"}}`, tool)
}
