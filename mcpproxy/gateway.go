package mcpproxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/terminating"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/gateway"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/httpclient"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/sessionbridge"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/era"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/policy/decision"
)

// Prefix modes of a Gateway: when a tool's or prompt's name gets its
// server's name in front.
const (
	PrefixAlways    = gateway.PrefixAlways    // every name, and every resource URI ("fs+file:///a")
	PrefixNever     = gateway.PrefixNever     // none: of two tools of one name, the first server's wins
	PrefixCollision = gateway.PrefixCollision // only names two servers share
)

// CodeDenied is the JSON-RPC error code of a request the call decision
// refused.
const CodeDenied = gateway.CodeDenied

// Gateway is an Upstream of many tool servers: the proxy presents them to
// its clients as one server, each tool and prompt under its server's
// prefix (see Prefix). Each server is spoken to in its own era and
// transport, and one that is down fails only its own requests.
type Gateway struct {
	Servers []Server
	// Prefix is PrefixAlways, PrefixNever or PrefixCollision; "" is
	// PrefixAlways with two servers or more, PrefixNever with one.
	Prefix string
	// Separator joins a server's name and a tool's; default "_".
	Separator string
	// Drain is how long a removed server's calls may go on; default 30 s.
	Drain time.Duration
}

func (*Gateway) upstream() {}

// Server is one tool server of a Gateway.
type Server struct {
	// Name is a letter, then up to 31 letters, digits or '-': the
	// prefix of the server's tools.
	Name string
	// Upstream is an *HTTPUpstream or a *CommandUpstream.
	Upstream Upstream
	// Allow and Deny are path.Match patterns over the server's own tool
	// names: a tool is listed and callable when it matches one of Allow
	// (or Allow is empty) and none of Deny.
	Allow, Deny []string
	// ConnectTimeout bounds starting or reaching the server and its
	// handshake (default 10 s); CallTimeout a request's answer (0: no
	// bound but the client's own).
	ConnectTimeout, CallTimeout time.Duration
	// Offload overrides the Offloader's settings for this server's
	// results; nil keeps them.
	Offload *ServerOffload
}

// ServerOffload overrides the Offloader's settings for one server's
// results. Zero fields keep the Offloader's own.
type ServerOffload struct {
	Budget                         int64 // what a tools/call result keeps inline
	TextThreshold, BinaryThreshold int64
	TTL                            time.Duration // of the links handed out
	// Never names tools (as the server names them) whose results are
	// never offloaded.
	Never []string
}

// CallDecider is the call decision (*policy.Engine is one): may this
// tenant make this call? An error denies.
type CallDecider interface {
	Call(ctx context.Context, in decision.CallInput) (decision.Call, error)
}

// ServerHealth is one Gateway server's state, for a readiness report.
type ServerHealth = gateway.Health

// gatewayFaces are the faces of a Gateway: the proxy terminates HTTP
// itself (a session gets its own connection to every server, a tenant's
// stateless requests share one, bridged to the session era the gateway
// speaks), and a stdio client gets its own.
func (p *Proxy) gatewayFaces(g *Gateway) (httpFace, stdioFace, error) {
	specs, err := p.gatewaySpecs(g.Servers)
	if err != nil {
		return nil, nil, err
	}
	reg, err := gateway.NewRegistry(gateway.Options{Prefix: g.Prefix, Separator: g.Separator, Drain: g.Drain,
		Authorize: p.authorizeCall, Logger: p.log}, specs)
	if err != nil {
		return nil, nil, fmt.Errorf("mcpproxy: %w", err)
	}
	p.gateway = reg
	p.setServerOffload(g.Servers)
	// The Conns speak the session era; a stateless-era client is bridged,
	// and its listen streams carry the list changes every Conn declares.
	eras := era.Fixed(era.Eras{Versions: []string{era.Session}, Initialize: gateway.Initialize()})
	return terminating.New(p.terminatingOptions(reg.Dial, nil, eras)), supervisedStdio{reg.Dial, p.log}, nil
}

// UpdateServers replaces a Gateway's servers while clients are connected:
// an added server is connected, a removed one drains its calls, a changed
// one is reconnected, and every client is told its lists changed. It
// fails, changing nothing, for a list the Gateway would refuse, and for a
// proxy whose upstream is not a Gateway.
func (p *Proxy) UpdateServers(servers []Server) error {
	if p.gateway == nil {
		return errors.New("mcpproxy: the upstream is not a gateway")
	}
	specs, err := p.gatewaySpecs(servers)
	if err != nil {
		return err
	}
	if err := p.gateway.Update(specs); err != nil {
		return err
	}
	p.setServerOffload(servers)
	return nil
}

// serverOffload is one server's offloading: its Rewriter (its settings,
// its name in policy inputs) and the tools it never offloads.
type serverOffload struct {
	rw    *offload.Rewriter
	never []string
}

