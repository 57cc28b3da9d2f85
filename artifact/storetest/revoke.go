package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// revocations lists s's revocations at now: the latest expiry per id.
func revocations(t *testing.T, s artifact.Store, now time.Time) map[string]time.Time {
	t.Helper()
	got := map[string]time.Time{}
	err := s.Revocations(t.Context(), now, func(id string, exp time.Time) error {
		if exp.After(got[id]) {
			got[id] = exp
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Revocations: %v", err)
	}
	return got
}

// testRevocations: revocations are stored by id with whole-second expiries,
// the later expiry wins, expired ones are not reported, ids are
// case-sensitive, and revocations and artifacts never see each other.
func testRevocations(t *testing.T, s artifact.Store) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	if got := revocations(t, s, now); len(got) != 0 {
		t.Fatalf("new store has revocations %v", got)
	}
	revoke := func(id string, exp time.Time) {
		t.Helper()
		if err := s.Revoke(ctx, id, exp); err != nil {
			t.Fatalf("Revoke(%q): %v", id, err)
		}
	}
	revoke("abc", now.Add(time.Hour))
	revoke("abc", now.Add(2*time.Hour)) // the later expiry wins
	revoke("abc", now.Add(time.Hour))   // and an earlier one again changes nothing
	revoke("ABC", now.Add(time.Minute)) // another id
	revoke("x-y_Z09", now.Add(time.Minute))
	revoke("gone", now.Add(-time.Second))
	for _, bad := range []string{"", "a/b", "../x", "a b", "é", string(make([]byte, 65))} {
		if err := s.Revoke(ctx, bad, now.Add(time.Hour)); !errors.Is(err, artifact.ErrInvalid) {
			t.Errorf("Revoke(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	want := map[string]time.Time{"abc": now.Add(2 * time.Hour), "ABC": now.Add(time.Minute), "x-y_Z09": now.Add(time.Minute)}
	if got := revocations(t, s, now); !maps.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("Revocations(now) = %v\nwant %v", got, want)
	}
	if got := revocations(t, s, now.Add(90*time.Minute)); len(got) != 1 || !got["abc"].Equal(now.Add(2*time.Hour)) {
		t.Errorf("Revocations(now+90m) = %v, want abc only", got)
	}

	// Artifacts and revocations do not mix.
	meta := newMeta()
	meta.Expires = now.Add(-time.Hour)
	a := mustPut(t, s, meta, []byte("x"))
	var expired []string
	if err := s.ListExpired(ctx, now, func(id string) error { expired = append(expired, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(expired, []string{a.ID}) {
		t.Errorf("ListExpired with revocations stored = %v, want [%s]", expired, a.ID)
	}

	errStop := errors.New("stop")
	calls := 0
	if err := s.Revocations(ctx, now, func(string, time.Time) error { calls++; return errStop }); !errors.Is(err, errStop) || calls != 1 {
		t.Errorf("Revocations with failing fn: err = %v after %d calls, want errStop after 1", err, calls)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Revoke(cctx, "abc", now.Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Errorf("Revoke on a canceled context = %v", err)
	}
	if err := s.Revocations(cctx, now, func(string, time.Time) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Revocations on a canceled context = %v", err)
	}
}
