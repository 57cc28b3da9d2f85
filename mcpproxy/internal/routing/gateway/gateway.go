// Package gateway puts many upstream MCP servers behind one connection: it
// is where a request that names a tool, a prompt or a resource finds its
// upstream. A Conn is a mux.Conn to a virtual session-era server made of
// every upstream of a Registry, so the faces serve it as they serve one
// stdio child (a session gets a Conn of its own, a tenant's stateless
// requests share one, the stdio face's client has one).
//
// A Conn holds one supervised connection per upstream (restarted with
// backoff when it dies, the client's handshake replayed), spoken to in the
// upstream's own era by whatever Dial the Registry was given (a bridged
// connection for a stateless-only server). It answers initialize, ping and
// the four lists itself by asking every upstream and merging: names get
// their upstream's prefix (Options.Prefix), resource URIs too with
// PrefixAlways, and what an upstream that is down would have listed is
// missing, said in the result's _meta ("io.spillway/unavailable"). A
// request that names something (tools/call, prompts/get, resources/read,
// subscribe, completion/complete) goes to the one upstream it names, under
// the name that upstream knows, after the call decision (Options.Authorize)
// allowed it; its answer comes back with the client's names. A request an
// upstream that is down or slow cannot answer gets a JSON-RPC error that
// names the upstream and says when to retry; the other upstreams go on.
// A connection that still looks alive when a request fails in its
// transport (an HTTP server that went away is noticed only so) is pinged,
// and closed when the upstream does not answer, so that it is reconnected
// and the client hears the tools went and came back.
//
// A client of the stateless era (2026-07-28) that reaches a Conn as it is
// (the stdio face passes its messages unchanged) is served in that era
// (stateless.go); over HTTP the terminating face bridges such clients to
// the session era first.
//
// Each upstream's messages reach the client through a queue of its own,
// so one that floods notifications or is read slowly delays only itself.
//
// The Registry holds the configured upstreams; Update replaces them while
// Conns live: an added upstream is connected, a removed one is closed once
// its calls are over (at most Options.Drain), and each Conn's client gets
// the list_changed notifications.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/policy/decision"
)

// Spec is one configured upstream.
type Spec struct {
	// Name is the upstream's name (CheckName): the prefix of its tools.
	Name string
	// Dial opens a session-era connection to the upstream (bridged where
	// the upstream speaks only the stateless era). Its ctx carries the
	// tenant (pool.TenantOf).
	Dial pool.Dial
	// Allow and Deny are path.Match patterns over the tool names the
	// upstream gives: a tool is listed and callable when it matches one of
	// Allow (or Allow is empty) and none of Deny.
	Allow, Deny []string
	// ConnectTimeout bounds connecting and the handshake (default 10 s);
	// CallTimeout a request's answer (0: no bound but the client's).
	ConnectTimeout, CallTimeout time.Duration
	// Learn, when set, is given each tools/list page the upstream
	// answers the gateway, and Knows says whether a tool was learned: a
	// call to a tool not learned yet lists the upstream's tools first
	// (its x-mcp-header bindings make a stateless call's headers).
	Learn func(result []byte)
	Knows func(tool string) bool
	// Version tells configurations apart: Update reconnects an upstream
	// whose Version changed and keeps one whose Version is the same.
	Version string
}

func (s *Spec) connectTimeout() time.Duration {
	if s.ConnectTimeout > 0 {
		return s.ConnectTimeout
	}
	return 10 * time.Second
}

// Options configure a Registry.
type Options struct {
	// Prefix is PrefixAlways, PrefixNever or PrefixCollision; "" is
	// PrefixAlways with two upstreams or more and PrefixNever with one.
	Prefix string
	// Separator joins an upstream's name and a tool's (CheckSeparator);
	// default "_".
	Separator string
	// Authorize is the call decision, asked before a tools/call,
	// prompts/get or resources/read reaches its upstream and for each tool
	// of a tools/list; nil allows everything. It must not block for long.
	Authorize func(ctx context.Context, in decision.CallInput) decision.Call
	// Drain is how long a removed upstream's calls may go on; default 30 s.
	Drain  time.Duration
	Logger *slog.Logger
}

// Registry is the set of configured upstreams, and the Dial of Conns over
// them. Create it with NewRegistry; safe for concurrent use.
type Registry struct {
	o   Options
	log *slog.Logger

	mu     sync.Mutex
	specs  []Spec
	conns  map[*Conn]struct{}
	health map[string]*Health
	// owners are the names the Conns' clients were given, for ServerOf;
	// bounded as each Conn's own table is.
	owners map[string]target
}

// Health is what the Registry knows of one upstream from its Conns: as a
// value (Status), safe to keep.
type Health struct {
	Name string `json:"name"`
	// Up is how many connections to it are running, Down how many are not
	// (waiting to be restarted).
	Up   int `json:"up"`
	Down int `json:"down"`
	// LastError is why the last connection that failed did, if one did.
	LastError string    `json:"lastError,omitempty"`
	LastOK    time.Time `json:"lastOk,omitzero"`
}

