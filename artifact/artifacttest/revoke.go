package artifacttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// RunRevocations runs the revocation rules of the artifact service on a
// store, through its fetch endpoint on loopback: a revoked link is refused
// (403, 410 once expired) and the artifact's other links live; a tenant
// cannot revoke another tenant's link, by naming its token id under an
// artifact of its own or under the other's; and a tenant that revokes
// 10,000 times is stopped at its bound, while every other link still
// answers 200. newStore must return an empty store that lives until its
// test ends. The flood runs with bounds of 200 per tenant and 20 per
// artifact, so that it takes seconds on a real S3 service too.
func RunRevocations(t *testing.T, newStore func(t *testing.T) artifact.Store) {
	t.Run("Refused", func(t *testing.T) { testRevokedRefused(t, newStore(t)) })
	t.Run("CrossTenant", func(t *testing.T) { testCrossTenantRevoke(t, newStore(t)) })
	t.Run("Flood", func(t *testing.T) { testRevocationFlood(t, newStore(t)) })
}

// publish stores body for tenant and mints a link to it.
func publish(t *testing.T, svc *artifact.Service, tenant, body string) (artifact.Artifact, artifact.Link) {
	t.Helper()
	a, l, err := svc.Publish(context.Background(), artifact.Artifact{Tenant: tenant, MimeType: "text/plain"},
		strings.NewReader(body), artifact.LinkOptions{Tenant: tenant, TTL: 10 * time.Minute})
	if err != nil {
		t.Fatalf("publish for %q: %v", tenant, err)
	}
	return a, l
}

