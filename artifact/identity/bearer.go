package identity

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxJWTLen bounds an access token Spillway parses as a JWT: far above
// what issuers mint (a few KiB), far below what would cost to decode.
const MaxJWTLen = 16 << 10

// maxJOSEHeader bounds a token's decoded header.
const maxJOSEHeader = 4 << 10

// bearerToken returns the token of the single "Authorization: Bearer"
// header values holds; ok is false with no such header. The token is
// returned as sent, surrounding spaces removed, and is not checked.
func bearerToken(values []string) (tok string, ok bool) {
	if len(values) != 1 {
		return "", false
	}
	scheme, rest, found := strings.Cut(values[0], " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(rest)
	return tok, tok != ""
}

// joseHeader is what Spillway reads of a JWS header before it picks a key:
// the algorithm the token claims and the id of the key that signed it.
type joseHeader struct {
	alg string
	kid string
}

// parseCompactJWS checks that tok is a compact JWS (three base64url parts
// without padding, RFC 7515 §7.1) no longer than MaxJWTLen, and returns
// its header's alg and kid. It refuses a header that is not a JSON object,
// lacks a string alg, names a member twice (so no other parser can read a
// different alg than this one) or gives kid as a non-string. It never
// verifies anything: the signature is checked by jwx with the key this
// header selects, and the algorithm must be one the caller allows.
func parseCompactJWS(tok string) (joseHeader, error) {
	if len(tok) > MaxJWTLen {
		return joseHeader{}, errors.New("token too long")
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return joseHeader{}, errors.New("not a compact JWS")
	}
	for _, p := range parts {
		if !base64url(p) {
			return joseHeader{}, errors.New("not base64url")
		}
	}
	if parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return joseHeader{}, errors.New("empty part")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(raw) > maxJOSEHeader {
		return joseHeader{}, errors.New("bad header encoding")
	}
	return parseJOSEHeader(raw)
}

// parseJOSEHeader reads alg and kid of a JSON header object, refusing
// duplicate member names.
func parseJOSEHeader(raw []byte) (joseHeader, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return joseHeader{}, errors.New("header is not a JSON object")
	}
	var h joseHeader
	seen := map[string]bool{}
	hasAlg := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return joseHeader{}, errors.New("bad header JSON")
		}
		name, _ := t.(string)
		if seen[name] {
			return joseHeader{}, fmt.Errorf("header member %q twice", name)
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return joseHeader{}, errors.New("bad header JSON")
		}
		switch name {
		case "alg":
			hasAlg = json.Unmarshal(v, &h.alg) == nil
		case "kid":
			if json.Unmarshal(v, &h.kid) != nil {
				return joseHeader{}, errors.New("kid is not a string")
			}
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return joseHeader{}, errors.New("bad header JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return joseHeader{}, errors.New("data after the header object")
	}
	if !hasAlg || h.alg == "" {
		return joseHeader{}, errors.New("header has no alg")
	}
	return h, nil
}

// base64url reports whether s is made of the unpadded base64url alphabet.
func base64url(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