// NewRegistry checks specs and options and returns a Registry over specs.
func NewRegistry(o Options, specs []Spec) (*Registry, error) {
	if o.Separator == "" {
		o.Separator = "_"
	}
	if err := CheckSeparator(o.Separator); err != nil {
		return nil, err
	}
	switch o.Prefix {
	case "", PrefixAlways, PrefixNever, PrefixCollision:
	default:
		return nil, fmt.Errorf("prefix %q: want %s, %s or %s", o.Prefix, PrefixAlways, PrefixNever, PrefixCollision)
	}
	if o.Drain <= 0 {
		o.Drain = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Registry{o: o, log: o.Logger, conns: map[*Conn]struct{}{}, health: map[string]*Health{}, owners: map[string]target{}}
	if err := r.Update(specs); err != nil {
		return nil, err
	}
	return r, nil
}

// ErrNoUpstreams is returned by NewRegistry and Update for an empty list.
var ErrNoUpstreams = errors.New("gateway: no upstreams configured")

// Update replaces the configured upstreams with specs, checked first (a
// refused list changes nothing). Every live Conn follows: it connects an
// added upstream, reconnects one whose Version changed, drains and closes
// a removed one, and tells its client the lists changed.
func (r *Registry) Update(specs []Spec) error {
	if len(specs) == 0 {
		return ErrNoUpstreams
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if err := CheckName(s.Name); err != nil {
			return err
		}
		if seen[s.Name] {
			return fmt.Errorf("gateway: upstream %q is configured twice", s.Name)
		}
		seen[s.Name] = true
		if s.Dial == nil {
			return fmt.Errorf("gateway: upstream %q has nothing to connect to", s.Name)
		}
		if err := CheckGlobs(append(slices.Clone(s.Allow), s.Deny...)); err != nil {
			return fmt.Errorf("gateway: upstream %q: %w", s.Name, err)
		}
	}
	r.mu.Lock()
	r.specs = slices.Clone(specs)
	for name := range r.health {
		if !seen[name] {
			delete(r.health, name)
		}
	}
	conns := make([]*Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.reconfigure(specs)
	}
	return nil
}

// Specs returns the configured upstreams.
func (r *Registry) Specs() []Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.specs)
}

// prefixMode is the Prefix in force for n upstreams.
func (r *Registry) prefixMode(n int) string {
	if r.o.Prefix != "" {
		return r.o.Prefix
	}
	if n > 1 {
		return PrefixAlways
	}
	return PrefixNever
}

// Dial returns a new Conn over the configured upstreams for the tenant
// ctx carries (pool.TenantOf). It connects nothing before its client's
// initialize.
func (r *Registry) Dial(ctx context.Context) (mux.Conn, error) {
	c := newConn(r, pool.TenantOf(ctx))
	r.mu.Lock()
	r.conns[c] = struct{}{}
	specs := slices.Clone(r.specs)
	r.mu.Unlock()
	c.reconfigure(specs)
	return c, nil
}

func (r *Registry) forget(c *Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// Status reports each configured upstream's health across the live Conns,
// in configuration order.
func (r *Registry) Status() []Health {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Health, 0, len(r.specs))
	counts := map[string]*Health{}
	for _, s := range r.specs {
		h := Health{Name: s.Name}
		if old := r.health[s.Name]; old != nil {
			h.LastError, h.LastOK = old.LastError, old.LastOK
		}
		out = append(out, h)
		counts[s.Name] = &out[len(out)-1]
	}
	for c := range r.conns {
		for name, up := range c.upStates() {
			if h := counts[name]; h != nil {
				if up {
					h.Up++
				} else {
					h.Down++
				}
			}
		}
	}
	return out
}

// noteHealth records an upstream connection's outcome: err nil for one
// that came up.
func (r *Registry) noteHealth(name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.health[name]
	if h == nil {
		h = &Health{Name: name}
		r.health[name] = h
	}
	if err == nil {
		h.LastOK = time.Now()
		return
	}
	h.LastError = err.Error()
}

// ServerOf returns the upstream of a tool, prompt or resource URI (kind
// "tool", "prompt", "resource") by the name a client was given, and the
// upstream's own name for it: by its prefix, or as a Conn last listed it.
// ok is false when no upstream is known to have it.
func (r *Registry) ServerOf(kind, name string) (upstream, orig string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, found := r.owners[kind+"\x00"+name]; found {
		return t.upstream, t.name, true
	}
	names := make([]string, len(r.specs))
	for i, s := range r.specs {
		names[i] = s.Name
	}
	if len(names) == 1 {
		return names[0], name, true
	}
	if r.prefixMode(len(names)) == PrefixNever {
		return "", "", false
	}
	if kind == kindResource {
		return splitURI(names, name)
	}
	return splitPrefixed(names, r.o.Separator, name)
}

// noteName records that a client was given name for t.
func (r *Registry) noteName(kind, name string, t target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.owners) >= maxNames {
		r.owners = map[string]target{}
	}
	r.owners[kind+"\x00"+name] = t
}
