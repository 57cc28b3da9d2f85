package identity

import (
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Errors of Guard.Check. Their messages are safe to show to the client;
// every face answers them with 403.
var (
	// ErrHost is returned when the Host header names a host that is not
	// this server's: a page on a name that resolves to this server (DNS
	// rebinding) must not reach it.
	ErrHost = errors.New("identity: Host header not allowed")
	// ErrOrigin is returned when a browser's Origin is neither this
	// server's nor an allowed one.
	ErrOrigin = errors.New("identity: Origin not allowed")
	// ErrCrossSite is returned when a state-changing request says it comes
	// from another site (Sec-Fetch-Site), or is a POST that a page of
	// another site could send without a CORS preflight: one with no
	// Authorization header, no X-Spillway-* header and a Content-Type of
	// text/plain, a form or none.
	ErrCrossSite = errors.New("identity: cross-site request refused; send an Authorization header, " +
		"an X-Spillway-* header or a Content-Type other than text/plain, form or multipart")
)

// Guard checks where a request comes from, for every route but the link
// endpoint. The zero value (and a nil *Guard) accepts Host names that are
// IP literals or "localhost", and browser Origins whose host is the
// request's Host. Its fields must not change once it is in use; it is then
// safe for concurrent use.
type Guard struct {
	// Hosts are further accepted Host names, with or without a port
	// (e.g. the host of the public URL); "*" accepts any Host.
	Hosts []string
	// Origins are further accepted browser Origins, compared exactly
	// (case-insensitively), e.g. "https://app.example.com". A state-changing
	// request from one of them is not refused as cross-site.
	Origins []string
}

// Check returns nil when r may proceed: its Host is allowed, its Origin
// (when a browser sent one) is allowed, and, unless its method is safe
// (GET, HEAD, OPTIONS), it is not a request another site's page could
// have made (see ErrCrossSite). Otherwise it returns ErrHost, ErrOrigin or
// ErrCrossSite.
func (g *Guard) Check(r *http.Request) error {
	if !g.hostAllowed(r.Host) {
		return ErrHost
	}
	origin := r.Header.Get("Origin")
	listed := origin != "" && g.originListed(origin)
	if origin != "" && !listed {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return ErrOrigin
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" && !listed {
		return ErrCrossSite
	}
	// PUT, DELETE and the rest always need a preflight, which nothing here
	// answers; a POST needs one only when it is not "simple".
	if r.Method == http.MethodPost && simple(r.Header) {
		return ErrCrossSite
	}
	return nil
}

// simple reports whether a browser may send a POST with these headers
// cross-site without asking first (the Fetch standard's CORS-safelisted
// requests), as far as the headers Spillway's callers use tell.
func simple(h http.Header) bool {
	if len(h.Values("Authorization")) > 0 {
		return false
	}
	for k := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Spillway-") {
			return false
		}
	}
	ct := h.Values("Content-Type")
	if len(ct) == 0 {
		return true
	}
	if ct[0] == "application/json" {
		// Every MCP client sends this on every message, so it is answered
		// without parsing, which would cost an allocation and a lowercased
		// copy.
		return false
	}
	mt, _, err := mime.ParseMediaType(ct[0])
	if err != nil {
		return true // a browser sends what the page wrote; assume the worst
	}
	switch mt {
	case "text/plain", "application/x-www-form-urlencoded", "multipart/form-data":
		return true
	}
	return false
}

// hostAllowed reports whether host (a Host header, maybe with a port) is
// listed in g.Hosts, "localhost" or an IP literal.
func (g *Guard) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	if g != nil {
		for _, h := range g.Hosts {
			if h == "*" || strings.EqualFold(h, host) || strings.EqualFold(h, name) {
				return true
			}
		}
	}
	if strings.EqualFold(name, "localhost") {
		return true
	}
	// An IP literal is safe: rebinding needs a DNS name the attacker owns.
	_, err := netip.ParseAddr(strings.Trim(name, "[]"))
	return err == nil
}

// originListed reports whether origin is one of g.Origins.
func (g *Guard) originListed(origin string) bool {
	if g == nil {
		return false
	}
	for _, o := range g.Origins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}
