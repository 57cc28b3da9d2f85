package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// revocations lists tenant's revocations (of artifact id, or all when "")
// at now: the latest expiry per "artifact/token".
func revocations(t *testing.T, s artifact.Store, tenant, id string, now time.Time) map[string]time.Time {
	t.Helper()
	got := map[string]time.Time{}
	err := s.Revocations(t.Context(), tenant, id, now, func(r artifact.Revocation) error {
		if r.Tenant != tenant || (id != "" && r.Artifact != id) {
			t.Errorf("Revocations(%q, %q) reported %+v", tenant, id, r)
		}
		k := r.Artifact[:1] + "/" + r.TokenID
		if r.Expires.After(got[k]) {
			got[k] = r.Expires
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Revocations(%q, %q): %v", tenant, id, err)
	}
	return got
}

// testRevocations checks that revocations are stored by tenant, artifact
// and token id with whole-second expiries; that the later expiry wins;
// that expired ones are not reported and are removed by SweepRevocations
// only; that ids and tenants are case-sensitive; that one tenant's listing
// never shows another's; and that revocations and artifacts never see
// each other. Its steps run in this order on one store: each expects what
// the ones before it left.
func testRevocations(t *testing.T, s artifact.Store) {
	now := time.Now().Truncate(time.Second)
	if got := revocations(t, s, "t1", "", now); len(got) != 0 {
		t.Fatalf("new store has revocations %v", got)
	}
	f := &revocationFixture{t: t, s: s, now: now,
		idA: strings.Repeat("a", 32), idB: strings.Repeat("b", 32), idC: strings.Repeat("c", 32)}
	f.recordAndList()
	f.sweepAndDelete()
	f.apartFromArtifacts()
	f.failures()
}

// revocationFixture is what the steps of testRevocations share: the
// store, the time they count from, and three artifact ids.
type revocationFixture struct {
	t             *testing.T
	s             artifact.Store
	now           time.Time
	idA, idB, idC string
}

// revoke records a revocation, failing the test if the store refuses it.
func (f *revocationFixture) revoke(tenant, id, tok string, exp time.Time) {
	f.t.Helper()
	r := artifact.Revocation{Tenant: tenant, Artifact: id, TokenID: tok, Expires: exp}
	if err := f.s.Revoke(f.t.Context(), r); err != nil {
		f.t.Fatalf("Revoke(%+v): %v", r, err)
	}
}

// check compares tenant's revocations (of id, or all when "") at at with
// want, keyed as revocations keys them.
func (f *revocationFixture) check(tenant, id string, at time.Time, want map[string]time.Time) {
	f.t.Helper()
	if got := revocations(f.t, f.s, tenant, id, at); !maps.EqualFunc(got, want, time.Time.Equal) {
		f.t.Errorf("Revocations(%q, %q, now%+v) = %v\nwant %v", tenant, id, at.Sub(f.now), got, want)
	}
}

// recordAndList records revocations (a later expiry wins, ids and tenants
// are case-sensitive), refuses malformed ones, and lists them by tenant
// and artifact, leaving out the expired.
func (f *revocationFixture) recordAndList() {
	t, ctx, now, idA, idB, idC := f.t, f.t.Context(), f.now, f.idA, f.idB, f.idC
	f.revoke("t1", idA, "abc", now.Add(time.Hour))
	f.revoke("t1", idA, "abc", now.Add(2*time.Hour)) // the later expiry wins
	f.revoke("t1", idA, "abc", now.Add(time.Hour))   // and an earlier one again changes nothing
	f.revoke("t1", idA, "ABC", now.Add(time.Minute)) // another id
	f.revoke("t1", idB, "x-y_Z09", now.Add(time.Minute))
	f.revoke("t1", idA, "gone", now.Add(-time.Second))
	f.revoke("T1", idA, "abc", now.Add(time.Hour)) // another tenant
	f.revoke("", idC, "abc", now.Add(time.Hour))   // the tenant-less one
	for _, bad := range []string{"", "a/b", "../x", "a b", "é", string(make([]byte, 65))} {
		r := artifact.Revocation{Tenant: "t1", Artifact: idA, TokenID: bad, Expires: now.Add(time.Hour)}
		if err := f.s.Revoke(ctx, r); !errors.Is(err, artifact.ErrInvalid) {
			t.Errorf("Revoke(token %q) = %v, want ErrInvalid", bad, err)
		}
	}
	for _, bad := range []string{"", "../" + idA[3:], strings.ToUpper(idA)} {
		r := artifact.Revocation{Tenant: "t1", Artifact: bad, TokenID: "abc", Expires: now.Add(time.Hour)}
		if err := f.s.Revoke(ctx, r); !errors.Is(err, artifact.ErrInvalid) {
			t.Errorf("Revoke(artifact %q) = %v, want ErrInvalid", bad, err)
		}
	}
	f.check("t1", idA, now, map[string]time.Time{"a/abc": now.Add(2 * time.Hour), "a/ABC": now.Add(time.Minute)})
	f.check("t1", "", now, map[string]time.Time{"a/abc": now.Add(2 * time.Hour), "a/ABC": now.Add(time.Minute), "b/x-y_Z09": now.Add(time.Minute)})
	f.check("t1", idC, now, map[string]time.Time{})
	f.check("T1", "", now, map[string]time.Time{"a/abc": now.Add(time.Hour)})
	f.check("", "", now, map[string]time.Time{"c/abc": now.Add(time.Hour)})
	f.check("t1", "", now.Add(90*time.Minute), map[string]time.Time{"a/abc": now.Add(2 * time.Hour)})
}

// sweepAndDelete checks that sweeping removes what has expired, of every
// tenant, and nothing else, and that deleting an artifact's revocations
// leaves every other's.
func (f *revocationFixture) sweepAndDelete() {
	t, ctx, s, now, idA, idB := f.t, f.t.Context(), f.s, f.now, f.idA, f.idB
	if n, err := s.SweepRevocations(ctx, now); err != nil || n != 1 {
		t.Errorf("SweepRevocations(now) = %d, %v; want 1 (gone)", n, err)
	}
	if n, err := s.SweepRevocations(ctx, now.Add(90*time.Minute)); err != nil || n != 5 {
		t.Errorf("SweepRevocations(now+90m) = %d, %v; want 5", n, err)
	}
	f.check("t1", "", now, map[string]time.Time{"a/abc": now.Add(2 * time.Hour)})
	f.check("T1", "", now, map[string]time.Time{})
	// A revocation after a sweep emptied its place is recorded.
	f.revoke("T1", idA, "again", now.Add(time.Hour))
	f.check("T1", idA, now, map[string]time.Time{"a/again": now.Add(time.Hour)})

	f.revoke("t1", idB, "b1", now.Add(time.Hour))
	if err := s.DeleteRevocations(ctx, "t1", idA); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRevocations(ctx, "t1", idA); err != nil {
		t.Errorf("DeleteRevocations again: %v", err)
	}
	f.check("t1", "", now, map[string]time.Time{"b/b1": now.Add(time.Hour)})
	f.check("T1", "", now, map[string]time.Time{"a/again": now.Add(time.Hour)})
}

// apartFromArtifacts checks that artifacts and revocations do not mix:
// ListExpired sees the one expired artifact and none of the revocations.
func (f *revocationFixture) apartFromArtifacts() {
	t, s, now := f.t, f.s, f.now
	meta := newMeta()
	meta.Expires = now.Add(-time.Hour)
	a := mustPut(t, s, meta, []byte("x"))
	var expired []string
	if err := s.ListExpired(t.Context(), now, func(id string) error { expired = append(expired, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(expired, []string{a.ID}) {
		t.Errorf("ListExpired with revocations stored = %v, want [%s]", expired, a.ID)
	}
}

// failures checks that a listing stops at its function's first error,
// and that every revocation call fails on a canceled context.
func (f *revocationFixture) failures() {
	t, ctx, s, now, idA, idB := f.t, f.t.Context(), f.s, f.now, f.idA, f.idB
	errStop := errors.New("stop")
	calls := 0
	if err := s.Revocations(ctx, "t1", "", now, func(artifact.Revocation) error { calls++; return errStop }); !errors.Is(err, errStop) || calls != 1 {
		t.Errorf("Revocations with failing fn: err = %v after %d calls, want errStop after 1", err, calls)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Revoke(cctx, artifact.Revocation{Tenant: "t1", Artifact: idA, TokenID: "abc", Expires: now.Add(time.Hour)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Revoke on a canceled context = %v", err)
	}
	if err := s.Revocations(cctx, "t1", "", now, func(artifact.Revocation) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Revocations on a canceled context = %v", err)
	}
	if _, err := s.SweepRevocations(cctx, now); !errors.Is(err, context.Canceled) {
		t.Errorf("SweepRevocations on a canceled context = %v", err)
	}
	if err := s.DeleteRevocations(cctx, "t1", idB); !errors.Is(err, context.Canceled) {
		t.Errorf("DeleteRevocations on a canceled context = %v", err)
	}
}
