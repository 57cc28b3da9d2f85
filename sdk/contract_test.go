package sdk_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/sdk"
)

// The TTL a caller asks for is the one the link gets (the service reads it
// from the JSON body; a query parameter was ignored and gave 15 minutes).
func TestMintHonoursTTL(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	l, err := c.Upload(ctx, strings.NewReader("ttl"), sdk.UploadOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []time.Duration{30 * time.Second, 7 * time.Minute} {
		before := time.Now()
		m, err := c.Mint(ctx, l.ID(), ttl)
		if err != nil {
			t.Fatal(err)
		}
		// httpUrlExpiresAt has whole seconds.
		if lo, hi := before.Add(ttl-time.Second), time.Now().Add(ttl+time.Second); m.ExpiresAt.Before(lo) || m.ExpiresAt.After(hi) {
			t.Errorf("Mint(%v): expires %v, want within [%v, %v]", ttl, m.ExpiresAt, lo, hi)
		}
		if _, err := c.FetchBytes(ctx, m); err != nil {
			t.Errorf("Mint(%v): %v", ttl, err)
		}
	}
	if m, err := c.Mint(ctx, l.ID(), 0); err != nil || m.ExpiresAt.IsZero() {
		t.Errorf("Mint with the default TTL: %+v, %v", m, err)
	}
}

// hostile is a real loopback pair in redirect mode: front answers 302 to
// storage, which serves bytes that are not the artifact's, with an MD5
// ETag as S3 does. Both count the requests they get.
type hostile struct {
	front, storage *httptest.Server
	requests       atomic.Int32
}

func newHostile(t *testing.T, served []byte) *hostile {
	h := &hostile{}
	sum := md5.Sum(served)
	h.storage = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Write(served)
	}))
	h.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		http.Redirect(w, r, h.storage.URL+"/bucket/object?X-Amz-Signature=x", http.StatusFound)
	}))
	t.Cleanup(h.front.Close)
	t.Cleanup(h.storage.Close)
	return h
}

func TestDigestIsNeverSkipped(t *testing.T) {
	artifact, served := []byte("the artifact"), []byte("something else")
	sum := sha256.Sum256(artifact)
	digest := hex.EncodeToString(sum[:])
	h := newHostile(t, served)
	url := h.front.URL + "/a/id?t=token"
	ctx := context.Background()

	// Malformed expected digests are refused before any request: before,
	// each one silently turned the check off and the wrong bytes passed.
	for _, bad := range []string{digest[:63], digest + "0", "sha256:" + digest, strings.Repeat("g", 64), " " + digest[1:]} {
		_, err := sdk.Fetch(ctx, nil, url, io.Discard, sdk.FetchOptions{SHA256: bad})
		if !errors.Is(err, sdk.ErrMalformedDigest) {
			t.Errorf("SHA256 %q: %v, want ErrMalformedDigest", bad, err)
		}
		_, err = (&sdk.Client{}).FetchBytes(ctx, sdk.Link{HTTPURL: url, SHA256: bad})
		if !errors.Is(err, sdk.ErrMalformedDigest) {
			t.Errorf("link digest %q: %v, want ErrMalformedDigest", bad, err)
		}
	}
	// Strict without a digest, and a link without one: refused too.
	if _, err := sdk.Fetch(ctx, nil, url, io.Discard, sdk.FetchOptions{RequireSHA256: true}); !errors.Is(err, sdk.ErrNoDigest) {
		t.Errorf("RequireSHA256 without SHA256: %v", err)
	}
	if _, err := (&sdk.Client{}).FetchBytes(ctx, sdk.Link{HTTPURL: url}); !errors.Is(err, sdk.ErrNoDigest) {
		t.Errorf("link without a digest: %v", err)
	}
	if n := h.requests.Load(); n != 0 {
		t.Errorf("%d requests made for fetches that must be refused up front", n)
	}

	// The link's digest is checked after the redirect, whatever the ETag
	// says, in either case.
	for _, d := range []string{digest, strings.ToUpper(digest)} {
		if _, err := sdk.Fetch(ctx, nil, url, io.Discard, sdk.FetchOptions{SHA256: d}); !errors.Is(err, sdk.ErrIntegrity) {
			t.Errorf("wrong bytes behind a redirect: %v", err)
		}
	}
	if _, err := (&sdk.Client{}).FetchBytes(ctx, sdk.Link{HTTPURL: url, SHA256: digest}); !errors.Is(err, sdk.ErrIntegrity) {
		t.Errorf("FetchBytes, wrong bytes behind a redirect: %v", err)
	}
	// The documented gap: no digest given, an MD5 ETag is no SHA-256.
	var got bytes.Buffer
	if _, err := sdk.Fetch(ctx, nil, url, &got, sdk.FetchOptions{}); err != nil || got.String() != string(served) {
		t.Errorf("unchecked fetch: %q, %v", got.String(), err)
	}
}

