package relay

import (
	"container/list"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/owned"
)

// The relay's memory of upstream sessions. Its attacker is any client:
// every session it opens and every call it abandons (the response never
// passes) would otherwise be kept for good. So, per tenant: at most
// Options.MaxSessions sessions (past it the tenant's own least recently
// used one is forgotten, never another tenant's), at most
// Options.MaxCalls calls per session and Options.MaxTenantCallBytes of
// calls across its sessions (the oldest forgotten first), and a session
// idle for Options.SessionIdle with no request open is forgotten. A
// forgotten session's client gets 404 and starts a new one, as the
// protocol has it; a forgotten call's response passes unrewritten when
// it comes on another stream than its POST.
//
// Every field below is guarded by Relay.mu.

// tenantState is what one tenant holds.
type tenantState struct {
	name     string
	sessions *list.List // of *session, least recently used first
	calls    *list.List // of *entry, oldest first
	bytes    int        // the size of calls
}

// session is what the relay knows of one upstream session.
type session struct {
	id     string
	tenant *tenantState
	elem   *list.Element // in tenant.sessions
	used   time.Time     // when a request last began or ended
	open   int           // requests in flight (an open GET stream among them)
	calls  map[string]*entry
	order  *list.List // of *entry, oldest first
	gone   bool       // forgotten: its calls are no longer remembered
}

// entry is one remembered call: only what rewriting its response needs.
type entry struct {
	sess         *session
	key          string
	call         *owned.Call
	size         int
	inTenant     *list.Element
	inSessionLRU *list.Element
}

// lookup returns sid's session if it belongs to tenant and is live, and
// counts a request open in it until release. nil otherwise.
func (rl *Relay) lookup(sid, tenant string) *session {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	s := rl.sessions[sid]
	if s == nil || s.tenant.name != tenant {
		return nil
	}
	now := rl.now()
	if s.open == 0 && now.Sub(s.used) > rl.o.SessionIdle {
		rl.forget(s)
		return nil
	}
	s.used = now
	s.open++
	s.tenant.sessions.MoveToBack(s.elem)
	return s
}

// release ends a request lookup counted.
func (rl *Relay) release(s *session) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	s.open--
	s.used = rl.now()
}

// bind records that tenant created the upstream session sid, making room
// as the bounds say (see above).
func (rl *Relay) bind(sid, tenant string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.sweep()
	if old := rl.sessions[sid]; old != nil {
		rl.forget(old) // an upstream that reuses an id: the new binding wins
	}
	t := rl.tenants[tenant]
	if t == nil {
		t = &tenantState{name: tenant, sessions: list.New(), calls: list.New()}
		rl.tenants[tenant] = t
	}
	if t.sessions.Len() >= rl.o.MaxSessions {
		rl.forget(t.sessions.Front().Value.(*session))
	}
	if len(rl.sessions) >= rl.maxTotal {
		// Every tenant under its own cap, and still too many: the tenant
		// holding the most gives up its least recently used.
		var big *tenantState
		for _, o := range rl.tenants {
			if big == nil || o.sessions.Len() > big.sessions.Len() {
				big = o
			}
		}
		rl.forget(big.sessions.Front().Value.(*session))
	}
	s := &session{id: sid, tenant: t, used: rl.now(), calls: map[string]*entry{}, order: list.New()}
	s.elem = t.sessions.PushBack(s)
	rl.sessions[sid] = s
	if rl.tenants[tenant] == nil { // forget dropped t, emptied to make room
		rl.tenants[tenant] = t
	}
}

// sweep forgets the sessions idle past SessionIdle. Each tenant's list
// is in order of use, so only the expired ones and one more are looked
// at per tenant (sessions with a request open are skipped, not waited
// for).
func (rl *Relay) sweep() {
	now := rl.now()
	for _, t := range rl.tenants {
		for e := t.sessions.Front(); e != nil; {
			s := e.Value.(*session)
			e = e.Next()
			if now.Sub(s.used) <= rl.o.SessionIdle {
				break
			}
			if s.open == 0 {
				rl.forget(s)
			}
		}
	}
}