// setServerOffload prepares each server's offloading.
func (p *Proxy) setServerOffload(servers []Server) {
	if p.o.Offloader == nil {
		return
	}
	m := make(map[string]serverOffload, len(servers))
	for _, s := range servers {
		o := offload.Overrides{Server: s.Name}
		var never []string
		if so := s.Offload; so != nil {
			o.Budget, o.TextThreshold, o.BinaryThreshold, o.TTL = so.Budget, so.TextThreshold, so.BinaryThreshold, so.TTL
			never = so.Never
		}
		m[s.Name] = serverOffload{rw: p.o.Offloader.With(o), never: never}
	}
	p.serverOffload.Store(&m)
}

// offloaderFor picks the Rewriter of a call through a Gateway: its
// server's, or none for a tool the server never offloads.
func (p *Proxy) offloaderFor(c offload.Call) *offload.Rewriter {
	kind, name := "tool", c.Tool
	if c.Method == "resources/read" {
		kind, name = "resource", c.URI
	}
	m := p.serverOffload.Load()
	if m == nil {
		return p.o.Offloader
	}
	server, orig, ok := p.gateway.ServerOf(kind, name)
	so, found := (*m)[server]
	if !ok || !found {
		return p.o.Offloader
	}
	if kind == "tool" && slices.Contains(so.never, orig) {
		return nil
	}
	return so.rw
}

// Servers reports each Gateway server's health across the connections to
// it; nil when the upstream is not a Gateway.
func (p *Proxy) Servers() []ServerHealth {
	if p.gateway == nil {
		return nil
	}
	return p.gateway.Status()
}

// gatewaySpecs turns servers into the gateway's specs, each with the dial
// of its kind.
func (p *Proxy) gatewaySpecs(servers []Server) ([]gateway.Spec, error) {
	specs := make([]gateway.Spec, 0, len(servers))
	for _, s := range servers {
		spec := gateway.Spec{Name: s.Name, Allow: s.Allow, Deny: s.Deny,
			ConnectTimeout: s.ConnectTimeout, CallTimeout: s.CallTimeout, Version: serverVersion(s)}
		if err := p.serverDial(&spec, s.Upstream); err != nil {
			return nil, fmt.Errorf("mcpproxy: server %q: %w", s.Name, err)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// serverDial sets how a Gateway connects to up in the session era: a
// child bridged when it speaks only the stateless era, a Streamable HTTP
// server likewise (its tools' x-mcp-header bindings learned from its own
// lists, for the headers of a bridged call), a legacy one as it is.
func (p *Proxy) serverDial(spec *gateway.Spec, up Upstream) error {
	switch up := up.(type) {
	case *CommandUpstream:
		d, err := p.childDial(up)
		if err != nil {
			return err
		}
		spec.Dial = d.autoBridge
		if p.o.StrictEras {
			spec.Dial = d.dial
		}
		return nil
	case *HTTPUpstream:
		up, err := p.authorized(up)
		if err != nil {
			return err
		}
		tools := &mcpheader.Tools{}
		spec.Learn = func(result []byte) { tools.Learn(result) }
		spec.Knows = func(name string) bool { _, ok := tools.Lookup(name); return ok }
		d := p.httpDialBindings(up, up.Transport, tools)
		spec.Dial = d.dial
		if up.Transport == httpclient.Legacy || p.o.StrictEras {
			return nil
		}
		spec.Dial = func(ctx context.Context) (mux.Conn, error) {
			c, err := d.dial(ctx)
			if err != nil {
				return nil, err
			}
			return sessionbridge.NewAuto(c, sessionbridge.Options{Logger: p.log}), nil
		}
		return nil
	case *Gateway:
		return errors.New("a gateway cannot be a gateway's server")
	default:
		return errors.New("unknown upstream type")
	}
}

// serverVersion tells a server's configurations apart, so that an update
// reconnects only the servers whose configuration changed. Header values
// go in hashed, as everything does.
func serverVersion(s Server) string {
	v := map[string]any{"allow": s.Allow, "deny": s.Deny, "connect": s.ConnectTimeout, "call": s.CallTimeout, "offload": s.Offload}
	switch up := s.Upstream.(type) {
	case *CommandUpstream:
		v["command"] = []any{up.Command, up.Args, up.Env, up.Dir, up.User}
	case *HTTPUpstream:
		keys := make([]string, 0, len(up.Header))
		for k := range up.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		hs := make([]any, 0, len(keys))
		for _, k := range keys {
			hs = append(hs, k, up.Header[k])
		}
		v["http"] = []any{up.URL, up.Transport, hs, up.Client != nil && up.Client != http.DefaultClient}
		if o := up.OAuth; o != nil {
			v["oauth"] = []any{o.TokenURL, o.ClientID, o.ClientSecret, o.Scopes, o.Resource}
		}
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// authorizeCall asks the call decision, denying when it cannot be asked
// (an evaluation error, or no answer within 5 s).
func (p *Proxy) authorizeCall(ctx context.Context, in decision.CallInput) decision.Call {
	if p.o.CallPolicy == nil {
		return decision.Call{Allow: true}
	}
	in.Claims = identity.ClaimsFrom(ctx) // the caller's, when an access token said who
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := p.o.CallPolicy.Call(ctx, in)
	if err != nil {
		p.log.Warn("call decision failed; denying", "tenant", in.Tenant, "upstream", in.Upstream, "name", in.Name, "err", err)
		return decision.Call{Reason: "the policy could not be evaluated"}
	}
	return d
}
