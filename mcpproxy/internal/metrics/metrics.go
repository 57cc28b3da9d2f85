// Package metrics holds the MCP proxy's Prometheus series: the latency
// and outcome of every request a client sends, the upstream failures
// behind them, and what the offloader kept out of the agents' contexts.
//
// The series are registered once per registry (New): proxies that share a
// registry share them. A nil *Set measures nothing, so the proxy calls
// its methods without checking. The faces are measured from outside
// (Exchange for an HTTP face, Client for the stdio face); the offloader
// calls Offloaded for each item it stored. Every label takes its values
// from a small closed set, or from the proxy's configuration (upstream
// names), never from what a client or an upstream sends.
package metrics

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes of a request: the value of the outcome label.
const (
	OK            = "ok"             // a result
	Error         = "error"          // a JSON-RPC error the upstream (or the proxy's own method) answered
	Denied        = "denied"         // refused by Spillway: the call decision, a 403
	UpstreamError = "upstream_error" // the upstream failed: unreachable, timed out, 5xx, gone
	Cancelled     = "cancelled"      // the client stopped waiting before an answer
)

// The kinds of an upstream failure: the value of the kind label of
// spillway_upstream_errors_total.
const (
	KindConnect  = "connect"  // unreachable, unavailable, refused to connect
	KindTimeout  = "timeout"  // stalled mid-message, or did not answer in time
	KindStatus   = "status"   // an HTTP status that is not an answer (5xx, a refusal)
	KindProtocol = "protocol" // an answer the proxy cannot read (invalid, too large)
	KindClosed   = "closed"   // the connection or the child process ended
)

// Upstream label values that are not a configured server's name (a
// server's name starts with a letter).
const (
	// Own is the upstream of a request the proxy answers itself (its
	// artifact tools and spillway:// resources).
	Own = "_spillway"
	// All is the upstream of a request a gateway sends to every server
	// (initialize, the lists, ping).
	All = "_all"
	// None is the upstream of a named request (a tool, a prompt, a
	// resource) that no server of a gateway has.
	None = "_none"
	// Default is the upstream of a proxy in front of one server.
	Default = "default"
)

// durationBuckets (seconds) run from 5 ms (the proxy's own answer) to 5
// minutes (a long tool call), about two per decade.
var durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Set is the proxy's series on one registry. Create it with New; a nil
// *Set measures nothing. Safe for concurrent use.
type Set struct {
	requests       *prometheus.HistogramVec // method, upstream, outcome
	toolCalls      *prometheus.CounterVec   // upstream, tool, outcome
	upstreamErrors *prometheus.CounterVec   // upstream, kind
	offloads       *prometheus.CounterVec   // kind
	storedBytes    *prometheus.CounterVec   // kind
	savedBytes     *prometheus.CounterVec   // kind

	mu    sync.Mutex
	tools map[string]bool // the tool label values in use, at most maxTools
}

// maxTools bounds the tool label's values: past it a new tool counts as
// "other" (an upstream may list any number of tools).
const maxTools = 1000