// status fetches a link with method and returns the status and body.
func status(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func wantStatus(t *testing.T, what, method, url string, want int) {
	t.Helper()
	if got, body := status(t, method, url); got != want {
		t.Fatalf("%s: %s = %d %s, want %d", what, method, got, body, want)
	}
}

func testRevokedRefused(t *testing.T, store artifact.Store) {
	svc, _ := Serve(t, store, Options{})
	now := time.Now()
	svc.Now = func() time.Time { return now } // set before first use; moved only below
	a, l := publish(t, svc, "alice", "bytes")
	other, err := svc.Link(context.Background(), a, artifact.LinkOptions{Tenant: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "before revoke", "GET", l.URL, 200)
	if err := svc.Revoke(context.Background(), "alice", a.ID, l.TokenID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Revoke(context.Background(), "alice", a.ID, l.TokenID); err != nil {
		t.Fatalf("revoking again: %v", err)
	}
	wantStatus(t, "revoked link", "GET", l.URL, 403)
	wantStatus(t, "revoked link", "HEAD", l.URL, 403)
	wantStatus(t, "another link to the artifact", "GET", other.URL, 200)
	if _, body := status(t, "GET", l.URL); !strings.Contains(body, `"forbidden"`) {
		t.Fatalf("revoked link answered %s, want the code every bad token gets", body)
	}
	now = now.Add(11 * time.Minute) // past the link's expiry
	wantStatus(t, "revoked link once expired", "GET", l.URL, 410)
}

func testCrossTenantRevoke(t *testing.T, store artifact.Store) {
	svc, _ := Serve(t, store, Options{})
	ctx := context.Background()
	a, l := publish(t, svc, "alice", "alice's")
	b, _ := publish(t, svc, "bob", "bob's")
	// Bob names Alice's token id under his own artifact: recorded there,
	// it concerns his artifact's links only.
	if err := svc.Revoke(ctx, "bob", b.ID, l.TokenID); err != nil {
		t.Fatalf("bob revokes a token id under his artifact: %v", err)
	}
	// Under Alice's artifact: not his, not found.
	if err := svc.Revoke(ctx, "bob", a.ID, l.TokenID); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("bob revokes under alice's artifact: %v, want ErrNotFound", err)
	}
	wantStatus(t, "alice's link after bob's revocations", "GET", l.URL, 200)
	if err := svc.Revoke(ctx, "alice", a.ID, l.TokenID); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "alice's link revoked by alice", "GET", l.URL, 403)
}

// floodAttempts is how many revocations the flooding tenant asks for.
const floodAttempts = 10_000

// testRevocationFlood checks that a tenant revoking floodAttempts times
// is held to its bounds (perTenant in all, perArtifact per artifact)
// while another tenant's link, and the flooder's own unrevoked one, keep
// answering 200, and that the metrics count what was recorded and refused.
func testRevocationFlood(t *testing.T, store artifact.Store) {
	svc, _ := Serve(t, store, Options{Cache: artifact.NewCache(artifact.CacheOptions{})})
	svc.Metrics = &artifact.Metrics{}
	const perTenant, perArtifact = 200, 20
	svc.MaxRevocationsPerTenant, svc.MaxRevocationsPerArtifact = perTenant, perArtifact
	ctx := context.Background()
	_, victim := publish(t, svc, "alice", "alice's")
	// Mallory spreads her revocations over more artifacts than her bound
	// needs, so that the tenant's bound is the one that holds.
	arts := make([]artifact.Artifact, perTenant/perArtifact+5)
	for i := range arts {
		arts[i], _ = publish(t, svc, "mallory", "mallory's")
	}
	_, own := publish(t, svc, "mallory", "mallory's own, never revoked")
	accepted, perArt := flood(t, svc, arts, victim)
	if accepted != perTenant {
		t.Errorf("mallory recorded %d revocations of %d asked, want her bound %d", accepted, floodAttempts, perTenant)
	}
	for id, n := range perArt {
		if n > perArtifact {
			t.Errorf("artifact %s got %d revocations, bound %d", id, n, perArtifact)
		}
	}
	stored := 0
	if err := store.Revocations(ctx, "mallory", "", time.Now(), func(artifact.Revocation) error { stored++; return nil }); err != nil {
		t.Fatal(err)
	}
	if stored != perTenant {
		t.Errorf("the store holds %d of mallory's revocations, want %d", stored, perTenant)
	}
	wantStatus(t, "alice's link after the flood", "GET", victim.URL, 200)
	wantStatus(t, "mallory's unrevoked link after the flood", "GET", own.URL, 200)
	checkRevocationMetrics(t, svc, accepted)
}

// flood has mallory revoke floodAttempts token ids, spread over arts,
// checking now and then that victim's link still answers 200. It returns
// how many revocations were recorded, in all and per artifact; any error
// but ErrRevocationLimit fails the test.
func flood(t *testing.T, svc *artifact.Service, arts []artifact.Artifact, victim artifact.Link) (accepted int, perArt map[string]int) {
	t.Helper()
	perArt = map[string]int{}
	for i := range floodAttempts {
		a := arts[i%len(arts)]
		err := svc.Revoke(context.Background(), "mallory", a.ID, fmt.Sprintf("tok%05d", i))
		switch {
		case err == nil:
			accepted++
			perArt[a.ID]++
		case !errors.Is(err, artifact.ErrRevocationLimit):
			t.Fatalf("revocation %d: %v, want nil or ErrRevocationLimit", i, err)
		}
		if i%2000 == 0 {
			wantStatus(t, fmt.Sprintf("alice's link after %d of mallory's revocations", i), "GET", victim.URL, 200)
		}
	}
	return accepted, perArt
}

// checkRevocationMetrics checks that the metrics name the revocation
// series and count the accepted revocations and the refused rest of the
// flood.
func checkRevocationMetrics(t *testing.T, svc *artifact.Service, accepted int) {
	t.Helper()
	var m bytes.Buffer
	svc.Metrics.WritePrometheus(&m)
	for _, name := range []string{"spillway_revocation_entries", "spillway_revocation_read_seconds_count",
		"spillway_revocation_read_failures_total 0", "spillway_revocation_limit_total"} {
		if !strings.Contains(m.String(), name) {
			t.Errorf("/metrics lacks %q:\n%s", name, m.String())
		}
	}
	for _, want := range []string{
		fmt.Sprintf("spillway_revocation_limit_total %d", floodAttempts-accepted),
		fmt.Sprintf("spillway_revocation_entries %d", accepted),
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
