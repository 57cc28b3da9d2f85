package session

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrNotFound is returned for a session id that does not exist for the
// caller: unknown, closed, or another tenant's (the same answer, so that a
// session id reveals nothing to another tenant).
var ErrNotFound = errors.New("session not found")

// ErrFull is returned by Create when the table is at its cap and the
// tenant has no idle session of its own to give up.
var ErrFull = errors.New("too many sessions")

// Table holds the live sessions and closes the idle ones. Create it with
// NewTable, which starts a goroutine that Close stops; the zero value is
// not usable. It is safe for concurrent use.
type Table struct {
	max  int
	idle time.Duration
	lim  Limits

	mu       sync.Mutex
	byID     map[string]*Session
	starting int // Create calls that reserved a slot and have not finished
	stop     chan struct{}
	once     sync.Once
}

// NewTable returns a table of at most max sessions (64 when max <= 0). A
// session unused for idle (10 minutes when idle <= 0) is closed. lim's
// zero fields take their defaults.
func NewTable(max int, idle time.Duration, lim Limits) *Table {
	if max <= 0 {
		max = 64
	}
	if idle <= 0 {
		idle = 10 * time.Minute
	}
	t := &Table{max: max, idle: idle, lim: lim.withDefaults(), byID: map[string]*Session{}, stop: make(chan struct{})}
	go t.reap()
	return t
}

// Create makes a session for tenant and runs start on it before any other
// caller can find it (start opens the session's upstream). When start
// fails, Create closes the session, releases its slot and returns start's
// error. The slot is reserved before start runs, so concurrent Creates
// cannot pass the cap. At the cap, the tenant's own least recently used
// session is closed to make room; another tenant's never is, and when the
// tenant has none Create returns ErrFull.
func (t *Table) Create(ctx context.Context, tenant string, start func(*Session) error) (*Session, error) {
	t.mu.Lock()
	var victim *Session
	if len(t.byID)+t.starting >= t.max {
		for _, s := range t.byID {
			if s.Tenant == tenant && (victim == nil || s.idleFor(time.Now()) > victim.idleFor(time.Now())) {
				victim = s
			}
		}
		if victim == nil {
			t.mu.Unlock()
			return nil, ErrFull
		}
		delete(t.byID, victim.ID)
	}
	t.starting++
	t.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
	s := newSession(tenant, t.lim)
	err := start(s)
	t.mu.Lock()
	t.starting--
	if err == nil {
		t.byID[s.ID] = s
	}
	t.mu.Unlock()
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Get returns the open session id of tenant. It returns ErrNotFound when
// id is unknown, closed or another tenant's.
func (t *Table) Get(id, tenant string) (*Session, error) {
	t.mu.Lock()
	s := t.byID[id]
	t.mu.Unlock()
	if s == nil || s.Tenant != tenant || s.Closed() {
		return nil, ErrNotFound
	}
	return s, nil
}

// Delete closes tenant's session id and removes it from the table. It
// returns ErrNotFound when id is unknown or another tenant's.
func (t *Table) Delete(id, tenant string) error {
	t.mu.Lock()
	s := t.byID[id]
	if s == nil || s.Tenant != tenant {
		t.mu.Unlock()
		return ErrNotFound
	}
	delete(t.byID, id)
	t.mu.Unlock()
	s.Close()
	return nil
}

// Remove takes s out of the table and closes it, for a session that ended
// on its own (its upstream died).
func (t *Table) Remove(s *Session) {
	t.mu.Lock()
	if t.byID[s.ID] == s {
		delete(t.byID, s.ID)
	}
	t.mu.Unlock()
	s.Close()
}

// Len returns the number of sessions in the table.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// Close closes every session and stops the goroutine that closes idle
// ones. It is safe to call more than once.
func (t *Table) Close() {
	t.once.Do(func() { close(t.stop) })
	t.mu.Lock()
	all := t.byID
	t.byID = map[string]*Session{}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() { defer wg.Done(); s.Close() }()
	}
	wg.Wait()
}

// reap runs until Close: it prunes every session's old events and closes
// the sessions idle for longer than t.idle.
func (t *Table) reap() {
	tick := time.NewTicker(min(time.Minute, t.lim.Window/2))
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		t.mu.Lock()
		var idle []*Session
		for id, s := range t.byID {
			// An error response for a response pruned unread lives as
			// long as an idle session does: past that, its client would
			// find the session gone anyway.
			s.prune(now, t.lim.Window+t.idle)
			if s.idleFor(now) > t.idle {
				delete(t.byID, id)
				idle = append(idle, s)
			}
		}
		t.mu.Unlock()
		for _, s := range idle {
			s.Close()
		}
	}
}
