package upstreamauth

import (
	"strings"
	"testing"
	"time"
)

func TestParseTokenResponse(t *testing.T) {
	for _, tt := range []struct {
		name     string
		status   int
		body     string
		tok      string
		lifetime time.Duration
		wantErr  string
	}{
		{"bearer", 200, `{"access_token":"abc.def","token_type":"Bearer","expires_in":60}`, "abc.def", time.Minute, ""},
		{"bearer any case", 200, `{"access_token":"t","token_type":"bEaReR","expires_in":"120"}`, "t", 2 * time.Minute, ""},
		{"no expires_in", 200, `{"access_token":"t","token_type":"bearer"}`, "t", defaultLifetime, ""},
		{"fractional", 200, `{"access_token":"t","token_type":"bearer","expires_in":1.5}`, "t", 1500 * time.Millisecond, ""},
		{"mac", 200, `{"access_token":"t","token_type":"mac","expires_in":60}`, "", 0, `token_type is "mac"`},
		{"no type", 200, `{"access_token":"t","expires_in":60}`, "", 0, "not Bearer"},
		{"no token", 200, `{"token_type":"Bearer"}`, "", 0, "no access_token"},
		{"line break", 200, `{"access_token":"t\r\nX-Evil: 1","token_type":"Bearer"}`, "", 0, "not fit for a header"},
		{"zero", 200, `{"access_token":"t","token_type":"Bearer","expires_in":0}`, "", 0, "out of range"},
		{"negative", 200, `{"access_token":"t","token_type":"Bearer","expires_in":-5}`, "", 0, "out of range"},
		{"huge", 200, `{"access_token":"t","token_type":"Bearer","expires_in":1e300}`, "", 0, "out of range"},
		{"bad expires", 200, `{"access_token":"t","token_type":"Bearer","expires_in":true}`, "", 0, "not a number"},
		{"not json", 200, `<html>`, "", 0, "not a JSON object"},
		{"rfc error", 400, `{"error":"invalid_client","error_description":"secret s3cr3t wrong"}`, "", 0, `answered 400, error "invalid_client"`},
		{"error quoted", 401, `{"error":"a\"b\\c\nd"}`, "", 0, `error "abcd"`},
		{"500 html", 500, `<html>oops</html>`, "", 0, "answered 500"},
		{"200 with error", 200, `{"error":"x"}`, "", 0, "no access_token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tok, lt, err := parseTokenResponse(tt.status, []byte(tt.body))
			if tt.wantErr == "" {
				if err != nil || tok != tt.tok || lt != tt.lifetime {
					t.Fatalf("got %q %v %v; want %q %v", tok, lt, err, tt.tok, tt.lifetime)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v; want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the error quotes the body: %v", err)
			}
		})
	}
}

// FuzzTokenResponse: whatever the token endpoint answers, the parser
// returns a header-safe Bearer token with a lifetime in range, or an
// error that quotes no token.
func FuzzTokenResponse(f *testing.F) {
	for _, s := range []string{
		`{"access_token":"abc","token_type":"Bearer","expires_in":3600}`,
		`{"access_token":"abc","token_type":"bearer","expires_in":"3600"}`,
		`{"access_token":"abc","token_type":"Bearer"}`,
		`{"error":"invalid_client"}`,
		`{"access_token":"a b","token_type":"Bearer","expires_in":1e9}`,
		`[]`, `null`, `{"expires_in":{}}`,
	} {
		f.Add(200, []byte(s))
		f.Add(400, []byte(s))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		tok, lt, err := parseTokenResponse(status, body)
		if err != nil {
			if tok != "" || lt != 0 {
				t.Fatalf("an error with a token: %q %v", tok, lt)
			}
			if len(err.Error()) > 200 {
				t.Fatalf("a long error: %q", err)
			}
			return
		}
		if status != 200 || !validToken(tok) || tok == "" || lt <= 0 || lt > maxLifetime {
			t.Fatalf("accepted %d %q %v", status, tok, lt)
		}
	})
}
