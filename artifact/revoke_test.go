package artifact

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

// revokeStore is memStore with its Revoke calls counted, and held while
// hold names the revoking tenant: a store write that hangs.
type revokeStore struct {
	*memStore
	hold    string        // tenant whose Revoke waits for release
	entered chan struct{} // closed when that Revoke has started
	release chan struct{}

	mu     sync.Mutex
	writes int
}

func (s *revokeStore) Revoke(ctx context.Context, r Revocation) error {
	s.mu.Lock()
	s.writes++
	s.mu.Unlock()
	if s.hold != "" && r.Tenant == s.hold {
		close(s.entered)
		<-s.release
	}
	return s.memStore.Revoke(ctx, r)
}

func (s *revokeStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// publishFor stores a small artifact of tenant through svc and mints a
// link to it.
func publishFor(t *testing.T, svc *Service, tenant string) (Artifact, Link) {
	t.Helper()
	a, l, err := svc.Publish(context.Background(), Artifact{Tenant: tenant, MimeType: "text/plain"},
		bytes.NewReader([]byte("bytes of "+tenant)), LinkOptions{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	return a, l
}

// A revoke whose store write hangs holds up its own tenant at most: another
// tenant's revoke is recorded meanwhile. (One lock held across the store's
// I/O made every tenant's revocations queue behind the slowest.)
func TestRevokeOfOneTenantDoesNotWaitForAnother(t *testing.T) {
	f := newFixture(t)
	st := &revokeStore{memStore: f.store, hold: "slow", entered: make(chan struct{}), release: make(chan struct{})}
	f.svc.Store = st
	slowA, slowL := publishFor(t, f.svc, "slow")
	a, l := publishFor(t, f.svc, "quick")

	slowDone := make(chan error, 1)
	go func() { slowDone <- f.svc.Revoke(context.Background(), "slow", slowA.ID, slowL.TokenID) }()
	<-st.entered // the slow tenant's write is in the store, and stays there
	quickDone := make(chan error, 1)
	go func() { quickDone <- f.svc.Revoke(context.Background(), "quick", a.ID, l.TokenID) }()
	const never = 10 * time.Second
	select {
	case err := <-quickDone:
		if err != nil {
			t.Fatalf("quick tenant's revoke: %v", err)
		}
	case <-time.After(never):
		close(st.release)
		<-slowDone
		t.Fatalf("quick tenant's revoke never returned (%v) while another tenant's store write hung", never)
	}
	close(st.release)
	if err := <-slowDone; err != nil {
		t.Fatalf("slow tenant's revoke: %v", err)
	}
	wantRefused(t, l, slowL)
}

// wantRefused checks that each link is refused.
func wantRefused(t *testing.T, links ...Link) {
	t.Helper()
	for _, l := range links {
		if resp, _ := get(t, "GET", l.URL, nil); resp.StatusCode != 403 {
			t.Errorf("revoked link %s answers %d", l.TokenID, resp.StatusCode)
		}
	}
}

// Revoking a token id already recorded writes nothing more: on the replica
// that recorded it, and on another that shares the store and finds the
// record there. The link stays refused on both.
func TestRevokeAgainWritesNothing(t *testing.T) {
	f := newFixture(t)
	st := &revokeStore{memStore: f.store}
	f.svc.Store = st
	a, l := publishFor(t, f.svc, "acme")
	for range 3 {
		if err := f.svc.Revoke(context.Background(), "acme", a.ID, l.TokenID); err != nil {
			t.Fatal(err)
		}
	}
	replica := &Service{Store: st, Signer: f.svc.Signer, PublicURL: f.svc.PublicURL, Fetch: f.pol, Cache: NewCache(CacheOptions{})}
	if err := replica.Revoke(context.Background(), "acme", a.ID, l.TokenID); err != nil {
		t.Fatal(err)
	}
	if n := st.count(); n != 1 {
		t.Errorf("four revokes of one token id made %d store writes, want 1", n)
	}
	wantRefused(t, l)
	// A new token id is written, once.
	other, err := f.svc.Link(context.Background(), a, LinkOptions{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := replica.Revoke(context.Background(), "acme", a.ID, other.TokenID); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.count(); n != 2 {
		t.Errorf("after a second token id revoked twice: %d store writes, want 2", n)
	}
}
