package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/spillway-dev/spillway/artifact/token"
)

// Revocation of single links, by token id, keyed by artifact. A revocation
// is stored with the artifacts (Store.Revoke) under the artifact it was made
// for, so every replica sharing the store sees it, and a revocation made
// under artifact A is only ever looked at by fetches of A: whatever one
// tenant records can neither refuse another tenant's links nor slow their
// fetches. A fetch reads the fetched artifact's revocations only, and each
// replica keeps them in memory briefly, so that no link is checked against
// a list older than RevocationMaxAge.
const (
	// RevocationMaxAge is the bound, on every replica, between Revoke
	// returning anywhere and the link being refused: a link is never
	// checked against its artifact's revocations read from the store
	// longer ago than this. When none fresh can be read, the artifact's
	// links (and only its) are refused with ErrUnavailable rather than
	// checked against a stale list.
	RevocationMaxAge = 4 * time.Second
	// DefaultMaxRevocationsPerArtifact and DefaultMaxRevocationsPerTenant
	// bound the revocations recorded at once, unless the Service says
	// otherwise. Past them Revoke answers ErrRevocationLimit: delete the
	// artifact instead, which refuses every link to it.
	DefaultMaxRevocationsPerArtifact = 100
	DefaultMaxRevocationsPerTenant   = 1000

	// revocationRefresh is the age from which a fetch starts a reading in
	// the background, so that a busy artifact rarely waits for one.
	revocationRefresh = 2 * time.Second
	// revocationTimeout bounds one reading of an artifact's revocations.
	revocationTimeout = 10 * time.Second
	// revocationLists is how many artifacts' revocations a replica holds.
	revocationLists = 4096
	// revocationFullFor is how long a tenant found at its bound is refused
	// without counting again (a token it revoked already included): a
	// tenant hammering Revoke past its bound costs the store nothing more.
	// Its room comes back at most this late once revocations expire or go
	// with their artifact.
	revocationFullFor = 2 * time.Second
)

// Revocation is one refused link: the token TokenID, for artifact Artifact
// of Tenant, until Expires.
type Revocation struct {
	Tenant   string    // the artifact's tenant; "" when inbound auth is off
	Artifact string    // the artifact id (ValidID)
	TokenID  string    // the link's token id (token.ValidID)
	Expires  time.Time // whole seconds; never after the artifact's expiry
}

// revocations is a replica's copy of the revocations of the artifacts it
// serves, read per artifact. The zero value is empty. mu guards lists and
// every revokedList in it.
type revocations struct {
	// turnsMu guards turns: tenant → its Revoke turn, present while a
	// Revoke of that tenant runs or waits. A tenant's Revokes run one at a
	// time (count, then record: its bounds hold here exactly); no lock is
	// held across store I/O that another tenant's Revoke waits on.
	turnsMu sync.Mutex
	turns   map[string]*turn

	mu    sync.Mutex
	lists *simplelru.LRU[string, *revokedList] // artifact id → its revocations
	full  *simplelru.LRU[string, time.Time]    // tenant at its bound → until when to believe it
}

// turn lets one Revoke of a tenant run at a time. It is a slot in a
// channel rather than a mutex, so that a caller waiting for it stops
// waiting when its context ends.
type turn struct {
	slot  chan struct{}
	users int // holders and waiters; guarded by turnsMu
}

