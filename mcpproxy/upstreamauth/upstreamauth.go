// Package upstreamauth gives Spillway its own credentials for an HTTP
// upstream: an access token of the upstream's authorization server,
// obtained with the OAuth 2.0 client credentials grant (RFC 6749 4.4,
// the client authenticated with client_secret_basic, the upstream named
// by an RFC 8707 resource indicator), kept until shortly before it
// expires, and sent as the upstream requests' Authorization (Transport).
//
// The attacker it names is whoever reads Spillway's logs or a client's
// error messages: the client secret and the tokens never appear in an
// error or a log line. The token endpoint is not trusted to be small or
// well formed: its answer is bounded and checked (a Bearer token fit for
// a header), and a failing endpoint is asked again only after a backoff,
// not by every request that needs a token.
package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
)

// Config configure a Source. TokenURL, ClientID and ClientSecret are
// required.
type Config struct {
	// TokenURL is the authorization server's token endpoint, an absolute
	// http(s) URL.
	TokenURL string
	// ClientID and ClientSecret authenticate Spillway to the token
	// endpoint (HTTP Basic, each form-encoded first as RFC 6749 2.3.1
	// says).
	ClientID, ClientSecret string
	// Scopes are asked for (the scope parameter); none: the server's
	// default.
	Scopes []string
	// Resource is the RFC 8707 resource indicator sent with the request
	// (the upstream's URL, as the MCP authorization spec asks); "" sends
	// none.
	Resource string
	// Client reaches the token endpoint; nil: the upstream client policy
	// (httpx.UpstreamClient) with a 30 s timeout.
	Client *http.Client
	// Logger receives a line per fetch (never the secret or a token);
	// nil discards.
	Logger *slog.Logger
}

// fetchTimeout bounds one token request when Config.Client has no
// timeout of its own.
const fetchTimeout = 30 * time.Second

// Backoff after failed fetches: the first retry waits minBackoff, each
// further failure doubles the wait up to maxBackoff.
const (
	minBackoff = time.Second
	maxBackoff = time.Minute
)

// minRefetch is how old a token must be before an upstream's 401 drops
// it: a token just fetched and refused will not be bettered by another
// fetched at once, and an upstream refusing every token must not make
// each request a token fetch.
const minRefetch = 5 * time.Second

// Source holds one client's access token for one upstream. Its methods
// are safe for concurrent use; one token fetch runs at a time, and every
// caller that needs a token meanwhile waits for that one. A Source is
// made by New; the zero value is not usable.
type Source struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	tok      string
	fetched  time.Time // when tok came
	refresh  time.Time // when to fetch the next one (tok still serves)
	expiry   time.Time // when tok stops serving
	inflight *fetch
	failures int
	retryAt  time.Time // no fetch before, after a failure
	lastErr  error
}

// fetch is one token request in flight; done closes when tok or err is
// set.
type fetch struct {
	done chan struct{}
	tok  string
	err  error
}

