package relay

import (
	"container/list"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
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
	calls    queue      // oldest first (entry.inTenant)
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
	order  queue // oldest first (entry.inSession)
	gone   bool  // forgotten: its calls are no longer remembered
	// revision is what the session's initialize settled ("" until it is
	// answered): it judges a POST that does not name its own.
	revision string
}

// entry is one remembered call: only what rewriting its response needs.
// It is its own element in both its queues (one allocation per call, not
// three: a session remembers up to Options.MaxCalls of them).
type entry struct {
	sess      *session
	key       string
	call      ownmethods.Call // trimmed (see trim)
	size      int
	inTenant  links
	inSession links
}

// links are an entry's neighbours in one queue.
type links struct{ prev, next *entry }

// queue is a doubly linked list of entries through one of their links:
// in order of arrival, any one removed in constant time. Its zero value
// is empty; set at.
type queue struct {
	front, back *entry
	n           int
	at          func(*entry) *links // which links the queue goes through
}

func inTenant(e *entry) *links  { return &e.inTenant }
func inSession(e *entry) *links { return &e.inSession }

// pushBack adds e, which is in no queue of q's kind, at the back.
func (q *queue) pushBack(e *entry) {
	*q.at(e) = links{prev: q.back}
	if q.back != nil {
		q.at(q.back).next = e
	} else {
		q.front = e
	}
	q.back = e
	q.n++
}

// remove takes e, which is in q, out of q.
func (q *queue) remove(e *entry) {
	l := q.at(e)
	if l.prev != nil {
		q.at(l.prev).next = l.next
	} else {
		q.front = l.next
	}
	if l.next != nil {
		q.at(l.next).prev = l.prev
	} else {
		q.back = l.prev
	}
	*l = links{}
	q.n--
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

// negotiated is the revision s's initialize settled, "" until known.
func (rl *Relay) negotiated(s *session) string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return s.revision
}

// settle records the revision the initialize that created sid settled.
func (rl *Relay) settle(sid, revision string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if s := rl.sessions[sid]; s != nil {
		s.revision = revision
	}
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
		t = &tenantState{name: tenant, sessions: list.New(), calls: queue{at: inTenant}}
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
	s := &session{id: sid, tenant: t, used: rl.now(), calls: map[string]*entry{}, order: queue{at: inSession}}
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
	for en := s.order.front; en != nil; en = en.inSession.next {
		s.tenant.calls.remove(en)
		s.tenant.bytes -= en.size
	}
	s.calls, s.order = nil, queue{at: inSession}
	s.tenant.sessions.Remove(s.elem)
	if rl.sessions[s.id] == s {
		delete(rl.sessions, s.id)
	}
	if s.tenant.sessions.Len() == 0 && rl.tenants[s.tenant.name] == s.tenant {
		delete(rl.tenants, s.tenant.name)
	}
	rl.ended = append(rl.ended, s.id)
}

// remember records the proxy's calls among a POST's requests in its
// session, for responses that arrive on another stream (or again,
// replayed after Last-Event-ID).
func (rl *Relay) remember(s *session, reqs map[string]owed) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if s.gone {
		return
	}
	t := s.tenant
	for k, o := range reqs {
		c := o.call
		if c == nil {
			continue
		}
		if old := s.calls[k]; old != nil {
			rl.drop(old)
		}
		en := &entry{sess: s, key: k, call: trim(c)}
		en.size = callSize(k, &en.call)
		t.calls.pushBack(en)
		s.order.pushBack(en)
		s.calls[k] = en
		t.bytes += en.size
	}
	for s.order.n > rl.o.MaxCalls {
		rl.drop(s.order.front)
	}
	for t.bytes > rl.o.MaxTenantCallBytes && t.calls.n > 0 {
		rl.drop(t.calls.front)
	}
}

// drop forgets one call. rl.mu is held.
func (rl *Relay) drop(en *entry) {
	s := en.sess
	s.tenant.calls.remove(en)
	s.order.remove(en)
	s.tenant.bytes -= en.size
	delete(s.calls, en.key)
}

// call returns the call a response answers (key: jsonrpc.Key of its id). It stays remembered once
// its response passed: an upstream replays that response to a client
// that resumes with Last-Event-ID, and the replay is rewritten (offloaded)
// as the first delivery was.
func (rl *Relay) call(s *session, key string) *ownmethods.Call {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if en := s.calls[key]; en != nil {
		return &en.call
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
func trim(c *ownmethods.Call) ownmethods.Call {
	t := *c
	t.Request.Header = nil
	if c.Method == "resources/list" && c.Request.Header != nil {
		t.Request.Header = c.Request.Header.Clone()
		for _, k := range []string{"Authorization", "Cookie", "Proxy-Authorization"} {
			t.Request.Header.Del(k)
		}
	}
	return t
}

// callSize approximates the bytes an entry holds.
func callSize(key string, c *ownmethods.Call) int {
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