// unavailable answers 503 with Retry-After: retryAfter() `times` times,
// then the bytes; it records when each request came.
type unavailable struct {
	*httptest.Server
	mu    sync.Mutex
	times []time.Time
}

func newUnavailable(t *testing.T, retryAfter func() string, times int, body []byte) *unavailable {
	u := &unavailable{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.times = append(u.times, time.Now())
		n := len(u.times)
		u.mu.Unlock()
		if n <= times {
			w.Header().Set("Retry-After", retryAfter())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"code":"unavailable","message":"storage is unavailable"}`)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *unavailable) gaps() []time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(u.times); i++ {
		g = append(g, u.times[i].Sub(u.times[i-1]))
	}
	return g
}

// Fetch retries a 503 after the wait its Retry-After asks for, in both
// forms, and never longer than MaxRetryWait.
func TestFetchHonoursRetryAfter(t *testing.T) {
	body := []byte("available at last")
	sum := sha256.Sum256(body)
	for _, c := range []struct {
		name       string
		retryAfter func() string
		opts       sdk.FetchOptions
		minGap     time.Duration
	}{
		{"delta-seconds", func() string { return "1" }, sdk.FetchOptions{}, 900 * time.Millisecond},
		// A date two seconds ahead, truncated to the second: 1 to 2 s.
		{"HTTP-date", func() string { return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat) }, sdk.FetchOptions{}, 900 * time.Millisecond},
		{"capped", func() string { return "3600" }, sdk.FetchOptions{MaxRetryWait: 100 * time.Millisecond}, 90 * time.Millisecond},
		{"capped HTTP-date", func() string { return time.Now().Add(time.Hour).UTC().Format(http.TimeFormat) }, sdk.FetchOptions{MaxRetryWait: 100 * time.Millisecond}, 90 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUnavailable(t, c.retryAfter, 2, body)
			// The deadline is the bound: an uncapped wait would exceed it.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			o := c.opts
			o.SHA256 = hex.EncodeToString(sum[:])
			var got bytes.Buffer
			if _, err := sdk.Fetch(ctx, nil, u.URL+"/a/x?t=y", &got, o); err != nil || got.String() != string(body) {
				t.Fatalf("fetch: %q, %v", got.String(), err)
			}
			g := u.gaps()
			if len(g) != 2 {
				t.Fatalf("%d requests, want 3", len(g)+1)
			}
			for _, d := range g {
				if d < c.minGap {
					t.Errorf("retried after %v, want at least %v", d, c.minGap)
				}
			}
		})
	}
	t.Run("retries run out", func(t *testing.T) {
		u := newUnavailable(t, func() string { return "0" }, 100, body)
		_, err := sdk.Fetch(context.Background(), nil, u.URL, io.Discard, sdk.FetchOptions{Retries: 2})
		var se *sdk.Error
		if !errors.Is(err, sdk.ErrUnavailable) || !errors.As(err, &se) || se.Code != "unavailable" || len(u.gaps()) != 2 {
			t.Errorf("%v after %d requests", err, len(u.gaps())+1)
		}
	})
}

// The inbound token goes to the service's origin only: net/http keeps
// Authorization on a redirect to the same host on another port.
func TestTokenStaysOnItsOrigin(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = r.Header.Get("Authorization")
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}
	}
	other := httptest.NewServer(record("other"))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /v1/artifacts/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/artifacts/away", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("DELETE /v1/artifacts/here", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/v1/artifacts/moved", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("DELETE /v1/artifacts/moved", record("same origin"))
	svc := httptest.NewServer(mux)
	defer svc.Close()
	if !strings.HasPrefix(other.URL, "http://127.0.0.1:") || !strings.HasPrefix(svc.URL, "http://127.0.0.1:") {
		t.Fatalf("want two ports on one host: %s %s", svc.URL, other.URL)
	}
	var redirects atomic.Int32
	c := &sdk.Client{BaseURL: svc.URL, Token: "inbound-token-0123456789", HTTP: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { redirects.Add(1); return nil }}}
	for _, id := range []string{"away", "here"} {
		if err := c.Delete(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["other"] != "" {
		t.Errorf("the token reached another origin: %q", seen["other"])
	}
	if seen["same origin"] != "Bearer inbound-token-0123456789" {
		t.Errorf("a same-origin redirect lost the token: %q", seen["same origin"])
	}
	if redirects.Load() != 2 {
		t.Errorf("the caller's CheckRedirect ran %d times, want 2", redirects.Load())
	}
}
