package artifact

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact/token"
)

// Revocation of single links, by token id. A revocation is stored with the
// artifacts (Store.Revoke), so every replica sharing the store sees it; each
// replica keeps the list in memory and reads it again from the store while
// it serves links, so that no link is checked against a list older than
// RevocationMaxAge.
const (
	// RevocationMaxAge is the bound, on every replica, between Revoke
	// returning anywhere and the link being refused: a link is never
	// checked against a list read from the store longer ago than this. When
	// no fresh list can be read, links are refused with ErrUnavailable
	// rather than checked against a stale one.
	RevocationMaxAge = 4 * time.Second
	// revocationRefresh is the age from which a fetch starts a reading in
	// the background, so that a busy replica rarely waits for one.
	revocationRefresh = 2 * time.Second
	// revocationTimeout bounds one reading of the list.
	revocationTimeout = 10 * time.Second
)

// revocations is a replica's copy of the revocation list. The zero value is
// an empty list never read.
type revocations struct {
	mu      sync.Mutex
	ids     map[string]time.Time // token id → until when it is refused
	readAt  time.Time            // start of the reading ids came from; zero: never read
	local   map[string]time.Time // revoked here: token id → when, kept until a reading after that has seen it
	loading chan struct{}        // closed when the running reading ends; nil when none runs
	err     error                // of the last reading
}

// Revoke refuses the link token tokenID from now until expires, on every
// replica sharing the store: at once on this one, within RevocationMaxAge
// on the others. A zero expires, or one past the longest link lifetime
// (MaxTTL), means MaxTTL from now: no link outlives that, so the record can
// go. An expiry already past is a no-op. It returns ErrInvalid for a
// malformed token id and the store's error when the revocation could not
// be recorded durably (then it is not in force anywhere, this replica
// included).
func (s *Service) Revoke(ctx context.Context, tokenID string, expires time.Time) error {
	if !token.ValidID(tokenID) {
		return fmt.Errorf("revoke: token id: %w", ErrInvalid)
	}
	now := s.now()
	if limit := now.Add(s.maxTTL()); expires.IsZero() || expires.After(limit) {
		expires = limit
	}
	// Whole seconds, rounded up: the record never ends before the token.
	if t := expires.Truncate(time.Second); !t.Equal(expires) {
		expires = t.Add(time.Second)
	}
	if !expires.After(now) {
		return nil
	}
	if err := s.Store.Revoke(ctx, tokenID, expires); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	r := &s.revoked
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = map[string]time.Time{}
	}
	if r.local == nil {
		r.local = map[string]time.Time{}
	}
	if expires.After(r.ids[tokenID]) {
		r.ids[tokenID] = expires
	}
	r.local[tokenID] = time.Now()
	return nil
}

// checkRevoked returns ErrLinkRefused when tokenID is revoked, nil when it
// is not, and ErrUnavailable when no list younger than RevocationMaxAge
// can be had.
func (s *Service) checkRevoked(ctx context.Context, tokenID string) error {
	r := &s.revoked
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		age := time.Since(r.readAt)
		if r.readAt.IsZero() {
			age = RevocationMaxAge
		}
		if age >= revocationRefresh && r.loading == nil {
			r.loading = make(chan struct{})
			go s.readRevocations(r.loading)
		}
		if age < RevocationMaxAge {
			until, ok := r.ids[tokenID]
			r.mu.Unlock()
			if ok && s.now().Before(until) {
				return fmt.Errorf("token %s: %w", tokenID, ErrLinkRefused)
			}
			return nil
		}
		wait, lastErr := r.loading, r.err
		r.mu.Unlock()
		if attempt > 0 {
			return fmt.Errorf("revocation list older than %v: %w: %w", RevocationMaxAge, ErrUnavailable, lastErr)
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// readRevocations reads the list from the store and installs it, then
// closes done. It runs detached from any one request, bounded by
// revocationTimeout.
func (s *Service) readRevocations(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), revocationTimeout)
	defer cancel()
	start := time.Now()
	ids := map[string]time.Time{}
	err := s.Store.Revocations(ctx, s.now(), func(id string, until time.Time) error {
		if until.After(ids[id]) {
			ids[id] = until
		}
		return nil
	})
	r := &s.revoked
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loading, r.err = nil, err
	close(done)
	if err != nil {
		return
	}
	// Revocations made here after the reading started may be missing from
	// it: carry them over until a later reading has them.
	for id, at := range r.local {
		if at.Before(start) {
			delete(r.local, id)
			continue
		}
		if until := r.ids[id]; until.After(ids[id]) {
			ids[id] = until
		}
	}
	r.ids, r.readAt = ids, start
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
