package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/policy"
)

// memStore is a unit-test fake of our own Store interface; the real stores
// run the shared suite in package storetest.
type memStore struct {
	mu      sync.Mutex
	objs    map[string]memObj
	revoked []Revocation
	reads   int // of revocations
	down    bool
	revDown bool // Revocations alone fails
}

type memObj struct {
	a Artifact
	b []byte
}

func (m *memStore) Put(ctx context.Context, a Artifact, r io.Reader) (Artifact, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return Artifact{}, err
	}
	sum := sha256.Sum256(b)
	if (a.Size > 0 && a.Size != int64(len(b))) || (a.SHA256 != "" && a.SHA256 != hex.EncodeToString(sum[:])) {
		return Artifact{}, ErrIntegrity
	}
	a.Size, a.SHA256 = int64(len(b)), hex.EncodeToString(sum[:])
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objs == nil {
		m.objs = map[string]memObj{}
	}
	m.objs[a.ID] = memObj{a, b}
	return a, nil
}

func (m *memStore) get(id string) (memObj, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return memObj{}, ErrUnavailable
	}
	o, ok := m.objs[id]
	if !ok {
		return memObj{}, ErrNotFound
	}
	return o, nil
}

func (m *memStore) Stat(ctx context.Context, id string) (Artifact, error) {
	o, err := m.get(id)
	return o.a, err
}

func (m *memStore) Open(ctx context.Context, id string, off, n int64) (io.ReadCloser, error) {
	o, err := m.get(id)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		n = int64(len(o.b)) - off
	}
	return io.NopCloser(bytes.NewReader(o.b[off : off+n])), nil
}

func (m *memStore) Delete(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, id)
	return nil
}

