package artifact

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/token"
)

// A revoked token id is refused with the very answer a forged token gets,
// at once on the replica that revoked it; other links to the artifact live.
func TestRevokedLinkRefused(t *testing.T) {
	f := newFixture(t)
	a, l := f.publish(t, []byte("bytes"), "text/plain", "", LinkOptions{})
	other, err := f.svc.Link(context.Background(), a, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, "GET", l.URL, nil); resp.StatusCode != 200 {
		t.Fatalf("before revoke: %d", resp.StatusCode)
	}
	if err := f.svc.Revoke(context.Background(), a.Tenant, a.ID, l.TokenID); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, "GET", l.URL, nil)
	forged, fbody := get(t, "GET", l.URL[:len(l.URL)-2]+"AA", nil)
	if resp.StatusCode != 403 || forged.StatusCode != 403 || string(body) != string(fbody) {
		t.Fatalf("revoked = %d %s; forged = %d %s", resp.StatusCode, body, forged.StatusCode, fbody)
	}
	if resp, _ := get(t, "HEAD", l.URL, nil); resp.StatusCode != 403 {
		t.Fatalf("HEAD with revoked link = %d", resp.StatusCode)
	}
	if resp, _ := get(t, "GET", other.URL, nil); resp.StatusCode != 200 {
		t.Fatalf("another link to the same artifact = %d", resp.StatusCode)
	}
	if err := f.svc.Revoke(context.Background(), a.Tenant, a.ID, "not/an id"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Revoke(bad id) = %v", err)
	}
}

