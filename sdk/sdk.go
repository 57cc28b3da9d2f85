// Package sdk is the Go client of a Spillway artifact service: upload
// bytes and get a resource_link with a signed httpUrl, mint fresh links
// (narrowed to a network, to HEAD, to an audience), revoke one link,
// delete artifacts, and fetch links with size and SHA-256 checks and
// Range resumption. It uses only the standard library.
//
// What Fetch checks: the size, and the SHA-256 the caller passes
// (FetchOptions.SHA256, from the link's _meta["dev.spillway/sha256"]).
// Without one it falls back to the ETag when that is a SHA-256, as
// Spillway's own answers are; after a redirect to storage (--redirect) the
// ETag is the store's MD5, so no checksum is checked at all. Pass the
// link's digest (Client.FetchBytes does), or set FetchOptions.RequireSHA256
// to refuse a fetch that could not be checked.
//
//	c := &sdk.Client{BaseURL: "http://127.0.0.1:8080", Token: os.Getenv("SPILLWAY_TOKEN")}
//	link, err := c.Upload(ctx, f, sdk.UploadOptions{Name: "report.pdf", MimeType: "application/pdf"})
//	...
//	n, err := sdk.Fetch(ctx, nil, link.HTTPURL, w, sdk.FetchOptions{SHA256: link.SHA256, ExpiresAt: link.ExpiresAt})
package sdk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Errors a fetch or an API call may wrap; test with errors.Is.
var (
	ErrExpired         = errors.New("spillway: link or artifact expired")
	ErrDenied          = errors.New("spillway: access denied")
	ErrNotFound        = errors.New("spillway: not found")
	ErrIntegrity       = errors.New("spillway: content does not match its size or checksum")
	ErrUnavailable     = errors.New("spillway: service unavailable")
	ErrUnauthenticated = errors.New("spillway: missing or unknown token")
	ErrTooLarge        = errors.New("spillway: too large")
	// ErrInvalid is returned when the service refuses a request as
	// malformed (HTTP 400): a bad TTL, CIDR, method or token id.
	ErrInvalid = errors.New("spillway: invalid request")
	// ErrRevocationLimit is returned by Revoke when the artifact, or its
	// tenant, has as many revoked links as the service keeps (HTTP 409
	// "revocation_limit"): delete the artifact instead.
	ErrRevocationLimit = errors.New("spillway: too many revoked links")
	// ErrMalformedDigest is returned, before any request, when an expected
	// SHA-256 is not exactly 64 hex digits.
	ErrMalformedDigest = errors.New("spillway: malformed SHA-256 digest")
	// ErrNoDigest is returned, before any request, when a fetch must be
	// checked (FetchOptions.RequireSHA256, Client.FetchBytes) and no
	// expected SHA-256 is known.
	ErrNoDigest = errors.New("spillway: no expected SHA-256 to check against")
)

// Error is an answer of the service that was not a success. Code is the
// service's stable error code ("expired", "forbidden", ...). RetryAfter is
// the wait the answer's Retry-After asked for (delta-seconds or
// HTTP-date, at most an hour), 0 when it had none.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
}

