package httpx

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrCrossOrigin is returned, wrapped in the *url.Error of
// http.Client.Do, when an upstream redirects a request to another origin.
var ErrCrossOrigin = errors.New("httpx: a redirect to another origin refused")

// maxRedirects is how many same-origin redirects one request may follow
// (net/http's own default).
const maxRedirects = 10

// upstreamTransport is the one connection pool every upstream client
// shares, so dialing a Conn per session does not leak pools.
//
// It bounds what may be bounded without cutting a legitimate exchange:
// dialing and the TLS handshake. It sets no ResponseHeaderTimeout and no
// overall timeout: an upstream in JSON-response mode sends a POST's headers
// only with the tool's result, an event stream may stay silent for as long
// as a tool runs, and a session's GET stream for ever; those end with
// their request's context (a cancellation, the client leaving, Close).
var upstreamTransport = &http.Transport{
	Proxy: http.ProxyFromEnvironment,
	DialContext: (&net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
	}).DialContext,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
	ForceAttemptHTTP2:     true,
	MaxIdleConns:          256,
	// Concurrent calls to one upstream are the normal case: keep enough
	// idle connections that each call does not dial anew.
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
}

// ErrNoCredentials is wrapped by the error of an upstream request that
// never left because Spillway could not get its own credentials for the
// upstream (package upstreamauth: its authorization server failed).
var ErrNoCredentials = errors.New("no credentials for the upstream")

// Transport returns the connection pool every upstream client shares
// (see UpstreamClient), for a transport that wraps it.
func Transport() http.RoundTripper { return upstreamTransport }

// UpstreamClient returns the HTTP client the proxy reaches an upstream MCP
// server with; every upstream client (the relay, the terminating face's and
// the stdio face's httpclient) uses it, so they apply one policy:
//
//   - A redirect is followed only within the request's origin (scheme,
//     host and port): the configured upstream headers (credentials) and the
//     request body never go to another origin. A redirect elsewhere fails
//     the request with ErrCrossOrigin; at most 10 are followed.
//   - Dialing and the TLS handshake are bounded (10 s each); nothing else
//     is (see upstreamTransport): end a request with its context.
//
// base, when not nil, supplies the transport (TLS settings, a test's
// dialer), the cookie jar and any CheckRedirect of its own, which runs
// after the origin rule; base is not modified. nil base means the shared
// transport. The client is safe for concurrent use.
//
// Errors from its Do carry the request URL, query included: pass them
// through RedactError before they reach a log or a client.
func UpstreamClient(base *http.Client) *http.Client {
	c := &http.Client{Transport: upstreamTransport}
	if base != nil {
		c = new(http.Client)
		*c = *base
		if c.Transport == nil {
			c.Transport = upstreamTransport
		}
	}
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !SameOrigin(req.URL, via[0].URL) {
			return fmt.Errorf("%w: to %s", ErrCrossOrigin, RedactURL(req.URL.String()))
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("httpx: stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return c
}

// SameOrigin reports whether a and b have one origin: scheme, host and
// port, with the scheme's default port made explicit.
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// RedactURL is raw fit for a log line or an error message: its userinfo
// and its query, where hosted servers take their keys (…/mcp?key=…), are
// replaced by "redacted", and its fragment dropped. A raw that does not
// parse is not shown at all.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "redacted", false
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// RedactError returns err, an error from http.Client.Do, with the URL
// its *url.Error names redacted (see RedactURL); other errors are
// returned as they are. errors.Is and errors.As see through it as before.
func RedactError(err error) error {
	ue := &url.Error{}
	ok := errors.As(err, &ue)
	if !ok {
		return err
	}
	return &url.Error{Op: ue.Op, URL: RedactURL(ue.URL), Err: ue.Err}
}