func (m *memStore) ListExpired(ctx context.Context, now time.Time, fn func(string) error) error {
	m.mu.Lock()
	var ids []string
	for id, o := range m.objs {
		if o.a.Expired(now) {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) Ping(ctx context.Context) error { return nil }

func (m *memStore) Revoke(ctx context.Context, r Revocation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return ErrUnavailable
	}
	m.revoked = append(m.revoked, r)
	return nil
}

func (m *memStore) Revocations(ctx context.Context, tenant, id string, now time.Time, fn func(Revocation) error) error {
	m.mu.Lock()
	if m.down || m.revDown {
		m.mu.Unlock()
		return ErrUnavailable
	}
	m.reads++
	rs := slices.Clone(m.revoked)
	m.mu.Unlock()
	for _, r := range rs {
		if r.Tenant == tenant && (id == "" || r.Artifact == id) && now.Before(r.Expires) {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *memStore) SweepRevocations(ctx context.Context, now time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.revoked)
	m.revoked = slices.DeleteFunc(m.revoked, func(r Revocation) bool { return !now.Before(r.Expires) })
	return n - len(m.revoked), nil
}

func (m *memStore) DeleteRevocations(ctx context.Context, tenant, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.revoked = slices.DeleteFunc(m.revoked, func(r Revocation) bool { return r.Tenant == tenant && r.Artifact == id })
	return nil
}

type allowAll struct {
	mu       sync.Mutex
	last     policy.FetchInput
	deny     string
	err      error
	redirect bool
}

func (p *allowAll) Fetch(ctx context.Context, in policy.FetchInput) (policy.FetchDecision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = in
	if p.err != nil {
		return policy.FetchDecision{}, p.err
	}
	if p.deny != "" {
		return policy.FetchDecision{Reason: p.deny}, nil
	}
	return policy.FetchDecision{Allow: true, Redirect: p.redirect, Headers: map[string]string{"X-Policy": "yes", "Content-Type": "text/html"}}, nil
}

type fixture struct {
	svc   *Service
	store *memStore
	pol   *allowAll
	srv   *httptest.Server
	now   time.Time
}

func testSigner(t testing.TB) *token.Signer {
	s, err := token.NewSigner(token.Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newFixture(t testing.TB) *fixture {
	f := &fixture{store: &memStore{}, pol: &allowAll{}, now: time.Now()}
	signer := testSigner(t)
	f.srv = httptest.NewServer(nil)
	u, _ := url.Parse(f.srv.URL)
	f.svc = &Service{Store: f.store, Signer: signer, PublicURL: u, Fetch: f.pol, Cache: NewCache(CacheOptions{}), Now: func() time.Time { return f.now }}
	r := mux.NewRouter()
	NewHandler(f.svc, HandlerOptions{Logger: slog.New(slog.DiscardHandler)}).Register(r)
	f.srv.Config.Handler = r
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) publish(t *testing.T, body []byte, mime, name string, o LinkOptions) (Artifact, Link) {
	t.Helper()
	a, l, err := f.svc.Publish(context.Background(), Artifact{MimeType: mime, Name: name}, bytes.NewReader(body), o)
	if err != nil {
		t.Fatal(err)
	}
	return a, l
}

func get(t *testing.T, method, u string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func errCode(t *testing.T, b []byte) string {
	var e struct{ Code string }
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", b, err)
	}
	return e.Code
}

func TestFetch(t *testing.T) {
	f := newFixture(t)
	body := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB: past the blob cache
	a, l := f.publish(t, body, "text/plain", "digits.txt", LinkOptions{})

	resp, got := get(t, "GET", l.URL, nil)
	if resp.StatusCode != 200 || !bytes.Equal(got, body) {
		t.Fatalf("GET = %d, %d bytes", resp.StatusCode, len(got))
	}
	for k, want := range map[string]string{
		"Content-Type":            "text/plain",
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": "sandbox; default-src 'none'",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "private, no-store",
		"Etag":                    `"` + a.SHA256 + `"`,
		"Content-Length":          fmt.Sprint(len(body)),
		"X-Policy":                "yes",
		"Content-Disposition":     `inline; filename=digits.txt`,
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if f.pol.last.Artifact.ID != a.ID || f.pol.last.Request.Method != "GET" || f.pol.last.Request.SourceAddress != "127.0.0.1" {
		t.Errorf("policy input = %+v", f.pol.last)
	}
	if _, ok := f.pol.last.Request.Headers["authorization"]; ok {
		t.Error("policy saw the Authorization header")
	}

	t.Run("range", func(t *testing.T) {
		resp, got := get(t, "GET", l.URL, map[string]string{"Range": "bytes=10-19"})
		if resp.StatusCode != 206 || string(got) != "0123456789" || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 10-19/%d", len(body)) {
			t.Fatalf("Range = %d %q %q", resp.StatusCode, got, resp.Header.Get("Content-Range"))
		}
		resp, _ = get(t, "GET", l.URL, map[string]string{"Range": fmt.Sprintf("bytes=%d-", len(body))})
		if resp.StatusCode != 416 || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", len(body)) {
			t.Fatalf("unsatisfiable Range = %d %q", resp.StatusCode, resp.Header.Get("Content-Range"))
		}
		resp, got = get(t, "GET", l.URL, map[string]string{"Range": "bytes=0-1", "If-Range": `"other"`})
		if resp.StatusCode != 200 || len(got) != len(body) {
			t.Fatalf("If-Range mismatch = %d, %d bytes", resp.StatusCode, len(got))
		}
	})
	t.Run("conditional and head", func(t *testing.T) {
		resp, got := get(t, "GET", l.URL, map[string]string{"If-None-Match": `"` + a.SHA256 + `"`})
		if resp.StatusCode != 304 || len(got) != 0 {
			t.Fatalf("If-None-Match = %d", resp.StatusCode)
		}
		resp, got = get(t, "HEAD", l.URL, nil)
		if resp.StatusCode != 200 || len(got) != 0 || resp.ContentLength != int64(len(body)) {
			t.Fatalf("HEAD = %d len %d", resp.StatusCode, resp.ContentLength)
		}
	})
	// RFC 9110 13.1.1: If-Match compares strongly and, when it fails,
	// answers 412 before Range or If-None-Match are looked at.
	t.Run("if-match", func(t *testing.T) {
		etag := `"` + a.SHA256 + `"`
		for _, tc := range []struct {
			hdr    map[string]string
			status int
		}{
			{map[string]string{"If-Match": etag}, 200},
			{map[string]string{"If-Match": `"other", ` + etag}, 200},
			{map[string]string{"If-Match": "*"}, 200},
			{map[string]string{"If-Match": `"other"`}, 412},
			{map[string]string{"If-Match": "W/" + etag}, 412}, // weak never matches strongly
			{map[string]string{"If-Match": `"other"`, "Range": "bytes=0-1"}, 412},
			{map[string]string{"If-Match": `"other"`, "If-None-Match": etag}, 412},
			{map[string]string{"If-Match": etag, "Range": "bytes=0-1"}, 206},
		} {
			for _, method := range []string{"GET", "HEAD"} {
				resp, got := get(t, method, l.URL, tc.hdr)
				if resp.StatusCode != tc.status {
					t.Errorf("%s with %v = %d, want %d", method, tc.hdr, resp.StatusCode, tc.status)
				}
				if resp.StatusCode == 412 && method == "GET" && errCode(t, got) != "precondition_failed" {
					t.Errorf("412 body = %s", got)
				}
			}
		}
	})
	t.Run("bearer", func(t *testing.T) {
		u, _ := url.Parse(l.URL)
		tok := u.Query().Get("t")
		u.RawQuery = ""
		resp, got := get(t, "GET", u.String(), map[string]string{"Authorization": "Bearer " + tok})
		if resp.StatusCode != 200 || !bytes.Equal(got, body) {
			t.Fatalf("bearer = %d", resp.StatusCode)
		}
		resp, _ = get(t, "GET", l.URL, map[string]string{"Authorization": "Bearer " + tok})
		if resp.StatusCode != 403 {
			t.Fatalf("token twice = %d, want 403", resp.StatusCode)
		}
	})
	t.Run("rejects", func(t *testing.T) {
		i := strings.Index(l.URL, "t=") + 5
		flipped := l.URL[:i] + string("AB"[boolInt(l.URL[i] == 'A')]) + l.URL[i+1:]
		_, other := f.publish(t, []byte("x"), "text/plain", "", LinkOptions{})
		otherTok := other.URL[strings.Index(other.URL, "t="):]
		for name, u := range map[string]string{
			"flipped":         flipped,
			"extra param":     l.URL + "&download=1",
			"duplicate param": l.URL + "&" + l.URL[strings.Index(l.URL, "t="):],
			"no token":        l.URL[:strings.Index(l.URL, "?")],
			"other artifact":  l.URL[:strings.Index(l.URL, "?")+1] + otherTok,
		} {
			resp, b := get(t, "GET", u, nil)
			if resp.StatusCode != 403 || errCode(t, b) != "forbidden" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: %d %s", name, resp.StatusCode, b)
			}
		}
	})
	t.Run("expired", func(t *testing.T) {
		defer func(n time.Time) { f.now = n }(f.now)
		f.now = l.Expires.Add(time.Hour)
		resp, b := get(t, "GET", l.URL, nil)
		if resp.StatusCode != 410 || errCode(t, b) != "expired" {
			t.Fatalf("expired = %d %s", resp.StatusCode, b)
		}
	})
	t.Run("policy deny and error", func(t *testing.T) {
		f.pol.deny = "not today"
		resp, b := get(t, "GET", l.URL, nil)
		f.pol.deny = ""
		if resp.StatusCode != 403 || errCode(t, b) != "denied" || !strings.Contains(string(b), "not today") {
			t.Fatalf("deny = %d %s", resp.StatusCode, b)
		}
		f.pol.err = errors.New("boom")
		resp, b = get(t, "GET", l.URL, nil)
		f.pol.err = nil
		if resp.StatusCode != 403 || strings.Contains(string(b), "boom") {
			t.Fatalf("eval error = %d %s", resp.StatusCode, b)
		}
	})
	t.Run("deleted and store down", func(t *testing.T) {
		b2, l2 := f.publish(t, []byte("gone soon"), "text/plain", "", LinkOptions{})
		if err := f.svc.Delete(context.Background(), b2.ID); err != nil {
			t.Fatal(err)
		}
		resp, b := get(t, "GET", l2.URL, nil)
		if resp.StatusCode != 404 || errCode(t, b) != "not_found" {
			t.Fatalf("deleted = %d %s", resp.StatusCode, b)
		}
		f.svc.Cache.remove(a.ID)
		f.store.mu.Lock()
		f.store.down = true
		f.store.mu.Unlock()
		resp, b = get(t, "GET", l.URL, nil)
		f.store.mu.Lock()
		f.store.down = false
		f.store.mu.Unlock()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || errCode(t, b) != "unavailable" {
			t.Fatalf("store down = %d %s", resp.StatusCode, b)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestFetchBindings(t *testing.T) {
	f := newFixture(t)
	_, head := f.publish(t, []byte("hi"), "text/plain", "", LinkOptions{Method: token.MethodHead})
	if resp, _ := get(t, "GET", head.URL, nil); resp.StatusCode != 403 {
		t.Fatalf("GET with HEAD-only token = %d", resp.StatusCode)
	}
	if resp, _ := get(t, "HEAD", head.URL, nil); resp.StatusCode != 200 {
		t.Fatalf("HEAD with HEAD-only token = %d", resp.StatusCode)
	}
	_, far := f.publish(t, []byte("hi"), "text/plain", "", LinkOptions{CIDR: netip.MustParsePrefix("10.0.0.0/8")})
	if resp, _ := get(t, "GET", far.URL, nil); resp.StatusCode != 403 {
		t.Fatalf("GET outside CIDR = %d", resp.StatusCode)
	}
	_, near := f.publish(t, []byte("hi"), "text/plain", "", LinkOptions{CIDR: netip.MustParsePrefix("127.0.0.0/8")})
	if resp, _ := get(t, "GET", near.URL, nil); resp.StatusCode != 200 {
		t.Fatalf("GET inside CIDR = %d", resp.StatusCode)
	}
	if resp, _ := get(t, "POST", near.URL, nil); resp.StatusCode != 405 {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
}

// Issue 38, item 10: inline was decided by a list of active types, so
// text/pdf, application/x-pdf and multipart/x-mixed-replace (and any type
// the list did not name) were served inline. Only the reviewed types of
// inlineTypes are now.
func TestInlineOnlyForAllowedTypes(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct{ mime, disp string }{
		{"text/plain", "inline"},
		{"text/plain; charset=utf-8", "inline"},
		{"TEXT/PLAIN", "inline"},
		{"text/csv", "inline"},
		{"application/json", "inline"},
		{"image/png", "inline"},
		{"image/jpeg", "inline"},
		{"image/webp", "inline"},
		{"audio/wav", "inline"},
		{"video/mp4", "inline"},
		// Served inline before.
		{"text/pdf", "attachment"},
		{"application/x-pdf", "attachment"},
		{"multipart/x-mixed-replace", "attachment"},
		{"multipart/x-mixed-replace; boundary=x", "attachment"},
		{"image/tiff", "attachment"},
		{"application/octet-stream", "attachment"},
		{"application/wasm", "attachment"},
		{"text/vtt", "attachment"},
		{"not a mime type", "attachment"},
		// Attachments before too.
		{"text/html", "attachment"},
		{"TEXT/HTML; charset=utf-8", "attachment"},
		{"image/svg+xml", "attachment"},
		{"application/xml", "attachment"},
		{"text/javascript", "attachment"},
		{"application/pdf", "attachment"},
	} {
		_, l := f.publish(t, []byte("<script>alert(1)</script>"), tt.mime, "x", LinkOptions{})
		resp, _ := get(t, "GET", l.URL, nil)
		if cd := resp.Header.Get("Content-Disposition"); cd != tt.disp+"; filename=x" {
			t.Errorf("%s: Content-Disposition = %q, want %s", tt.mime, cd, tt.disp)
		}
		if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: missing safety headers", tt.mime)
		}
	}
	_, l := f.publish(t, []byte("x"), "not a mime type", "", LinkOptions{})
	if resp, _ := get(t, "GET", l.URL, nil); resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("bad mime served as %q", resp.Header.Get("Content-Type"))
	}
}

func TestNoPolicyDenies(t *testing.T) {
	f := newFixture(t)
	_, l := f.publish(t, []byte("x"), "text/plain", "", LinkOptions{})
	f.svc.Fetch = nil
	if resp, _ := get(t, "GET", l.URL, nil); resp.StatusCode != 403 {
		t.Fatalf("no policy = %d, want 403", resp.StatusCode)
	}
}

// fetchRoute matches exactly the paths mux's FetchPath pattern matches,
// the id it would take being the last segment (what ServeHTTP takes).
func TestFetchRouteIsFetchPath(t *testing.T) {
	pattern := mux.NewRouter().SkipClean(true)
	pattern.Handle(FetchPath, http.NotFoundHandler())
	for _, target := range []string{"/a/abc", "/a/", "/a", "/a/abc/", "/a/x/y", "/a//x", "/a/x%2Fy", "/a/%41", "/ab/c", "/b/a/x",
		"/a/abc?t=1", "//a/x", "/a/x%00", "/a/" + strings.Repeat("z", 300)} {
		r := httptest.NewRequest(http.MethodGet, "http://h"+target, nil)
		var m mux.RouteMatch
		want := pattern.Match(r, &m)
		if got := fetchRoute(r, nil); got != want {
			t.Errorf("%s: fetchRoute %v, the pattern %v", target, got, want)
		}
		if id := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]; want && m.Vars["id"] != id {
			t.Errorf("%s: the pattern takes id %q, the last segment is %q", target, m.Vars["id"], id)
		}
	}
}
