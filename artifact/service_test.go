package artifact

import (
	"bytes"
	"context"
	"errors"
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
