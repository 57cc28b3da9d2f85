package identity

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func TestParseCompactJWS(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		tok, alg, kid, wantErr string
	}{
		{enc(`{"alg":"ES256","kid":"k1","typ":"at+jwt"}`) + ".e30.c2ln", "ES256", "k1", ""},
		{enc(`{"alg":"RS256"}`) + ".e30.c2ln", "RS256", "", ""},
		{enc(`{"alg":"none"}`) + ".e30.", "", "", "empty part"},
		{enc(`{"kid":"k1"}`) + ".e30.c2ln", "", "", "no alg"},
		{enc(`{"alg":7}`) + ".e30.c2ln", "", "", "no alg"},
		{enc(`{"alg":"ES256","kid":1}`) + ".e30.c2ln", "", "", "kid is not a string"},
		{enc(`{"alg":"ES256","alg":"none"}`) + ".e30.c2ln", "", "", "twice"},
		{enc(`{"alg":"ES256"} {}`) + ".e30.c2ln", "", "", "data after"},
		{enc(`["alg"]`) + ".e30.c2ln", "", "", "not a JSON object"},
		{enc(`{"alg":"ES256"}`) + "=.e30.c2ln", "", "", "base64url"},
		{"a.b", "", "", "compact"},
		{"a.b.c.d.e", "", "", "compact"},
		{strings.Repeat("a", MaxJWTLen) + ".b.c", "", "", "too long"},
	}
	for _, tt := range tests {
		h, err := parseCompactJWS(tt.tok)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%.40s: err %v, want %q", tt.tok, err, tt.wantErr)
			}
			continue
		}
		if err != nil || h.alg != tt.alg || h.kid != tt.kid {
			t.Errorf("%.40s: %+v, %v", tt.tok, h, err)
		}
	}
}

func TestBearerToken(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
		ok   bool
	}{
		{[]string{"Bearer abc"}, "abc", true},
		{[]string{"bearer  abc "}, "abc", true},
		{[]string{"Bearer"}, "", false},
		{[]string{"Bearer  "}, "", false},
		{[]string{"Basic abc"}, "", false},
		{[]string{"Bearer a", "Bearer b"}, "", false},
		{nil, "", false},
	} {
		if got, ok := bearerToken(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("%q: %q %v", tt.in, got, ok)
		}
	}
}

// FuzzParseCompactJWS: the header parser never panics, and what it
// accepts is three base64url parts whose first is a JSON object with
// that alg and kid.
func FuzzParseCompactJWS(f *testing.F) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, s := range []string{
		enc(`{"alg":"ES256","kid":"k1"}`) + ".e30.c2ln",
		enc(`{"alg":"none"}`) + ".e30.",
		enc(`{"alg":"ES256","alg":"HS256"}`) + ".e30.c2ln",
		enc(`{"alg":"ES256","ALG":"none"}`) + ".e30.c2ln",
		enc(`{"alg":"ES256","kid":null}`) + ".e30.c2ln",
		enc(`{"alg":"\u0045S256"}`) + ".e30.c2ln",
		enc(`{"alg":"ES256"`) + ".e30.c2ln",
		enc(`{"alg":"ES256",}`) + ".e30.c2ln",
		enc(`{}`) + ".e30.c2ln", "...", "a.b.c", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		h, err := parseCompactJWS(tok)
		if err != nil {
			return
		}
		parts := strings.Split(tok, ".")
		if len(parts) != 3 || h.alg == "" {
			t.Fatalf("accepted %q as %+v", tok, h)
		}
		raw, err := base64.RawURLEncoding.DecodeString(parts[0])
		if err != nil {
			t.Fatalf("accepted a header that is not base64url: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("accepted a header that is not a JSON object: %v", err)
		}
		if m["alg"] != h.alg {
			t.Fatalf("alg %q, but the JSON says %v", h.alg, m["alg"])
		}
		if kid, ok := m["kid"].(string); ok && kid != h.kid {
			t.Fatalf("kid %q, but the JSON says %q", h.kid, kid)
		}
	})
}

// FuzzBearerToken: the token found is trimmed, non-empty and part of the
// header.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer\tabc", "Bearer  ", "Basic x", "Bearer a b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := bearerToken([]string{h})
		if ok && (tok == "" || tok != strings.TrimSpace(tok) || !strings.Contains(h, tok)) {
			t.Fatalf("%q gave %q", h, tok)
		}
	})
}