// Error says the status, the code and the service's message.
func (e *Error) Error() string {
	return fmt.Sprintf("spillway: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// Is maps the HTTP status to the package's sentinels.
func (e *Error) Is(target error) bool {
	switch e.Status {
	case http.StatusGone:
		return target == ErrExpired
	case http.StatusForbidden:
		return target == ErrDenied
	case http.StatusNotFound:
		return target == ErrNotFound
	case http.StatusUnauthorized:
		return target == ErrUnauthenticated
	case http.StatusRequestEntityTooLarge:
		return target == ErrTooLarge
	case http.StatusBadRequest:
		return target == ErrInvalid
	case http.StatusConflict:
		return target == ErrRevocationLimit && e.Code == "revocation_limit"
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return target == ErrUnavailable
	}
	return false
}

// errorFrom reads the service's error answer resp into an *Error: the
// code and message of its JSON body (the first 64 KiB), and its
// Retry-After.
func errorFrom(resp *http.Response) error {
	var body struct{ Code, Message string }
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	json.Unmarshal(b, &body)
	wait, _ := retryAfter(resp.Header.Get("Retry-After"), time.Now(), maxRetryAfter)
	return &Error{Status: resp.StatusCode, Code: body.Code, Message: body.Message, RetryAfter: wait}
}

// maxRetryAfter bounds what a server's Retry-After can make anyone wait.
const maxRetryAfter = time.Hour

// Link is a resource_link as the service returns it.
type Link struct {
	URI       string    `json:"uri"`
	Name      string    `json:"name"`
	MimeType  string    `json:"mimeType,omitempty"`
	Size      int64     `json:"size"`
	HTTPURL   string    `json:"httpUrl"`
	ExpiresAt time.Time `json:"httpUrlExpiresAt"`
	SHA256    string    `json:"-"` // from _meta["dev.spillway/sha256"]
	// TokenID names this link among the artifact's links, for
	// Client.Revoke: from _meta["dev.spillway/tokenId"]. It is no secret
	// and authorises nothing; "" when the service sent none.
	TokenID    string `json:"-"`
	Streamable bool   `json:"streamable,omitempty"`
}

// MetaSHA256 is the _meta key of a link's SHA-256.
const MetaSHA256 = "dev.spillway/sha256"

// MetaTokenID is the _meta key of a link's token id.
const MetaTokenID = "dev.spillway/tokenId"

// UnmarshalJSON reads a resource_link, its _meta checksum and token id
// included.
func (l *Link) UnmarshalJSON(b []byte) error {
	type plain Link
	var w struct {
		plain
		Meta map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*l = Link(w.plain)
	l.SHA256, _ = w.Meta[MetaSHA256].(string)
	l.TokenID, _ = w.Meta[MetaTokenID].(string)
	return nil
}

// ID is the artifact id of the link (the last part of its URI).
func (l Link) ID() string { return l.URI[strings.LastIndexByte(l.URI, '/')+1:] }

// Client talks to one Spillway service. The zero value is not usable:
// set BaseURL. Safe for concurrent use. Token is sent to BaseURL's origin
// only: a redirect to another scheme, host or port drops it.
type Client struct {
	BaseURL string       // e.g. http://127.0.0.1:8080
	Token   string       // an inbound token of --auth-tokens; "" when auth is off
	HTTP    *http.Client // nil: http.DefaultClient
}

// http is c.HTTP, or http.DefaultClient when it is nil.
func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// apiClient is the caller's client with its redirect policy wrapped:
// net/http keeps Authorization on a redirect to the same host on another
// port, or to a subdomain; the token belongs to one origin.
func (c *Client) apiClient() *http.Client {
	hc := *c.http()
	next := hc.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(req.URL, via[0].URL) {
			req.Header.Del("Authorization")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 { // net/http's default policy
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &hc
}

// do sends an API request with the client's token and decodes the JSON
// answer into out (unless nil) when its status is want; any other status
// is the service's *Error, and a request that got no answer
// ErrUnavailable.
func (c *Client) do(req *http.Request, want int, out any) error {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.apiClient().Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return errorFrom(resp)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// url is the API URL of path, with the query q.
func (c *Client) url(path string, q url.Values) string {
	u := strings.TrimSuffix(c.BaseURL, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// UploadOptions describe an upload. All fields are optional.
type UploadOptions struct {
	Name     string           // the artifact's name, shown in its link
	MimeType string           // default application/octet-stream
	TTL      time.Duration    // 0: the service's default
	Size     int64            // when known: sent as Content-Length, checked by the service
	SHA256   string           // when known: checked by the service before any link exists
	Progress func(sent int64) // when set: called with the bytes sent so far, after each read of r
}

// Upload streams r to the service and returns the link to the stored
// artifact. The artifact is durable, size and checksum verified, before
// the link exists.
func (c *Client) Upload(ctx context.Context, r io.Reader, o UploadOptions) (Link, error) {
	q := url.Values{}
	if o.TTL > 0 {
		q.Set("ttl", o.TTL.String())
	}
	if o.Progress != nil {
		r = &progressReader{r: r, f: o.Progress}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url("/v1/artifacts", q), r)
	if err != nil {
		return Link{}, err
	}
	if o.Size > 0 {
		req.ContentLength = o.Size
	}
	mt := o.MimeType
	if mt == "" {
		mt = "application/octet-stream"
	}
	req.Header.Set("Content-Type", mt)
	if o.Name != "" {
		req.Header.Set("X-Spillway-Name", o.Name)
	}
	if o.SHA256 != "" {
		req.Header.Set("X-Spillway-SHA256", o.SHA256)
	}
	var l Link
	err = c.do(req, http.StatusCreated, &l)
	return l, err
}

// Mint returns a fresh link to an artifact the caller's tenant owns, valid
// for ttl (0: the service's default); the mint policy may shorten it, so
// read the link's ExpiresAt. It is MintWith with only a TTL.
func (c *Client) Mint(ctx context.Context, id string, ttl time.Duration) (Link, error) {
	return c.MintWith(ctx, id, MintOptions{TTL: ttl})
}

// MintOptions narrow a link MintWith asks for. The zero value asks for a
// GET link with the service's default lifetime, bound to nothing the mint
// policy does not require.
type MintOptions struct {
	// TTL is the link's lifetime; 0: the service's default. The mint
	// policy may shorten it: read the link's ExpiresAt.
	TTL time.Duration
	// CIDR binds the link to the clients of one network (192.0.2.7/32 for
	// one address): a fetch from anywhere else is refused with 403. The
	// zero Prefix binds it to none. A policy's require_cidr narrows or
	// refuses it, never widens it.
	CIDR netip.Prefix
	// HeadOnly mints a link that answers HEAD only (size, type, checksum),
	// never the bytes: a GET with it is refused with 403.
	HeadOnly bool
	// Audience is written into the link and given to the access policy as
	// the token's audience; what it binds is the policy's to decide.
	Audience string
}

// MintWith returns a fresh link to an artifact the caller's tenant owns,
// narrowed as o says. Errors: ErrNotFound for an artifact that is not the
// caller's tenant's (or does not exist), ErrDenied when the mint policy
// refuses, ErrInvalid for a request the service finds malformed, and the
// service's other *Error answers; ErrUnavailable when it cannot be
// reached.
func (c *Client) MintWith(ctx context.Context, id string, o MintOptions) (Link, error) {
	var body struct {
		TTL      string `json:"ttl,omitempty"`
		CIDR     string `json:"cidr,omitempty"`
		Method   string `json:"method,omitempty"`
		Audience string `json:"audience,omitempty"`
	}
	if o.TTL > 0 {
		body.TTL = o.TTL.String()
	}
	if o.CIDR.IsValid() {
		body.CIDR = o.CIDR.String()
	}
	if o.HeadOnly {
		body.Method = http.MethodHead
	}
	body.Audience = o.Audience
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(artifactPath(id)+"/links", nil), bytes.NewReader(b))
	if err != nil {
		return Link{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	var l Link
	err = c.do(req, http.StatusCreated, &l)
	return l, err
}

// Revoke makes one link to an artifact the caller's tenant owns stop
// working, named by its token id (Link.TokenID); the artifact and its
// other links live on. The service applies it on every replica within
// its revocation delay, until the artifact expires. A token id of
// another artifact's link revokes nothing, and revoking an unknown or
// already revoked token id is not an error: the service tells no token
// id's existence. Errors: ErrNotFound for an artifact that is not the
// caller's tenant's, ErrInvalid for a malformed token id,
// ErrRevocationLimit past the service's bounds on revoked links (per
// artifact and per tenant), the service's other *Error answers,
// ErrUnavailable when it cannot be reached.
func (c *Client) Revoke(ctx context.Context, id, tokenID string) error {
	if tokenID == "" {
		return fmt.Errorf("revoke: no token id (the link's %s): %w", MetaTokenID, ErrInvalid)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url(artifactPath(id)+"/links/"+url.PathEscape(tokenID), nil), nil)
	if err != nil {
		return err
	}
	return c.do(req, http.StatusNoContent, nil)
}

// artifactPath is the API path of the artifact id.
func artifactPath(id string) string { return "/v1/artifacts/" + url.PathEscape(id) }

// Delete deletes an artifact; every link to it stops working.
func (c *Client) Delete(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url(artifactPath(id), nil), nil)
	if err != nil {
		return err
	}
	return c.do(req, http.StatusNoContent, nil)
}

// FetchOptions are checks and knobs of Fetch. All fields are optional.
type FetchOptions struct {
	ExpiresAt time.Time // httpUrlExpiresAt: an expired link is refused without a request
	// SHA256 is the expected checksum, 64 hex digits: the link's
	// _meta["dev.spillway/sha256"]. Anything else is refused before any
	// request with ErrMalformedDigest. Empty: the response's ETag when it
	// is a SHA-256 (Spillway's are; a storage redirect's are not), else no
	// checksum check.
	SHA256 string
	// RequireSHA256 refuses, with ErrNoDigest before any request, a fetch
	// without SHA256: the ETag comes from the same server as the bytes.
	RequireSHA256 bool
	Size          int64 // expected size; 0: Content-Length
	// Retries bounds resumptions after a broken connection and retries of
	// a 502, 503 or 504 answer; default 5.
	Retries int
	// MaxRetryWait caps the pause before a retry, whatever the server's
	// Retry-After asks (delta-seconds or HTTP-date); default 10s.
	MaxRetryWait time.Duration
	// Progress, when set, is called after each write to w with the bytes
	// written so far and the artifact's size (-1 while unknown).
	Progress func(done, total int64)
}

// Fetch streams the link at url to w and returns the bytes written. It
// checks size and SHA-256 (see FetchOptions.SHA256 for which), resumes
// with Range (and If-Range on the ETag) when the connection breaks, and
// retries an unavailable service after its Retry-After. hc nil means
// http.DefaultClient. Errors: ErrMalformedDigest, ErrNoDigest, ErrExpired
// before any request; ErrIntegrity; the service's *Error; ErrUnavailable.
func Fetch(ctx context.Context, hc *http.Client, url string, w io.Writer, o FetchOptions) (int64, error) {
	if err := o.prepare(); err != nil {
		return 0, err
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	retries, maxWait := o.retryLimits()
	h := sha256.New()
	var done, total int64 = 0, -1
	etag := ""
	for attempt := 0; ; attempt++ {
		n, err := fetchOnce(ctx, hc, url, io.MultiWriter(w, h), done, &etag, &total, o.Progress)
		done += n
		if err == nil {
			break
		}
		if errors.Is(err, errRangeShort) {
			attempt-- // not a failure: each such answer brings at least a byte
			continue
		}
		if ctx.Err() != nil || attempt >= retries {
			return done, err
		}
		wait, ok := retryWait(err, attempt, maxWait)
		if !ok {
			return done, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return done, ctx.Err()
		}
	}
	return done, verify(h, done, total, etag, o)
}

// prepare checks o before any request is sent: the digest, when given, is
// well-formed (and is kept in its canonical form), one is given when
// RequireSHA256 is set, and the link has not expired.
func (o *FetchOptions) prepare() error {
	var err error
	if o.SHA256 != "" {
		if o.SHA256, err = parseDigest(o.SHA256); err != nil {
			return err
		}
	} else if o.RequireSHA256 {
		return fmt.Errorf("%w: pass the link's %s", ErrNoDigest, MetaSHA256)
	}
	if !o.ExpiresAt.IsZero() && !time.Now().Before(o.ExpiresAt) {
		return fmt.Errorf("link expired at %s: %w", o.ExpiresAt.Format(time.RFC3339), ErrExpired)
	}
	return nil
}

// retryLimits is o's Retries and MaxRetryWait, with their defaults.
func (o *FetchOptions) retryLimits() (retries int, maxWait time.Duration) {
	retries, maxWait = o.Retries, o.MaxRetryWait
	if retries == 0 {
		retries = 5
	}
	if maxWait <= 0 {
		maxWait = 10 * time.Second
	}
	return retries, maxWait
}

// retryWait says whether a failed attempt (the attempt-th, from 0) is
// worth another, and after how long: a broken connection is retried after
// a pause that doubles from 50 ms, an unavailable service after its
// Retry-After; neither waits past maxWait. A failed integrity check or
// any other answer of the service is final.
func retryWait(err error, attempt int, maxWait time.Duration) (time.Duration, bool) {
	if errors.Is(err, ErrIntegrity) {
		return 0, false
	}
	wait := min(time.Duration(50<<min(attempt, 16))*time.Millisecond, maxWait)
	if se := (*Error)(nil); errors.As(err, &se) {
		if !errors.Is(se, ErrUnavailable) {
			return 0, false
		}
		if se.RetryAfter > 0 {
			wait = min(se.RetryAfter, maxWait)
		}
	}
	return wait, true
}

// fetchOnce sends one GET for the bytes of url from offset from on (a
// Range request, If-Range on etag, once some arrived) and copies what it
// answers to w, returning how many bytes it wrote. It keeps the response's
// ETag in *etag and the artifact's size, once known, in *total (-1 until
// then). An answer that does not fit what was asked or announced is
// ErrIntegrity; a broken connection is ErrUnavailable; a 206 that ends
// before the artifact does is errRangeShort.
func fetchOnce(ctx context.Context, hc *http.Client, url string, w io.Writer, from int64, etag *string, total *int64, progress func(int64, int64)) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if from > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(from, 10)+"-")
		if *etag != "" {
			req.Header.Set("If-Range", *etag)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	end, err := checkAnswer(resp, from, total)
	if err != nil {
		return 0, err
	}
	if e := resp.Header.Get("ETag"); e != "" {
		*etag = e
	}
	body := io.Reader(resp.Body)
	if end >= 0 { // one byte past the end shows a body longer than announced
		body = io.LimitReader(resp.Body, end-from+1)
	}
	return copyBody(w, body, from, end, *total, progress)
}

// checkAnswer checks that resp answers a request for the bytes from offset
// from on: a 200 to a request from 0, a 206 whose Content-Range starts at
// from and agrees with *total otherwise. It sets *total to the artifact's
// size as announced (-1 when not) and returns the offset the body ends at
// (-1 when not announced).
func checkAnswer(resp *http.Response, from int64, total *int64) (end int64, err error) {
	switch {
	case resp.StatusCode == http.StatusOK && from == 0:
		*total = resp.ContentLength
		return *total, nil
	case resp.StatusCode == http.StatusPartialContent && from > 0:
		cr := resp.Header.Get("Content-Range")
		start, last, size, ok := contentRange(cr)
		if !ok || start != from || (*total >= 0 && size != *total) || (resp.ContentLength >= 0 && resp.ContentLength != last-start+1) {
			return -1, fmt.Errorf("asked for bytes %d-, got %q with %d bytes: %w", from, cr, resp.ContentLength, ErrIntegrity)
		}
		*total = size
		return last + 1, nil
	case resp.StatusCode == http.StatusPartialContent:
		return -1, fmt.Errorf("a 206 (%s) to a request for the whole artifact: %w", resp.Header.Get("Content-Range"), ErrIntegrity)
	case resp.StatusCode == http.StatusOK:
		// The bytes already written cannot be taken back.
		return -1, fmt.Errorf("the artifact changed during the download: %w", ErrIntegrity)
	default:
		return -1, errorFrom(resp)
	}
}

// copyBody copies body, the bytes of an artifact of total bytes (-1:
// unknown) from offset from on, to w, and reports progress after each
// write. end is the offset the body should end at (-1: not announced): a
// body that goes past it is ErrIntegrity, one that ends before it
// ErrUnavailable (the connection broke), and one that ends before total
// errRangeShort.
func copyBody(w io.Writer, body io.Reader, from, end, total int64, progress func(int64, int64)) (int64, error) {
	var n int64
	buf := make([]byte, 256<<10)
	for {
		k, rerr := body.Read(buf)
		if end >= 0 && from+n+int64(k) > end {
			return n, fmt.Errorf("more bytes than the %d announced: %w", end, ErrIntegrity)
		}
		if k > 0 {
			if _, err := w.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
			if progress != nil {
				progress(from+n, total)
			}
		}
		if rerr == io.EOF {
			switch {
			case end >= 0 && from+n < end:
				return n, fmt.Errorf("%w: connection closed at %d of %d bytes", ErrUnavailable, from+n, total)
			case total >= 0 && from+n < total: // a 206 whose range ends early
				return n, errRangeShort
			}
			return n, nil
		}
		if rerr != nil {
			return n, fmt.Errorf("%w: %w", ErrUnavailable, rerr)
		}
	}
}

// errRangeShort is fetchOnce's answer when a 206 brought its whole range,
// shorter than asked: the rest is asked for at once, with no retry spent.
var errRangeShort = errors.New("the server sent a shorter range than asked")

// contentRange parses "bytes START-END/SIZE" strictly: digits only and
// START <= END < SIZE, so a confused server cannot move the resume point.
func contentRange(s string) (start, end, size int64, ok bool) {
	s, ok = strings.CutPrefix(s, "bytes ")
	r, sz, ok2 := strings.Cut(s, "/")
	a, b, ok3 := strings.Cut(r, "-")
	if !ok || !ok2 || !ok3 {
		return 0, 0, 0, false
	}
	start, ok = digits(a)
	end, ok2 = digits(b)
	size, ok3 = digits(sz)
	return start, end, size, ok && ok2 && ok3 && start <= end && end < size
}

// digits parses a non-negative decimal number without sign or spaces.
func digits(s string) (int64, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// verify checks a whole download of done bytes whose SHA-256 is in h: its
// size against o.Size and the size the server announced (total, -1 if
// none), and its digest against o.SHA256 or, without one, the digest the
// ETag carries (none for a weak or foreign ETag). A mismatch is
// ErrIntegrity.
func verify(h hash.Hash, done, total int64, etag string, o FetchOptions) error {
	if o.Size > 0 && done != o.Size {
		return fmt.Errorf("got %d bytes, want %d: %w", done, o.Size, ErrIntegrity)
	}
	if total >= 0 && done != total {
		return fmt.Errorf("got %d bytes, the server announced %d: %w", done, total, ErrIntegrity)
	}
	want := o.SHA256 // checked by Fetch: 64 lower-case hex digits or ""
	if want == "" {
		want = etagDigest(etag)
	}
	if got := hex.EncodeToString(h.Sum(nil)); want != "" && got != want {
		return fmt.Errorf("sha256 %s, want %s: %w", got, want, ErrIntegrity)
	}
	return nil
}

// Fetch is the package-level Fetch with the client's HTTP client.
func (c *Client) Fetch(ctx context.Context, url string, w io.Writer, o FetchOptions) (int64, error) {
	return Fetch(ctx, c.HTTP, url, w, o)
}

// FetchBytes fetches a link into memory; for small artifacts. The bytes
// must match the link's own SHA256: a link without one is refused with
// ErrNoDigest before any request.
func (c *Client) FetchBytes(ctx context.Context, l Link) ([]byte, error) {
	var b bytes.Buffer
	_, err := Fetch(ctx, c.HTTP, l.HTTPURL, &b, FetchOptions{ExpiresAt: l.ExpiresAt, SHA256: l.SHA256, RequireSHA256: true, Size: l.Size})
	return b.Bytes(), err
}

// progressReader reports to f the bytes read from r so far, after each
// read that returned some.
type progressReader struct {
	r io.Reader
	n int64
	f func(int64)
}

// Read reads from r and reports the progress.
func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if n > 0 {
		p.f(p.n)
	}
	return n, err
}