// take waits for tenant's turn, or ctx's end. Call the returned function
// once done.
func (r *revocations) take(ctx context.Context, tenant string) (done func(), err error) {
	r.turnsMu.Lock()
	if r.turns == nil {
		r.turns = map[string]*turn{}
	}
	t := r.turns[tenant]
	if t == nil {
		t = &turn{slot: make(chan struct{}, 1)}
		r.turns[tenant] = t
	}
	t.users++
	r.turnsMu.Unlock()
	release := func() {
		r.turnsMu.Lock()
		if t.users--; t.users == 0 {
			delete(r.turns, tenant) // the map holds only tenants revoking now
		}
		r.turnsMu.Unlock()
	}
	select {
	case t.slot <- struct{}{}:
		return func() { <-t.slot; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// recorded reports whether tokenID is known here to be revoked for
// artifact id at now: read from the store, or recorded through this
// replica (only durable records are held).
func (r *revocations) recorded(m *Metrics, id, tokenID string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.list(m, id)
	until, ok := l.tokens[tokenID]
	return ok && now.Before(until)
}

// hold notes tokenID as revoked for artifact id until expires.
func (r *revocations) hold(m *Metrics, id, tokenID string, expires time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.list(m, id)
	until, had := l.tokens[tokenID]
	if !had {
		m.revocationsHeld(1)
	}
	if expires.After(until) {
		l.tokens[tokenID] = expires
	}
}

// revokedList is one artifact's revocations as last read from the store,
// plus those made here since.
type revokedList struct {
	tokens  map[string]time.Time // token id → until when it is refused
	readAt  time.Time            // start of the last reading; zero: never read
	loading chan struct{}        // closed when the running reading ends; nil when none runs
	err     error                // of the last reading
}

// list returns id's entry, created empty if absent. r.mu must be held.
func (r *revocations) list(m *Metrics, id string) *revokedList {
	if r.lists == nil {
		r.lists, _ = simplelru.NewLRU(revocationLists, func(_ string, l *revokedList) {
			m.revocationsHeld(-len(l.tokens))
		})
	}
	l, ok := r.lists.Get(id)
	if !ok {
		l = &revokedList{tokens: map[string]time.Time{}}
		r.lists.Add(id, l)
	}
	return l
}

// Revoke refuses the link token tokenID of artifact id, which tenant must
// own (Owned: another tenant's artifact is ErrNotFound), on every replica
// sharing the store: at once on this one, within RevocationMaxAge on the
// others. The revocation concerns that artifact's links only, and lasts
// until the artifact expires: no link outlives its artifact. Revoking an
// id twice, or an id that no link of the artifact has, is not an error;
// revoking one already recorded writes nothing. It returns ErrInvalid for
// a malformed token id, ErrRevocationLimit when the artifact or the
// tenant has as many revocations as allowed, ctx's error when it ends
// while another Revoke of the tenant runs, and the store's error when the
// revocation could not be recorded durably (then it is not in force
// anywhere, this replica included). A tenant's Revokes on one replica run
// one at a time, so that its bounds hold here exactly (two replicas
// revoking at the same instant may each pass a bound by one); those of
// different tenants never wait for each other.
func (s *Service) Revoke(ctx context.Context, tenant, id, tokenID string) error {
	if !token.ValidID(tokenID) {
		return fmt.Errorf("revoke: token id: %w", ErrInvalid)
	}
	a, err := s.Owned(ctx, id, tenant)
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	now := s.now()
	expires := a.Expires
	if expires.IsZero() {
		expires = now.Add(s.maxTTL())
	}
	// Whole seconds, rounded up: the record never ends before a link.
	if t := expires.Truncate(time.Second); !t.Equal(expires) {
		expires = t.Add(time.Second)
	}
	r := &s.revoked
	if r.recorded(s.Metrics, a.ID, tokenID, now) {
		// Recorded already (the link it names was minted before that
		// record, so the record outlives it): nothing to write.
		return nil
	}
	done, err := r.take(ctx, a.Tenant)
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	defer done()
	recorded, err := s.revocationRoom(ctx, a, tokenID, now)
	if err != nil {
		return err
	}
	if !recorded.IsZero() {
		r.hold(s.Metrics, a.ID, tokenID, recorded) // read from the store: nothing to write
		return nil
	}
	rev := Revocation{Tenant: a.Tenant, Artifact: a.ID, TokenID: tokenID, Expires: expires}
	start := time.Now()
	err = s.Store.Revoke(ctx, rev)
	s.Metrics.storeOp("revoke", start, err)
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	r.hold(s.Metrics, a.ID, tokenID, expires)
	return nil
}

// errEnough stops a count that has reached its bound.
var errEnough = errors.New("enough")

// revocationRoom returns nil when tokenID may be recorded for a: with
// recorded, the latest expiry of its live records, when the store holds
// it already (nothing is to be written), or else when neither a nor its
// tenant is at its bound. The caller holds a's tenant's turn.
func (s *Service) revocationRoom(ctx context.Context, a Artifact, tokenID string, now time.Time) (recorded time.Time, _ error) {
	perArtifact := cmpOr(s.MaxRevocationsPerArtifact, DefaultMaxRevocationsPerArtifact)
	perTenant := cmpOr(s.MaxRevocationsPerTenant, DefaultMaxRevocationsPerTenant)
	// A tenant found at its bound a moment ago costs the store nothing.
	if s.revoked.fullUntil(a.Tenant, time.Time{}) {
		s.Metrics.revocationRefused()
		return time.Time{}, fmt.Errorf("revoke: the tenant has %d revoked links, the most allowed: %w", perTenant, ErrRevocationLimit)
	}
	// All of the artifact's: they are few, and a token revoked again must
	// be found even at the bound.
	n, again, recorded, err := s.countRevocations(ctx, a, a.ID, tokenID, now, 0)
	switch {
	case err != nil:
		return time.Time{}, fmt.Errorf("revoke: count: %w", err)
	case again:
		return recorded, nil // recorded already: no new record counts
	case n >= perArtifact:
		s.Metrics.revocationRefused()
		return time.Time{}, fmt.Errorf("revoke: artifact %s has %d revoked links, the most allowed: %w", a.ID, n, ErrRevocationLimit)
	}
	if n, _, _, err = s.countRevocations(ctx, a, "", tokenID, now, perTenant); err != nil {
		return time.Time{}, fmt.Errorf("revoke: count: %w", err)
	}
	if n >= perTenant {
		s.revoked.fullUntil(a.Tenant, time.Now().Add(revocationFullFor))
		s.Metrics.revocationRefused()
		return time.Time{}, fmt.Errorf("revoke: the tenant has %d revoked links, the most allowed: %w", n, ErrRevocationLimit)
	}
	return time.Time{}, nil
}

// countRevocations counts the distinct live revocations of a's tenant
// recorded under artifactID ("": all of the tenant's), up to limit (0: all
// of them). again reports that tokenID is among a's, and recorded is then
// the latest expiry of its records.
func (s *Service) countRevocations(ctx context.Context, a Artifact, artifactID, tokenID string, now time.Time, limit int) (n int, again bool, recorded time.Time, err error) {
	seen := map[string]bool{}
	start := time.Now()
	defer func() { s.Metrics.storeOp("revocations", start, err) }()
	err = s.Store.Revocations(ctx, a.Tenant, artifactID, now, func(r Revocation) error {
		if r.Artifact == a.ID && r.TokenID == tokenID {
			again = true
			if r.Expires.After(recorded) {
				recorded = r.Expires
			}
		}
		seen[r.Artifact+"/"+r.TokenID] = true
		if limit > 0 && len(seen) >= limit {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return len(seen), again, recorded, err
}

// fullUntil reports whether tenant was found at its bound a moment ago;
// with a non-zero until, it records that it is, until then.
func (r *revocations) fullUntil(tenant string, until time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full == nil {
		r.full, _ = simplelru.NewLRU[string, time.Time](revocationLists, nil)
	}
	if !until.IsZero() {
		r.full.Add(tenant, until)
		return true
	}
	t, ok := r.full.Get(tenant)
	return ok && time.Now().Before(t)
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// checkRevoked returns ErrLinkRefused when tokenID is revoked for artifact
// a, nil when it is not, and ErrUnavailable when a's revocations cannot be
// had younger than RevocationMaxAge.
func (s *Service) checkRevoked(ctx context.Context, a Artifact, tokenID string) error {
	r := &s.revoked
	r.mu.Lock()
	l := r.list(s.Metrics, a.ID)
	r.mu.Unlock()
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		age := time.Since(l.readAt)
		if l.readAt.IsZero() {
			age = RevocationMaxAge
		}
		if age >= revocationRefresh && l.loading == nil {
			l.loading = make(chan struct{})
			go s.readRevocations(a, l)
		}
		if age < RevocationMaxAge {
			until, ok := l.tokens[tokenID]
			r.mu.Unlock()
			if ok && s.now().Before(until) {
				return fmt.Errorf("token %s: %w: %w", tokenID, errRevoked, ErrLinkRefused)
			}
			return nil
		}
		wait, lastErr := l.loading, l.err
		r.mu.Unlock()
		if attempt > 0 {
			return fmt.Errorf("revocations of %s older than %v: %w: %w", a.ID, RevocationMaxAge, ErrUnavailable, lastErr)
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// readRevocations reads a's revocations from the store into l, then closes
// l.loading. It runs detached from any one request, bounded by
// revocationTimeout. More records than an artifact can hold (its bound,
// passed by at most a few racing replicas) fail the reading: the
// artifact's own links are refused, nobody else's.
func (s *Service) readRevocations(a Artifact, l *revokedList) {
	ctx, cancel := context.WithTimeout(context.Background(), revocationTimeout)
	defer cancel()
	ceiling := 2*cmpOr(s.MaxRevocationsPerArtifact, DefaultMaxRevocationsPerArtifact) + 16
	start := time.Now()
	now := s.now()
	ids := map[string]time.Time{}
	err := s.Store.Revocations(ctx, a.Tenant, a.ID, now, func(rv Revocation) error {
		if rv.Artifact != a.ID {
			return nil
		}
		if rv.Expires.After(ids[rv.TokenID]) {
			ids[rv.TokenID] = rv.Expires
		}
		if len(ids) > ceiling {
			return fmt.Errorf("artifact %s has over %d revocations: %w", a.ID, ceiling, ErrUnavailable)
		}
		return nil
	})
	s.Metrics.revocationRead(time.Since(start), err)
	s.Metrics.storeOp("revocations", start, err)
	r := &s.revoked
	r.mu.Lock()
	defer r.mu.Unlock()
	close(l.loading)
	l.loading, l.err = nil, err
	if err != nil {
		return
	}
	// Revocations are never undone, so what this replica already holds
	// stays: one made here while the reading ran may be missing from it.
	before := len(l.tokens)
	for id, until := range l.tokens {
		if !now.Before(until) {
			delete(l.tokens, id)
		} else if until.After(ids[id]) {
			ids[id] = until
		}
	}
	for id, until := range ids {
		l.tokens[id] = until
	}
	s.Metrics.revocationsHeld(len(l.tokens) - before)
	l.readAt = start
}

// RevocationPath is where a store records the revocations of tenant's
// artifact id, relative to its revocation root, with "/" separators: the
// tenant as 32 hex digits of its SHA-256 (any tenant name becomes one safe
// path element of fixed length, and one listing counts a tenant's), then
// the id. With id "" it is the tenant's whole part.
func RevocationPath(tenant, id string) string {
	h := sha256.Sum256([]byte(tenant))
	p := hex.EncodeToString(h[:16])
	if id != "" {
		p += "/" + id
	}
	return p
}

// ParseRevocationPath reads a record's path below a tenant's part
// (RevocationPath(tenant, "")): "ID/" + RevocationKey. ok is false for
// anything RevocationPath and RevocationKey cannot have produced.
func ParseRevocationPath(tenant, rel string) (r Revocation, ok bool) {
	id, name, found := strings.Cut(rel, "/")
	if !found || !ValidID(id) {
		return Revocation{}, false
	}
	tokenID, exp, ok := ParseRevocationKey(name)
	if !ok {
		return Revocation{}, false
	}
	return Revocation{Tenant: tenant, Artifact: id, TokenID: tokenID, Expires: exp}, true
}

// RevocationKey is the name under which a store records a revocation: the
// expiry in Unix seconds, a dash, and the token id in hex. The name carries
// the whole record, so listing names is enough to read the list, and hex
// is safe as an object key and on case-insensitive file systems.
func RevocationKey(tokenID string, expires time.Time) string {
	return strconv.FormatInt(expires.Unix(), 10) + "-" + hex.EncodeToString([]byte(tokenID))
}

// ParseRevocationKey is RevocationKey's inverse. ok is false for any name
// RevocationKey cannot have produced from a valid token id and a positive
// expiry.
func ParseRevocationKey(name string) (tokenID string, expires time.Time, ok bool) {
	secs, hx, found := strings.Cut(name, "-")
	if !found || secs == "" || len(secs) > 12 || secs[0] == '0' {
		return "", time.Time{}, false
	}
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || n <= 0 {
		return "", time.Time{}, false
	}
	b, err := hex.DecodeString(hx)
	if err != nil || hex.EncodeToString(b) != hx || !token.ValidID(string(b)) {
		return "", time.Time{}, false
	}
	return string(b), time.Unix(n, 0), true
}
