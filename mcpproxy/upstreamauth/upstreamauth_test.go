package upstreamauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const secret = "s3cret-client-secret"

// tokenServer is a token endpoint on loopback: it checks the client's
// Basic credentials and grants tok-N (N counting grants) for ttl, or
// answers fail's status when set.
type tokenServer struct {
	*httptest.Server
	grants atomic.Int64
	fail   atomic.Int64 // an HTTP status to answer instead, 0 for none
	delay  time.Duration
	mu     sync.Mutex
	forms  []string
}

func newTokenServer(t *testing.T, ttl int, delay time.Duration) *tokenServer {
	ts := &tokenServer{delay: delay}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(ts.delay)
		id, sec, ok := r.BasicAuth()
		r.ParseForm()
		ts.mu.Lock()
		ts.forms = append(ts.forms, r.PostForm.Encode())
		ts.mu.Unlock()
		if st := ts.fail.Load(); st != 0 {
			w.WriteHeader(int(st))
			io.WriteString(w, `{"error":"temporarily_unavailable"}`)
			return
		}
		if !ok || id != "spill%2Fway" || sec != secret || r.PostForm.Get("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"invalid_client"}`)
			return
		}
		n := ts.grants.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, n, ttl)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// clock is a Source's now, moved by the test.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

func newSource(t *testing.T, url string, log io.Writer) (*Source, *clock) {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	s, err := New(Config{TokenURL: url, ClientID: "spill/way", ClientSecret: secret, Scopes: []string{"tools.read", "tools.call"},
		Resource: "http://127.0.0.1:1/mcp", Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{}
	s.now = c.now
	return s, c
}

// One fetch serves every concurrent caller; the token is kept until
// shortly before it expires, then refreshed in the background while the
// old one still serves, and after expiry callers wait for a fresh one.
func TestSourceCachesAndShares(t *testing.T) {
	ts := newTokenServer(t, 100, 50*time.Millisecond)
	s, c := newSource(t, ts.URL, nil)
	var wg sync.WaitGroup
	got := make([]string, 20)
	for i := range got {
		wg.Go(func() {
			var err error
			if got[i], err = s.Token(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, g := range got {
		if g != "tok-1" {
			t.Fatalf("tokens %q", got)
		}
	}
	if n := ts.grants.Load(); n != 1 {
		t.Fatalf("%d fetches for 20 concurrent callers", n)
	}
	ts.mu.Lock()
	form := ts.forms[0]
	ts.mu.Unlock()
	if form != "grant_type=client_credentials&resource=http%3A%2F%2F127.0.0.1%3A1%2Fmcp&scope=tools.read+tools.call" {
		t.Errorf("form %s", form)
	}
	c.advance(70 * time.Second)
	if tok, _ := s.Token(t.Context()); tok != "tok-1" || ts.grants.Load() != 1 {
		t.Fatalf("before the refresh margin: %q, %d fetches", tok, ts.grants.Load())
	}
	c.advance(15 * time.Second) // 85 s of 100: within the margin (20 s)
	if tok, _ := s.Token(t.Context()); tok != "tok-1" {
		t.Fatalf("the old token no longer served within the margin: %q", tok)
	}
	waitFor(t, func() bool { tok, _ := s.Token(t.Context()); return tok == "tok-2" })
	c.advance(200 * time.Second) // tok-2 expired
	if tok, err := s.Token(t.Context()); tok != "tok-3" || err != nil {
		t.Fatalf("after expiry: %q %v", tok, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("timed out")
		}
	}
}

// A failing token endpoint is asked again only after a backoff that
// grows; meanwhile callers get the failure at once. Neither the secret
// nor a token reaches an error or the log.
func TestSourceBacksOff(t *testing.T) {
	ts := newTokenServer(t, 100, 0)
	ts.fail.Store(http.StatusServiceUnavailable)
	var log bytes.Buffer
	s, c := newSource(t, ts.URL, &log)
	for range 5 {
		_, err := s.Token(t.Context())
		if !errors.Is(err, ErrToken) || !strings.Contains(err.Error(), `answered 503, error "temporarily_unavailable"`) {
			t.Fatalf("err %v", err)
		}
	}
	if n := len(ts.forms); n != 1 {
		t.Fatalf("%d fetches in the backoff", n)
	}
	c.advance(minBackoff)
	s.Token(t.Context())
	c.advance(minBackoff) // the second backoff is 2 s
	s.Token(t.Context())
	if n := len(ts.forms); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	ts.fail.Store(0)
	c.advance(minBackoff)
	if tok, err := s.Token(t.Context()); tok != "tok-1" || err != nil {
		t.Fatalf("after recovery: %q %v", tok, err)
	}
	if strings.Contains(log.String(), secret) || strings.Contains(log.String(), "tok-1") {
		t.Errorf("the log holds a secret: %s", log.String())
	}
	if !strings.Contains(log.String(), "fetching an access token for the upstream failed") {
		t.Errorf("the log lacks the failure: %s", log.String())
	}
}

// A refused client, an endpoint down, an answer too large: errors that
// name the cause, never the secret.
func TestSourceErrors(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 1<<20))
	}))
	defer big.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, tt := range []struct{ url, id, want string }{
		{big.URL, "spill/way", "over 65536 bytes"},
		{down.URL + "/token?key=k", "spill/way", "unreachable"},
		{newTokenServer(t, 60, 0).URL, "other", `answered 401, error "invalid_client"`},
	} {
		s, err := New(Config{TokenURL: tt.url, ClientID: tt.id, ClientSecret: secret})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Token(t.Context())
		if !errors.Is(err, ErrToken) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), secret) ||
			strings.Contains(err.Error(), "key=k") {
			t.Errorf("%s: %v; want %q", tt.url, err, tt.want)
		}
	}
}

