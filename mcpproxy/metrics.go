package mcpproxy

import (
	"context"
	"net/http"
	"strings"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/stdio"
	"github.com/spillway-dev/spillway/mcpproxy/internal/metrics"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// The proxy's Prometheus series (package metrics; README.md lists them)
// are measured at the edges of the faces, so that every face and every
// kind of upstream is measured alike: an HTTP face's POSTs (observe,
// innermost in front's chain) and a stdio client's messages
// (stdioMeasured), each request with the labels routeOf gives it. The
// offloader counts what it stores (offload.Options.Metrics).

// newMetrics registers the proxy's series on o.Registerer (nil: none)
// and gives the Offloader a copy of itself that counts into them.
func newMetrics(o *Options) (*metrics.Set, error) {
	set, err := metrics.New(o.Registerer)
	if set != nil && o.Offloader != nil {
		o.Offloader = o.Offloader.With(offload.Overrides{Metrics: set})
	}
	return set, err
}

// knownUpstreams exports the upstream error series of the upstreams New
// was given, at zero: each server of a Gateway (one added later appears
// when it first fails), or the one upstream.
func (p *Proxy) knownUpstreams() {
	gw, ok := p.o.Upstream.(*Gateway)
	if !ok {
		p.metrics.Known(metrics.Default)
		return
	}
	for _, s := range gw.Servers {
		p.metrics.Known(s.Name)
	}
}

// observed is a face measured: each POST's requests are observed when
// the face is done with it.
type observed struct {
	p    *Proxy
	face frontHandler
}

// observe returns face measured, or face itself without metrics.
func (p *Proxy) observe(face frontHandler) frontHandler {
	if p.metrics == nil {
		return face
	}
	return observed{p: p, face: face}
}

func (o observed) ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request) {
	ex := o.p.metrics.Peek(r, o.p.o.MaxBody, o.p.routeOf(rq))
	o.face.ServeHTTP(ex.Writer(w), r, rq)
	ex.Done(r.Context().Err() != nil)
}

// stdioMeasured is the stdio client c measured; call end once the face
// is done with it.
func (p *Proxy) stdioMeasured(ctx context.Context, c stdio.Client) (_ stdio.Client, end func()) {
	return p.metrics.Stdio(ctx, c, p.routeOf(ownmethods.Request{Stdio: true}))
}

// routeOf returns what labels a request of rq's caller: its upstream,
// metrics.Own for what the proxy answers itself, metrics.Default in front
// of one server, and through a Gateway the server a named request goes to
// (metrics.All for the requests every server gets, metrics.None for a
// name no server has); and a tools/call's tool, by the name its client
// called it when a tools/list result named it (the proxy learns every
// one, mcpheader.Tools), else "other": a client cannot add series by
// calling names nobody listed.
func (p *Proxy) routeOf(rq ownmethods.Request) func(*jsonrpc.Message) metrics.Route {
	return func(m *jsonrpc.Message) metrics.Route {
		kind, name := "", ""
		switch m.Method {
		case "tools/call":
			kind, name = "tool", jsonrpc.StringMember(m.Params, "name")
			if p.methods.OwnsTool(rq, name) {
				return metrics.Route{Upstream: metrics.Own, Tool: name}
			}
			r := metrics.Route{Upstream: p.upstreamOf(kind, name), Tool: "other"}
			if _, listed := p.tools.Lookup(name); listed {
				r.Tool = name
			}
			return r
		case "prompts/get":
			kind, name = "prompt", jsonrpc.StringMember(m.Params, "name")
		case "resources/read", "resources/subscribe", "resources/unsubscribe", "resources/stream":
			kind, name = "resource", jsonrpc.StringMember(m.Params, "uri")
			if p.o.Artifacts != nil && strings.HasPrefix(name, artifact.URIPrefix) {
				return metrics.Route{Upstream: metrics.Own}
			}
		}
		return metrics.Route{Upstream: p.upstreamOf(kind, name)}
	}
}

// upstreamOf is the upstream label of a request for a tool, prompt or
// resource (kind) named name; kind "" for a request that names none.
func (p *Proxy) upstreamOf(kind, name string) string {
	switch {
	case p.gateway == nil:
		return metrics.Default
	case kind == "":
		return metrics.All
	}
	if server, _, ok := p.gateway.ServerOf(kind, name); ok {
		return server
	}
	return metrics.None
}