// New checks cfg and returns its Source. No token is fetched until one
// is needed.
func New(cfg Config) (*Source, error) {
	u, err := url.Parse(cfg.TokenURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("upstreamauth: token_url: want an absolute http(s) URL")
	}
	if u.User != nil {
		return nil, errors.New("upstreamauth: token_url: credentials go in client_id and client_secret, not in the URL")
	}
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("upstreamauth: want a client_id and a client_secret")
	}
	for _, sc := range cfg.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \"\\") || !validToken(sc) {
			return nil, fmt.Errorf("upstreamauth: scope %.40q: not a scope token", sc)
		}
	}
	s := &Source{cfg: cfg, client: cfg.Client, log: cfg.Logger, now: time.Now}
	if s.client == nil {
		s.client = httpx.UpstreamClient(nil)
		s.client.Timeout = fetchTimeout
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Token returns an access token for the upstream: the one kept while it
// serves, else a fresh one. A kept token near its expiry is still
// returned while a fresh one is fetched in the background. Callers
// needing a token while one is fetched wait for that fetch, or for ctx.
// After a failed fetch, Token fails at once (the same error) until the
// backoff ends. Errors wrap ErrToken, or are ctx's.
func (s *Source) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	now := s.now()
	if s.tok != "" && now.Before(s.expiry) {
		tok := s.tok
		if !now.Before(s.refresh) {
			s.startLocked(now)
		}
		s.mu.Unlock()
		return tok, nil
	}
	f := s.startLocked(now)
	err := s.lastErr // the backoff's cause, when f is nil
	s.mu.Unlock()
	if f == nil {
		if err == nil {
			err = ErrToken
		}
		return "", err
	}
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// startLocked returns the fetch in flight, starting one unless a
// failure's backoff runs (then nil). s.mu is held.
func (s *Source) startLocked(now time.Time) *fetch {
	if s.inflight != nil {
		return s.inflight
	}
	if now.Before(s.retryAt) {
		return nil
	}
	f := &fetch{done: make(chan struct{})}
	s.inflight = f
	// Not the caller's context: the fetch serves every caller waiting,
	// and ends within the client's timeout.
	go s.run(f)
	return f
}

// run fetches a token and settles f and the Source with it.
func (s *Source) run(f *fetch) {
	tok, lifetime, err := s.fetchToken(context.Background())
	s.mu.Lock()
	now := s.now()
	if err != nil {
		s.failures++
		s.retryAt = now.Add(backoff(s.failures))
		s.lastErr = err
		s.log.Warn("fetching an access token for the upstream failed", "token_url", httpx.RedactURL(s.cfg.TokenURL),
			"err", err, "retry_in", s.retryAt.Sub(now).Round(time.Millisecond))
	} else {
		s.failures, s.lastErr = 0, nil
		s.tok, s.fetched, s.expiry = tok, now, now.Add(lifetime)
		s.refresh = now.Add(lifetime - min(30*time.Second, lifetime/5))
		s.log.Debug("fetched an access token for the upstream", "token_url", httpx.RedactURL(s.cfg.TokenURL), "lifetime", lifetime)
	}
	s.inflight = nil
	s.mu.Unlock()
	f.tok, f.err = tok, err
	close(f.done)
}

// backoff is the wait after n failed fetches in a row.
func backoff(n int) time.Duration {
	d := minBackoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// invalidate drops tok, which the upstream refused, unless it is no
// longer the kept one or was fetched under minRefetch ago. It reports
// whether a fresh token may help (tok was dropped, or another replaced
// it already).
func (s *Source) invalidate(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != tok {
		return s.tok != ""
	}
	if s.now().Sub(s.fetched) < minRefetch {
		return false
	}
	s.tok = ""
	s.log.Info("the upstream refused Spillway's access token: fetching another", "token_url", httpx.RedactURL(s.cfg.TokenURL))
	return true
}

// fetchToken asks the token endpoint for a token.
func (s *Source) fetchToken(ctx context.Context) (string, time.Duration, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(s.cfg.Scopes) > 0 {
		form.Set("scope", strings.Join(s.cfg.Scopes, " "))
	}
	if s.cfg.Resource != "" {
		form.Set("resource", s.cfg.Resource)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrToken, httpx.RedactError(err))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(s.cfg.ClientID), url.QueryEscape(s.cfg.ClientSecret))
	resp, err := s.client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("%w: the token endpoint is unreachable: %w", ErrToken, httpx.RedactError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	switch {
	case err != nil:
		return "", 0, fmt.Errorf("%w: reading the token endpoint's answer: %w", ErrToken, httpx.RedactError(err))
	case len(body) > maxTokenResponse:
		return "", 0, fmt.Errorf("%w: the token endpoint's answer is over %d bytes", ErrToken, maxTokenResponse)
	}
	return parseTokenResponse(resp.StatusCode, body)
}