// A caller whose context ends stops waiting; the fetch goes on for the
// others.
func TestSourceWaitEndsWithContext(t *testing.T) {
	ts := newTokenServer(t, 60, 300*time.Millisecond)
	s, _ := newSource(t, ts.URL, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Token(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if tok, err := s.Token(t.Context()); tok != "tok-1" || err != nil || ts.grants.Load() != 1 {
		t.Fatalf("%q %v, %d fetches", tok, err, ts.grants.Load())
	}
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []Config{
		{TokenURL: "/token", ClientID: "a", ClientSecret: "b"},
		{TokenURL: "http://u:p@h/token", ClientID: "a", ClientSecret: "b"},
		{TokenURL: "http://h/token", ClientSecret: "b"},
		{TokenURL: "http://h/token", ClientID: "a"},
		{TokenURL: "http://h/token", ClientID: "a", ClientSecret: "b", Scopes: []string{"a b"}},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// upstream answers 401 to tokens in refused, 200 with the Authorization
// and body it received otherwise.
func upstream(t *testing.T, refused *sync.Map) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a := r.Header.Get("Authorization")
		if _, no := refused.Load(a); no {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode([]string{a, string(b)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The transport replaces the request's Authorization with the Source's
// token; on a 401 to an old enough token it fetches a fresh one and
// sends a replayable request again, once; a body it cannot replay gets
// the 401, and the next request the fresh token.
func TestTransportRefreshesOn401(t *testing.T) {
	ts := newTokenServer(t, 3600, 0)
	s, c := newSource(t, ts.URL, nil)
	var refused sync.Map
	up := upstream(t, &refused)
	client := &http.Client{Transport: s.Transport(nil)}
	post := func(body io.Reader) (int, []string) {
		req, _ := http.NewRequest(http.MethodPost, up.URL, body)
		req.Header.Set("Authorization", "Bearer client-token")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got []string
		json.NewDecoder(resp.Body).Decode(&got)
		return resp.StatusCode, got
	}
	if st, got := post(strings.NewReader("one")); st != 200 || got[0] != "Bearer tok-1" || got[1] != "one" {
		t.Fatalf("%d %q", st, got)
	}
	refused.Store("Bearer tok-1", true)
	if st, _ := post(strings.NewReader("young")); st != http.StatusUnauthorized || ts.grants.Load() != 1 {
		t.Fatalf("a token just fetched was dropped on a 401: %d, %d fetches", st, ts.grants.Load())
	}
	c.advance(time.Minute)
	if st, got := post(strings.NewReader("two")); st != 200 || got[0] != "Bearer tok-2" || got[1] != "two" {
		t.Fatalf("not sent again with a fresh token: %d %q", st, got)
	}
	refused.Store("Bearer tok-2", true)
	c.advance(time.Minute)
	if st, _ := post(io.MultiReader(strings.NewReader("three"))); st != http.StatusUnauthorized {
		t.Fatalf("a body that cannot be replayed: %d", st)
	}
	if st, got := post(strings.NewReader("four")); st != 200 || got[0] != "Bearer tok-3" {
		t.Fatalf("the next request: %d %q", st, got)
	}
}

// No token, no request: the upstream is not asked, the error is the
// Source's.
func TestTransportWithoutToken(t *testing.T) {
	ts := newTokenServer(t, 60, 0)
	ts.fail.Store(http.StatusInternalServerError)
	s, _ := newSource(t, ts.URL, nil)
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer up.Close()
	_, err := (&http.Client{Transport: s.Transport(nil)}).Post(up.URL, "application/json", strings.NewReader("{}"))
	if !errors.Is(err, ErrToken) || hits.Load() != 0 {
		t.Fatalf("err %v, %d upstream requests", err, hits.Load())
	}
}