// Replicas share only the store: a revocation made through one is refused
// by the other within RevocationMaxAge, without any call between them.
func TestRevocationReachesOtherReplica(t *testing.T) {
	f := newFixture(t)
	_, l := f.publish(t, []byte("bytes"), "text/plain", "", LinkOptions{})
	u, _ := url.Parse(l.URL)
	c, err := f.svc.Signer.Verify(u.Query().Get("t"), u.Path[len("/a/"):], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := &Service{Store: f.store, Signer: f.svc.Signer, PublicURL: f.svc.PublicURL, Fetch: f.pol, Cache: NewCache(CacheOptions{})}
	in := Access{ID: c.Artifact, Tenant: c.Tenant, Via: ViaLink, Method: "GET", Token: &c}
	if _, _, err := b.Authorize(context.Background(), in); err != nil {
		t.Fatalf("replica B before revoke: %v", err) // B has read the (empty) list now
	}
	if err := f.svc.Revoke(context.Background(), c.Tenant, c.Artifact, c.ID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for {
		_, _, err := b.Authorize(context.Background(), in)
		if errors.Is(err, ErrLinkRefused) {
			break
		}
		if err != nil {
			t.Fatalf("replica B: %v", err)
		}
		if time.Since(revoked) > RevocationMaxAge+time.Second {
			t.Fatalf("replica B still serves a revoked link %v after Revoke (bound %v)", time.Since(revoked), RevocationMaxAge)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("revoked on A, refused on B after %v (bound %v)", time.Since(revoked).Round(time.Millisecond), RevocationMaxAge)
}

// A replica that cannot read an artifact's revocations refuses its links
// once its copy is older than RevocationMaxAge, rather than serve a
// revoked one.
func TestRevocationListUnreadableFailsClosed(t *testing.T) {
	f := newFixture(t)
	a, l := f.publish(t, []byte("bytes"), "text/plain", "", LinkOptions{})
	c := token.Claims{ID: l.TokenID, Artifact: a.ID, Method: token.MethodGet, Expires: l.Expires}
	in := Access{ID: a.ID, Via: ViaLink, Method: "GET", Token: &c}
	if _, _, err := f.svc.Authorize(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	f.store.mu.Lock()
	f.store.revDown = true
	f.store.mu.Unlock()
	time.Sleep(RevocationMaxAge)
	_, _, err := f.svc.Authorize(context.Background(), in)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "revocation") {
		t.Fatalf("stale revocation list: %v, want ErrUnavailable naming it", err)
	}
	if HTTPError(err).Status != http.StatusServiceUnavailable {
		t.Fatalf("answered %d", HTTPError(err).Status)
	}
}

func TestRevocationKeyRoundTrip(t *testing.T) {
	exp := time.Unix(1_800_000_000, 0)
	for _, id := range []string{"a", "AbC-_09", strings.Repeat("z", 64), token.NewID()} {
		gotID, gotExp, ok := ParseRevocationKey(RevocationKey(id, exp))
		if !ok || gotID != id || !gotExp.Equal(exp) {
			t.Errorf("round trip of %q: %q %v %v", id, gotID, gotExp, ok)
		}
	}
	for _, bad := range []string{"", "-", "1800000000-", "0-61", "01-61", "-1-61", "1800000000-6", "1800000000-6G", "1800000000-2f2e2e", "1800000000-61.tmp", "1800000000-2d2d2f"} {
		if _, _, ok := ParseRevocationKey(bad); ok {
			t.Errorf("ParseRevocationKey(%q) accepted", bad)
		}
	}
}

// Store listings are read on every replica every few seconds: whatever
// names a store holds, parsing must not panic, and what it accepts must
// be exactly what RevocationKey writes.
func FuzzParseRevocationKey(f *testing.F) {
	f.Add(RevocationKey("abc", time.Unix(1_800_000_000, 0)))
	f.Add("1-00")
	f.Add("999999999999-7a")
	f.Add("1800000000-2f")
	f.Fuzz(func(t *testing.T, name string) {
		id, exp, ok := ParseRevocationKey(name)
		if !ok {
			return
		}
		if !token.ValidID(id) || RevocationKey(id, exp) != name {
			t.Fatalf("%q parsed to %q %v, which writes back as %q", name, id, exp, RevocationKey(id, exp))
		}
	})
}

// A record's path below its tenant's part ("ID/" + RevocationKey) is read
// on every fetch of an artifact whose revocations are not cached: whatever
// a store holds, parsing must not panic, and what it accepts must be
// exactly what a store writes for that tenant.
func FuzzParseRevocationPath(f *testing.F) {
	id := strings.Repeat("a", 32)
	f.Add("t1", id+"/"+RevocationKey("abc", time.Unix(1_800_000_000, 0)))
	f.Add("", id+"/1-00")
	f.Add("t1", id+"/sub/1800000000-2f")
	f.Add("t1", "../"+id[3:]+"/1800000000-61")
	f.Fuzz(func(t *testing.T, tenant, rel string) {
		r, ok := ParseRevocationPath(tenant, rel)
		if !ok {
			return
		}
		if r.Tenant != tenant || !ValidID(r.Artifact) || !token.ValidID(r.TokenID) ||
			r.Artifact+"/"+RevocationKey(r.TokenID, r.Expires) != rel {
			t.Fatalf("%q parsed to %+v, which writes back otherwise", rel, r)
		}
	})
}

// One tenant rule on every path: another tenant's artifact, and a
// tenant-less one for a tenant, answer exactly what an unknown id answers.
func TestAuthorizeTenantRule(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	put := func(tenant string) Artifact {
		a, err := f.svc.Put(ctx, Artifact{MimeType: "text/plain", Tenant: tenant}, time.Hour, strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	acme, none := put("acme"), put("")
	tests := []struct {
		name, id, tenant string
		ok               bool
	}{
		{"own", acme.ID, "acme", true},
		{"tenant-less caller, tenant-less artifact", none.ID, "", true},
		{"other tenant", acme.ID, "globex", false},
		{"tenant-less caller, a tenant's artifact", acme.ID, "", false},
		{"a tenant, tenant-less artifact", none.ID, "acme", false},
		{"unknown", NewID(), "acme", false},
	}
	for _, tt := range tests {
		for _, via := range []string{ViaRead, ViaStream} {
			_, _, err := f.svc.Authorize(ctx, Access{ID: tt.id, Tenant: tt.tenant, Via: via})
			if tt.ok != (err == nil) || (!tt.ok && !errors.Is(err, ErrNotFound)) {
				t.Errorf("%s via %s: %v", tt.name, via, err)
			}
			if err != nil && *HTTPError(err) != *HTTPError(ErrNotFound) {
				t.Errorf("%s via %s answers %+v, not what an unknown id answers", tt.name, via, HTTPError(err))
			}
		}
	}
	if f.pol.last.Via != ViaStream || f.pol.last.Token != nil {
		t.Errorf("policy input via %q token %v, want resources/stream without token", f.pol.last.Via, f.pol.last.Token)
	}
}

// Nil policy, an evaluation error and a denial all deny; redirect needs
// the decision's consent.
func TestAuthorizeDecision(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, err := f.svc.Put(ctx, Artifact{MimeType: "text/plain"}, time.Hour, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	in := Access{ID: a.ID, Via: ViaRead}
	var de *DeniedError
	f.pol.err = errors.New("boom")
	if _, _, err := f.svc.Authorize(ctx, in); !errors.As(err, &de) || strings.Contains(HTTPError(err).Message, "boom") {
		t.Fatalf("evaluation error: %v (client sees %q)", err, HTTPError(err).Message)
	}
	f.pol.err, f.pol.deny = nil, "not today"
	if _, _, err := f.svc.Authorize(ctx, in); !errors.As(err, &de) || de.Reason != "not today" {
		t.Fatalf("denial: %v", err)
	}
	f.pol.deny = ""
	in.Via = ViaRedirect
	if _, _, err := f.svc.Authorize(ctx, in); !errors.As(err, &de) {
		t.Fatalf("redirect without the decision's consent: %v", err)
	}
	f.pol.redirect = true
	if _, d, err := f.svc.Authorize(ctx, in); err != nil || !d.Redirect {
		t.Fatalf("redirect allowed: %+v %v", d, err)
	}
	f.svc.Fetch = nil
	if _, _, err := f.svc.Authorize(ctx, Access{ID: a.ID, Via: ViaRead}); !errors.As(err, &de) {
		t.Fatalf("no policy: %v", err)
	}
}

// presigner is a memStore that hands out storage URLs, to exercise the
// handler's redirect mode without S3 (s3store's TestFetchRedirect runs it
// on MinIO).
type presigner struct{ *memStore }

func (presigner) PresignGet(ctx context.Context, id string, ttl time.Duration, ct, cd string) (*url.URL, error) {
	return url.Parse("http://storage.invalid/" + id)
}

// Redirect mode is a policy decision: --redirect alone does not redirect,
// and the 302 carries the safety headers and nothing else of the artifact.
func TestRedirectIsPolicyDecision(t *testing.T) {
	f := newFixture(t)
	f.svc.Store = presigner{f.store}
	_, l := f.publish(t, []byte("<b>x</b>"), "text/html", "", LinkOptions{})
	h := NewHandler(f.svc, HandlerOptions{Redirect: true})
	serve := func() *http.Response {
		req, _ := http.NewRequest("GET", l.URL, nil)
		req.RemoteAddr = "127.0.0.1:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Result()
	}
	if resp := serve(); resp.StatusCode != 200 {
		t.Fatalf("decision without redirect: %d, want the bytes", resp.StatusCode)
	}
	f.pol.redirect = true
	resp := serve()
	if resp.StatusCode != 302 || resp.Header.Get("Location") == "" {
		t.Fatalf("decision with redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, k := range []string{"X-Content-Type-Options", "Content-Security-Policy", "Referrer-Policy", "Cache-Control"} {
		if resp.Header.Get(k) == "" {
			t.Errorf("302 without %s", k)
		}
	}
	if resp.Header.Get("Content-Type") != "" || resp.ContentLength != 0 {
		t.Errorf("302 has a body: %q, %d bytes", resp.Header.Get("Content-Type"), resp.ContentLength)
	}
	if f.pol.last.Via != ViaLink || f.pol.last.Token == nil || f.pol.last.Token.ID != l.TokenID {
		t.Errorf("policy input: via %q token %+v", f.pol.last.Via, f.pol.last.Token)
	}
}
