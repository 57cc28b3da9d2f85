package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// The big outputs again, from an HTTP upstream that answers over SSE: the
// same generated outputs as the stdio upstream's, each one data line of
// one event, streamed as generated. The anchor is a bare
// httputil.ReverseProxy (-rproxy), which copies the event as it comes.

var (
	upstreamSSE = flag.String("upstream-sse", "", "internal: run as the HTTP tool server of the SSE big-output comparison, listening here")
	sseOnly     = flag.Bool("sse-only", false, "run only the big outputs from an HTTP upstream over SSE (sizes from -big-mib, -conc-mib)")
)

// upstreamSSEServe is the -upstream-sse mode: every POST to /mcp with an
// id is answered by one SSE event holding the answer upstreamStdio would
// give (the "big" tool streamed as it is generated); notifications get
// 202. There are no sessions: each request stands alone.
func upstreamSSEServe() int {
	exitWithParent()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		var m upstreamRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m); err != nil {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := upstreamAnswer(m.Method, m.Params.ProtocolVersion, m.Params.Name, m.Params.Arguments)
		w.Header().Set("Content-Type", "text/event-stream")
		out := bufio.NewWriterSize(w, 256<<10)
		fmt.Fprintf(out, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,", m.ID)
		if result(out) != nil {
			return
		}
		out.WriteString("}\n\n")
		out.Flush()
	})
	srv := &http.Server{Addr: *upstreamSSE, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, "spillway-load -upstream-sse:", srv.ListenAndServe())
	return 1
}

// sseComparisons runs the big outputs from the SSE upstream, as
// stdioComparisons does from the stdio upstream, through the bare reverse
// proxy and through Spillway: offloading on both cores and on one, and
// with --offload=false.
func sseComparisons() error {
	up, err := startSSEUpstream()
	if err != nil {
		return err
	}
	defer stopChild(strings.TrimPrefix(up, "http://"))
	return bigOutputRuns(sseProxies(up), "an HTTP upstream over SSE", nil)
}

// startSSEUpstream runs this binary in -upstream-sse mode and returns its
// base URL.
func startSSEUpstream() (string, error) {
	a, err := startSelf("-upstream-sse", addr())
	if err != nil {
		return "", err
	}
	return "http://" + a, nil
}

// sseProxies are the sides of the SSE comparison that -stdio-sides
// names, the anchor first.
func sseProxies(up string) []stdioProxy {
	spillEnv := func(env []string, extra ...string) func([]string) (string, error) {
		return func([]string) (string, error) {
			args := append([]string{"--upstream-url", up + "/mcp", "--max-message", strconv.FormatInt(maxMessage(), 10)}, extra...)
			return startSpillwayEnv(env, args...), nil
		}
	}
	return chosenSides([]stdioProxy{
		{"rproxy", "bare httputil.ReverseProxy (anchor)", func([]string) (string, error) { return startReverseProxy(up) }},
		{"spillway", "Spillway", spillEnv(nil)},
		// The same on one core at a time: the upstream here shares the
		// machine's two cores and needs one whole, so this tells how much
		// of Spillway's pace is its own work and how much the upstream
		// waiting for a core.
		{"spillway-1cpu", "Spillway, GOMAXPROCS=1", spillEnv([]string{"GOMAXPROCS=1"})},
		{"spillway-nooffload", "Spillway --offload=false", spillEnv(nil, "--offload=false")},
	})
}
