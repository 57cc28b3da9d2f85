package artifact

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy"
)

func TestSweepDeletesOnlyExpired(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old, _ := f.publish(t, []byte("old"), "text/plain", "", LinkOptions{TTL: time.Minute})
	fresh, _ := f.publish(t, []byte("fresh"), "text/plain", "", LinkOptions{TTL: time.Hour})
	f.now = f.now.Add(10 * time.Minute)
	n, err := f.svc.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 deleted", n, err)
	}
	if _, err := f.store.Stat(ctx, old.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired artifact still stored: %v", err)
	}
	if _, err := f.svc.Stat(ctx, fresh.ID); err != nil {
		t.Errorf("fresh artifact gone: %v", err)
	}
}

// The sweeper keeps an artifact, and its revocations, for the token
// leeway past its expiry: a replica whose clock runs that much behind the
// sweeper's still serves the artifact's links, and must find it (and find
// a revoked link still revoked).
func TestSweepLeavesClockSkewMargin(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, l := f.publish(t, []byte("x"), "text/plain", "", LinkOptions{TTL: time.Minute})
	if err := f.svc.Revoke(ctx, a.Tenant, a.ID, l.TokenID); err != nil {
		t.Fatal(err)
	}
	leeway := f.svc.Signer.Leeway
	if leeway <= time.Second {
		t.Fatalf("signer leeway %v: the test needs more than a second", leeway)
	}
	f.now = a.Expires.Add(leeway - time.Second)
	if n, err := f.svc.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep %v after expiry, within the leeway %v = %d, %v; want none deleted", f.now.Sub(a.Expires), leeway, n, err)
	}
	if _, err := f.store.Stat(ctx, a.ID); err != nil {
		t.Fatalf("artifact swept within the leeway: %v", err)
	}
	if len(f.store.revoked) != 1 {
		t.Fatalf("revocation swept within the leeway: %v", f.store.revoked)
	}
	f.now = a.Expires.Add(leeway)
	if n, err := f.svc.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep at the leeway = %d, %v; want 1", n, err)
	}
	if len(f.store.revoked) != 0 {
		t.Fatalf("revocation kept past the leeway: %v", f.store.revoked)
	}
}

func TestLinkNeverOutlivesArtifactAndTTLIsCapped(t *testing.T) {
	f := newFixture(t)
	f.svc.MaxTTL = time.Hour
	a, l := f.publish(t, []byte("x"), "text/plain", "", LinkOptions{TTL: 48 * time.Hour})
	if l.Expires.After(f.now.Add(time.Hour+time.Second)) || l.Expires.After(a.Expires) {
		t.Fatalf("link expires %v, artifact %v, now %v", l.Expires, a.Expires, f.now)
	}
	f.now = a.Expires.Add(time.Second)
	if _, err := f.svc.Link(context.Background(), a, LinkOptions{}); !errors.Is(err, ErrExpired) {
		t.Fatalf("link to expired artifact: %v", err)
	}
	if _, err := f.svc.Stat(context.Background(), a.ID); !errors.Is(err, ErrExpired) {
		t.Fatalf("Stat of expired artifact: %v", err)
	}
}

type mintPolicy struct {
	d   policy.MintDecision
	err error
}

func (m mintPolicy) Mint(context.Context, policy.MintInput) (policy.MintDecision, error) {
	return m.d, m.err
}

func TestMintDecision(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.svc.Mint = mintPolicy{d: policy.MintDecision{Allow: true, MaxTTLSeconds: 60, RequireCIDR: "10.0.0.0/8"}}
	_, l := f.publish(t, []byte("x"), "text/plain", "", LinkOptions{TTL: time.Hour})
	if l.Expires.After(f.now.Add(61 * time.Second)) {
		t.Errorf("policy cap ignored: expires %v", l.Expires)
	}
	if resp, _ := get(t, "GET", l.URL, nil); resp.StatusCode != 403 {
		t.Errorf("required CIDR not bound into the link: %d", resp.StatusCode)
	}
	f.svc.Mint = mintPolicy{d: policy.MintDecision{Reason: "no links on Sundays"}}
	_, _, err := f.svc.Publish(ctx, Artifact{MimeType: "text/plain"}, bytes.NewReader([]byte("y")), LinkOptions{})
	var de *DeniedError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "Sundays") {
		t.Fatalf("denied mint: %v", err)
	}
	f.store.mu.Lock()
	left := len(f.store.objs)
	f.store.mu.Unlock()
	if left != 1 {
		t.Errorf("a denied publish left its artifact behind: %d stored", left)
	}
	f.svc.Mint = mintPolicy{err: errors.New("eval failed")}
	if _, _, err := f.svc.Publish(ctx, Artifact{}, bytes.NewReader([]byte("z")), LinkOptions{}); err == nil {
		t.Fatal("mint evaluation error allowed a link")
	}
}

// A negative BlobBudget disables the blob cache: nothing is held, not even
// an empty artifact, and adding returns at once (it used to evict forever
// under the cache lock, since 0 bytes used is still over a budget of -1).
func TestCacheBlobsDisabled(t *testing.T) {
	c := NewCache(CacheOptions{BlobBudget: -1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, b := range [][]byte{{}, []byte("x")} {
			if c.wantsBlob(int64(len(b))) {
				t.Errorf("wantsBlob(%d) with the blob cache disabled", len(b))
			}
			c.addBlob(NewID(), b)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("addBlob did not return within 5s with BlobBudget -1")
	}
	if c.blobs.Len() != 0 || c.used != 0 {
		t.Fatalf("disabled cache holds %d blobs, %d bytes", c.blobs.Len(), c.used)
	}

	// Through the fetch endpoint: an empty artifact is served, promptly.
	f := newFixture(t)
	f.svc.Cache = c
	_, l := f.publish(t, nil, "text/plain", "empty.txt", LinkOptions{})
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(l.URL)
	if err != nil {
		t.Fatalf("fetch of an empty artifact with BlobBudget -1: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) != 0 {
		t.Fatalf("fetch = %d, %d bytes", resp.StatusCode, len(b))
	}
}

func TestCacheBudget(t *testing.T) {
	c := NewCache(CacheOptions{BlobBudget: 100, BlobMax: 60})
	c.addBlob("a", make([]byte, 60))
	c.addBlob("b", make([]byte, 60)) // evicts a
	c.addBlob("c", make([]byte, 61)) // too large to hold
	if _, ok := c.blob("a"); ok {
		t.Error("budget exceeded: a still cached")
	}
	if _, ok := c.blob("b"); !ok {
		t.Error("b not cached")
	}
	if _, ok := c.blob("c"); ok {
		t.Error("entry over BlobMax cached")
	}
	if c.used != 60 {
		t.Errorf("used = %d, want 60", c.used)
	}
	var nilCache *Cache
	nilCache.addBlob("x", []byte("x"))
	if _, ok := nilCache.meta("x"); ok {
		t.Error("nil cache returned something")
	}
}
