// Package era knows which protocol eras an upstream MCP server speaks:
// the session era (initialize, then a session: 2025-06-18, 2025-11-25)
// and the stateless era (server/discover, then per-request _meta:
// 2026-07-28 and later). The proxy forwards a request as it is when the
// upstream speaks the request's era, and bridges it when it does not.
//
// An upstream's eras are learned by Probe (server/discover first,
// falling back to initialize) on a connection of their own, or
// configured (Fixed), and kept by a Cache, which learns again after a
// failure (Forget). Everything here is safe for concurrent use.
package era

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
)

// Revisions the proxy speaks to an upstream of each era.
const (
	// Stateless is the stateless-era revision asked for in server/discover.
	Stateless = mcpheader.FirstStateless
	// Session is the session-era revision asked for in initialize; the
	// server answers with the one it speaks.
	Session = "2025-11-25"
)

// Eras is what one upstream speaks, as learned by Probe. The zero value
// knows nothing: it speaks neither era.
type Eras struct {
	// Versions are the revisions the upstream named: server/discover's
	// supportedVersions, and the protocolVersion initialize answered.
	Versions []string
	// Discover is the upstream's server/discover result; nil when it
	// answered none.
	Discover json.RawMessage
	// Initialize is the upstream's initialize result, asked for only when
	// server/discover failed; nil otherwise.
	Initialize json.RawMessage
}

// Stateless reports whether the upstream speaks a stateless-era revision.
func (e Eras) Stateless() bool { return slices.ContainsFunc(e.Versions, mcpheader.Stateless) }

// Session reports whether the upstream speaks a session-era revision.
func (e Eras) Session() bool {
	return slices.ContainsFunc(e.Versions, func(v string) bool { return !mcpheader.Stateless(v) })
}

// Speaks reports whether a request of revision v reaches the upstream
// without bridging: the upstream speaks v's era. An unknown revision
// ("" included) is the session era's.
func (e Eras) Speaks(v string) bool {
	if mcpheader.Stateless(v) {
		return e.Stateless()
	}
	return e.Session()
}

// Ask sends one request to the upstream and returns its answer (a
// response: a result or a JSON-RPC error). err is for a request that got
// no answer at all (the upstream unreachable, ctx done).
type Ask func(ctx context.Context, req *jsonrpc.Message) (*jsonrpc.Message, error)

// ErrUnknown is returned by Probe when the upstream answers neither
// server/discover nor initialize with a result.
var ErrUnknown = errors.New("era: the upstream answers neither server/discover nor initialize")

// DiscoverWait bounds Probe's server/discover: some session-era servers
// never answer a request before initialize (over stdio, silence is their
// way of saying they do not know it).
const DiscoverWait = 5 * time.Second

// discoverRequest and initializeRequest are the probe's requests, with
// the proxy's own ids and nothing promised: no client capabilities.
var (
	discoverRequest = jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":"spillway-discover","method":"server/discover","params":{"_meta":{` +
		`"` + jsonrpc.MetaProtocolVersion + `":"` + Stateless + `","` + jsonrpc.MetaClientCapabilities + `":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"spillway","version":"1"}}}}`)
	initializeRequest = jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":"spillway-probe","method":"initialize","params":{"protocolVersion":"` +
		Session + `","capabilities":{},"clientInfo":{"name":"spillway","version":"1"}}}`)
)

// Probe learns what the upstream behind ask speaks: server/discover
// first; when it fails (an error, or no answer within DiscoverWait),
// initialize. Use a connection of its own: after Probe the upstream may
// hold a session the caller must close. It fails with ErrUnknown when
// neither has a result, or with ask's error.
func Probe(ctx context.Context, ask Ask) (Eras, error) {
	dctx, cancel := context.WithTimeout(ctx, DiscoverWait)
	r, err := ask(dctx, discoverRequest)
	cancel()
	if err == nil && r.Error == nil && r.Result != nil {
		var d struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if json.Unmarshal(r.Result, &d) == nil && len(d.SupportedVersions) > 0 {
			return Eras{Versions: d.SupportedVersions, Discover: r.Result}, nil
		}
	}
	if ctx.Err() != nil {
		return Eras{}, ctx.Err()
	}
	r, err = ask(ctx, initializeRequest)
	if err != nil {
		return Eras{}, fmt.Errorf("era: initialize: %w", err)
	}
	if r.Error != nil || r.Result == nil {
		return Eras{}, fmt.Errorf("%w (initialize: %s)", ErrUnknown, r.Error)
	}
	v := jsonrpc.StringMember(r.Result, "protocolVersion")
	if v == "" {
		return Eras{}, fmt.Errorf("%w (initialize has no protocolVersion)", ErrUnknown)
	}
	return Eras{Versions: []string{v}, Initialize: r.Result}, nil
}

// Cache keeps one upstream's eras: learned once by its probe and shared
// by every caller, learned again after Forget. A failed probe is not
// kept, but the next one waits RetryAfter, so that a down upstream is
// not probed once per request. Create it with NewCache or Fixed; safe
// for concurrent use.
type Cache struct {
	probe      func(ctx context.Context) (Eras, error)
	fixed      bool
	retryAfter time.Duration

	mu      sync.Mutex
	known   *Eras
	flight  chan struct{} // closed when the probe running ends
	lastErr error
	errAt   time.Time
}

// RetryAfter is how long a failed probe's error is answered before the
// upstream is probed again (a probe of a stdio upstream starts a process).
const RetryAfter = 10 * time.Second

// NewCache returns a cache that learns with probe (typically Probe on a
// fresh connection).
func NewCache(probe func(ctx context.Context) (Eras, error)) *Cache {
	return &Cache{probe: probe, retryAfter: RetryAfter}
}

// Fixed returns a cache that knows e and never probes (the eras are
// configured); Forget does nothing to it.
func Fixed(e Eras) *Cache { return &Cache{known: &e, fixed: true} }

// Get returns the upstream's eras, probing when they are not known. One
// probe runs at a time; callers meanwhile wait for it (or for ctx). The
// probe runs on its own context (bounded by a minute): a caller that
// leaves does not fail the others.
func (c *Cache) Get(ctx context.Context) (Eras, error) {
	for {
		c.mu.Lock()
		if c.known != nil {
			e := *c.known
			c.mu.Unlock()
			return e, nil
		}
		if c.lastErr != nil && time.Since(c.errAt) < c.retryAfter {
			err := c.lastErr
			c.mu.Unlock()
			return Eras{}, err
		}
		if c.flight == nil {
			c.flight = make(chan struct{})
			go c.run(c.flight)
		}
		wait := c.flight
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return Eras{}, ctx.Err()
		}
	}
}

func (c *Cache) run(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := c.probe(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.lastErr, c.errAt = fmt.Errorf("learning the upstream's protocol era: %w", err), time.Now()
	} else {
		c.known, c.lastErr = &e, nil
	}
	c.flight = nil
	close(done)
}

// Known returns the eras if they are known, without probing.
func (c *Cache) Known() (Eras, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known == nil {
		return Eras{}, false
	}
	return *c.known, true
}

// Forget drops what the cache knows (a request failed in a way that says
// the upstream changed: it was redeployed, upgraded); the next Get
// probes again.
func (c *Cache) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fixed {
		c.known = nil
	}
}
