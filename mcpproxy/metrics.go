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
// (stdioMeasured), each request with the upstream upstreamOf names. The
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
	ex := o.p.metrics.Peek(r, o.p.o.MaxBody, o.p.upstreamOf(rq))
	o.face.ServeHTTP(ex.Writer(w), r, rq)
	ex.Done(r.Context().Err() != nil)
}

// stdioMeasured is the stdio client c measured; call end once the face
// is done with it.
func (p *Proxy) stdioMeasured(ctx context.Context, c stdio.Client) (_ stdio.Client, end func()) {
	return p.metrics.Stdio(ctx, c, p.upstreamOf(ownmethods.Request{Stdio: true}))
}

// upstreamOf returns what names the upstream of a request for rq's
// caller in the upstream label: metrics.Own for what the proxy answers
// itself, metrics.Default in front of one server, and through a Gateway
// the server a named request goes to (metrics.All for the requests every
// server gets, metrics.None for a name no server has).
func (p *Proxy) upstreamOf(rq ownmethods.Request) func(*jsonrpc.Message) string {
	return func(m *jsonrpc.Message) string {
		kind, name := "", ""
		switch m.Method {
		case "tools/call":
			kind, name = "tool", jsonrpc.StringMember(m.Params, "name")
			if p.methods.OwnsTool(rq, name) {
				return metrics.Own
			}
		case "prompts/get":
			kind, name = "prompt", jsonrpc.StringMember(m.Params, "name")
		case "resources/read", "resources/subscribe", "resources/unsubscribe", "resources/stream":
			kind, name = "resource", jsonrpc.StringMember(m.Params, "uri")
			if p.o.Artifacts != nil && strings.HasPrefix(name, artifact.URIPrefix) {
				return metrics.Own
			}
		}
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
}
