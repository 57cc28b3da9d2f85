package upstreamauth

import (
	"io"
	"net/http"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
)

// Transport returns an http.RoundTripper that sends each request through
// base (nil: the upstream clients' shared pool, httpx.Transport) with
// Authorization: Bearer and the Source's token, in place of any
// Authorization the request had. A request that cannot get a token fails
// with the Source's error (wrapping ErrToken), without reaching the
// upstream.
//
// When the upstream answers 401 to a token that is old enough (see
// invalidate), the token is dropped; the request is sent once more with a
// fresh one when its body can be sent again (no body, or GetBody set),
// and otherwise the 401 is returned (the next request gets the fresh
// token). The returned RoundTripper is safe for concurrent use.
func (s *Source) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = httpx.Transport()
	}
	return &transport{s: s, base: base}
}

type transport struct {
	s    *Source
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.s.Token(req.Context())
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // as RoundTrip must, even on an error
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(withToken(req, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !t.s.invalidate(tok) || !replayable(req) {
		return resp, err
	}
	fresh, err := t.s.Token(req.Context())
	if err != nil || fresh == tok {
		return resp, nil // the 401 stands: the client is told of the refusal
	}
	again := withToken(req, fresh)
	if req.Body != nil && req.Body != http.NoBody {
		if again.Body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	drain(resp)
	return t.base.RoundTrip(again)
}

// withToken is req, cloned, with Authorization: Bearer tok. The clone
// shares req's body.
func withToken(req *http.Request, tok string) *http.Request {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// drain reads a little of resp's body, so its connection may be reused,
// and closes it.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
}
