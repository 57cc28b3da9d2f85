package sdk

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// parseDigest returns the lower-case form of an expected SHA-256: exactly
// 64 hex digits, nothing else. Anything else is ErrMalformedDigest, so a
// typo or a prefixed digest ("sha256:...") never turns the check off.
func parseDigest(s string) (string, error) {
	if len(s) != 2*32 {
		return "", fmt.Errorf("%w: %.80q has %d characters, want 64 hex digits", ErrMalformedDigest, s, len(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("%w: %.80q is not hex", ErrMalformedDigest, s)
	}
	return hex.EncodeToString(b), nil
}

// etagDigest returns the SHA-256 a strong ETag carries ("<64 hex>", as
// Spillway sends it), or "" for any other ETag: a weak one, or a storage
// service's MD5 after a redirect.
func etagDigest(etag string) string {
	v, open := strings.CutPrefix(etag, `"`)
	v, closed := strings.CutSuffix(v, `"`)
	if !open || !closed {
		return ""
	}
	d, err := parseDigest(v)
	if err != nil {
		return ""
	}
	return d
}

// retryAfter parses a Retry-After value, delta-seconds or HTTP-date,
// into a wait within [0, limit]; a date in the past waits 0. ok is false
// for an empty or unparsable value.
func retryAfter(v string, now time.Time, limit time.Duration) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v != "" && strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64) // fails only on overflow
		if err != nil || n > int64(limit/time.Second) {
			return limit, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), limit), true
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (the port made explicit), the boundary credentials must not cross.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// port is u's port, or its scheme's default ("" for another scheme).
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}