// New registers the proxy's series on reg and returns them; a nil reg
// returns a nil *Set (no metrics). When reg already holds them (another
// proxy registered them first) New returns that proxy's series, so that
// both count into the same ones; a registry holding different collectors
// under these names is an error.
func New(reg prometheus.Registerer) (*Set, error) {
	if reg == nil {
		return nil, nil
	}
	s := &Set{
		tools: map[string]bool{},
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "spillway_mcp_request_duration_seconds",
			Help:    "Time from a client's MCP request to its answer, by method (the MCP methods, else other), upstream and outcome.",
			Buckets: durationBuckets,
		}, []string{"method", "upstream", "outcome"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spillway_mcp_tool_calls_total",
			Help: "Client tools/call requests by upstream, tool (a tool an upstream listed, else other) and outcome.",
		}, []string{"upstream", "tool", "outcome"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spillway_upstream_errors_total",
			Help: "Client requests that failed because of their upstream, by upstream and kind (connect, timeout, status, protocol, closed).",
		}, []string{"upstream", "kind"}),
		offloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spillway_offloads_total", Help: "Result items offloaded to the artifact store, by kind.",
		}, []string{"kind"}),
		storedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spillway_offload_bytes_stored_total", Help: "Bytes of offloaded items written to the artifact store, by kind.",
		}, []string{"kind"}),
		savedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spillway_offload_bytes_saved_total",
			Help: "Bytes kept out of agents' contexts: each offloaded item's size less the preview and link that replaced it, by kind.",
		}, []string{"kind"}),
	}
	var err error
	s.requests, err = register(reg, s.requests)
	for _, c := range []**prometheus.CounterVec{&s.toolCalls, &s.upstreamErrors, &s.offloads, &s.storedBytes, &s.savedBytes} {
		if err == nil {
			*c, err = register(reg, *c)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	// Every kind is exported from the start, at zero, so that a rate over
	// a kind that has not moved yet is 0, not absent.
	for _, k := range offloadKinds {
		s.offloads.WithLabelValues(k)
		s.storedBytes.WithLabelValues(k)
		s.savedBytes.WithLabelValues(k)
	}
	return s, nil
}

// register registers c on reg, or returns the collector of the same type
// already registered in its place.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if prev, ok := are.ExistingCollector.(C); ok {
			return prev, nil
		}
	}
	return c, err
}

// Known exports the upstream error series of each upstream, at zero for
// every kind, so that a rate over an upstream that has not failed yet is
// 0, not absent.
func (s *Set) Known(upstreams ...string) {
	if s == nil {
		return
	}
	for _, u := range upstreams {
		for _, k := range failureKinds {
			s.upstreamErrors.WithLabelValues(u, k)
		}
	}
}

// failureKinds are the values of the kind label of the upstream errors.
var failureKinds = []string{KindConnect, KindTimeout, KindStatus, KindProtocol, KindClosed}

// offloadKinds are the kinds of the offload decision (policy.OffloadInput).
var offloadKinds = []string{"text", "image", "audio", "resource", "structured"}

// Route is where a request goes, as the labels say it: its upstream
// (a configured name, or Default, All, None, Own) and, for a tools/call,
// its tool: a name an upstream listed (or the proxy's own tool), else
// "other" ("" for another method).
type Route struct {
	Upstream, Tool string
}

// Request records one client request: its method (any string: folded
// into the closed set here), its route, its outcome, and how long it
// took. An upstream_error outcome also counts an upstream error of kind;
// a tools/call also counts a tool call.
func (s *Set) Request(method string, r Route, outcome, kind string, d time.Duration) {
	if s == nil {
		return
	}
	s.requests.WithLabelValues(Method(method), r.Upstream, outcome).Observe(d.Seconds())
	if outcome == UpstreamError {
		s.upstreamErrors.WithLabelValues(r.Upstream, kind).Inc()
	}
	if method == "tools/call" && r.Tool != "" {
		s.toolCalls.WithLabelValues(r.Upstream, s.tool(r.Tool), outcome).Inc()
	}
}

// tool returns the tool label of name: name itself while fewer than
// maxTools are in use, else "other".
func (s *Set) tool(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.tools[name] {
		if len(s.tools) >= maxTools {
			return "other"
		}
		s.tools[name] = true
	}
	return name
}

// Offloaded records one item the offloader stored: its kind (of the
// offload decision; another value counts as "other"), the bytes written
// to the store, and the bytes kept out of the agent's context (negative
// counts as 0).
func (s *Set) Offloaded(kind string, stored, saved int64) {
	if s == nil {
		return
	}
	found := false
	for _, k := range offloadKinds {
		found = found || k == kind
	}
	if !found {
		kind = "other"
	}
	s.offloads.WithLabelValues(kind).Inc()
	s.storedBytes.WithLabelValues(kind).Add(float64(max(stored, 0)))
	s.savedBytes.WithLabelValues(kind).Add(float64(max(saved, 0)))
}