// forgetSession forgets sid (the client ended it with DELETE).
func (rl *Relay) forgetSession(sid string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if s := rl.sessions[sid]; s != nil {
		rl.forget(s)
	}
}

// forget drops s and its calls. rl.mu is held.
func (rl *Relay) forget(s *session) {
	if s.gone {
		return
	}
	s.gone = true
	for e := s.order.Front(); e != nil; e = e.Next() {
		en := e.Value.(*entry)
		s.tenant.calls.Remove(en.inTenant)
		s.tenant.bytes -= en.size
	}
	s.calls, s.order = nil, list.New()
	s.tenant.sessions.Remove(s.elem)
	if rl.sessions[s.id] == s {
		delete(rl.sessions, s.id)
	}
	if s.tenant.sessions.Len() == 0 && rl.tenants[s.tenant.name] == s.tenant {
		delete(rl.tenants, s.tenant.name)
	}
	rl.ended = append(rl.ended, s.id)
}

// remember records a POST's calls in its session, for responses that
// arrive on another stream (or again, replayed after Last-Event-ID).
func (rl *Relay) remember(s *session, calls map[string]*owned.Call) {
	if len(calls) == 0 {
		return
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if s.gone {
		return
	}
	t := s.tenant
	for k, c := range calls {
		if old := s.calls[k]; old != nil {
			rl.drop(old)
		}
		c = trim(c)
		en := &entry{sess: s, key: k, call: c, size: callSize(k, c)}
		en.inTenant = t.calls.PushBack(en)
		en.inSessionLRU = s.order.PushBack(en)
		s.calls[k] = en
		t.bytes += en.size
	}
	for s.order.Len() > rl.o.MaxCalls {
		rl.drop(s.order.Front().Value.(*entry))
	}
	for t.bytes > rl.o.MaxTenantCallBytes && t.calls.Len() > 0 {
		rl.drop(t.calls.Front().Value.(*entry))
	}
}

// drop forgets one call. rl.mu is held.
func (rl *Relay) drop(en *entry) {
	s := en.sess
	s.tenant.calls.Remove(en.inTenant)
	s.order.Remove(en.inSessionLRU)
	s.tenant.bytes -= en.size
	delete(s.calls, en.key)
}

// call returns the call a response answers (key: jsonrpc.Key of its id). It stays remembered once
// its response passed: an upstream replays that response to a client
// that resumes with Last-Event-ID, and the replay is rewritten (offloaded)
// as the first delivery was.
func (rl *Relay) call(s *session, key string) *owned.Call {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if en := s.calls[key]; en != nil {
		return en.call
	}
	return nil
}

// endedSessions returns, and clears, the sessions forgotten since the
// last call, for Methods.Ended (called without rl.mu).
func (rl *Relay) endedSessions() []string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	e := rl.ended
	rl.ended = nil
	return e
}

// trim is what a session keeps of c: the client's headers only where a
// response's rewriting reads them (resources/list asks the access rule,
// which may look at them), never the credentials among them.
func trim(c *owned.Call) *owned.Call {
	t := *c
	t.Request.Header = nil
	if c.Method == "resources/list" && c.Request.Header != nil {
		t.Request.Header = c.Request.Header.Clone()
		for _, k := range []string{"Authorization", "Cookie", "Proxy-Authorization"} {
			t.Request.Header.Del(k)
		}
	}
	return &t
}

// callSize approximates the bytes an entry holds.
func callSize(key string, c *owned.Call) int {
	n := 256 + len(key) + len(c.Method) + len(c.Tool) + len(c.URI) + len(c.Request.Tenant) +
		len(c.Request.Session) + len(c.Request.Version)
	for k, vs := range c.Request.Header {
		n += len(k) + 16
		for _, v := range vs {
			n += len(v) + 16
		}
	}
	return n
}
