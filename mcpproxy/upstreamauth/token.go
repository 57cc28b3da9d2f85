package upstreamauth

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
)

// maxTokenResponse bounds the token endpoint's response body: a token
// response is a few kilobytes at most (a JWT access token and its
// metadata), and the endpoint is not trusted to be small.
const maxTokenResponse = 64 << 10

// defaultLifetime is how long a token whose response gives no
// expires_in is kept (RFC 6749 5.1 only recommends the field); an
// upstream that refuses it sooner gets a fresh one (see Transport).
const defaultLifetime = 5 * time.Minute

// tokenResponse is the fields of an RFC 6749 5.1 access token response
// (or 5.2 error response) that Spillway reads.
type tokenResponse struct {
	AccessToken string          `json:"access_token"`
	TokenType   string          `json:"token_type"`
	ExpiresIn   json.RawMessage `json:"expires_in"`
	Error       string          `json:"error"`
}

// parseTokenResponse reads a token endpoint's answer of HTTP status
// status: the access token and its lifetime. The errors it returns never
// hold the token, and quote no more of the body than an RFC 6749 error
// code, cleaned (see errorCode).
func parseTokenResponse(status int, body []byte) (token string, lifetime time.Duration, err error) {
	var r tokenResponse
	jerr := json.Unmarshal(body, &r)
	if status != 200 {
		if jerr == nil && r.Error != "" {
			return "", 0, fmt.Errorf("%w: the token endpoint answered %d, error %q", ErrToken, status, errorCode(r.Error))
		}
		return "", 0, fmt.Errorf("%w: the token endpoint answered %d", ErrToken, status)
	}
	if jerr != nil {
		return "", 0, fmt.Errorf("%w: the token endpoint's answer is not a JSON object", ErrToken)
	}
	if r.AccessToken == "" {
		return "", 0, fmt.Errorf("%w: the token endpoint's answer has no access_token", ErrToken)
	}
	if !validToken(r.AccessToken) {
		return "", 0, fmt.Errorf("%w: the token endpoint's access_token is not fit for a header", ErrToken)
	}
	if !strings.EqualFold(r.TokenType, "Bearer") {
		return "", 0, fmt.Errorf("%w: the token endpoint's token_type is %q, not Bearer", ErrToken, errorCode(r.TokenType))
	}
	lifetime, err = expiresIn(r.ExpiresIn)
	if err != nil {
		return "", 0, err
	}
	return r.AccessToken, lifetime, nil
}

// expiresIn reads expires_in: seconds as a JSON number, or as a string
// of digits (which some servers send); absent or null is defaultLifetime.
func expiresIn(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return defaultLifetime, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("%w: the token endpoint's expires_in is not a number", ErrToken)
	}
	secs, err := n.Float64()
	if err != nil || secs <= 0 || secs > maxLifetime.Seconds() {
		return 0, fmt.Errorf("%w: the token endpoint's expires_in is out of range", ErrToken)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// maxLifetime caps how long a token is kept, whatever expires_in says.
const maxLifetime = 24 * time.Hour

// validToken reports whether tok may go in an Authorization header: the
// RFC 6750 b64token characters, plus any other printable ASCII but
// space (servers are lenient; a line break or a control byte would
// split or corrupt the header).
func validToken(tok string) bool {
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return false
		}
	}
	return len(tok) <= maxTokenResponse
}

// errorCode is s fit for an error message: at most 40 characters of the
// RFC 6749 error code alphabet (printable ASCII without '"' and '\').
func errorCode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 40; i++ {
		if c := s[i]; c >= ' ' && c <= '~' && c != '"' && c != '\\' {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ErrToken is wrapped by every error of a failed token fetch: the token
// endpoint unreachable, refusing the client, or answering what is not a
// Bearer access token. Its messages never hold the client secret or a
// token. It wraps httpx.ErrNoCredentials, which the faces recognize.
var ErrToken = fmt.Errorf("upstreamauth: %w", httpx.ErrNoCredentials)
