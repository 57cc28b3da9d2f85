package sdk

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseDigest(t *testing.T) {
	good := strings.Repeat("ab", 32)
	for _, c := range []struct {
		in, want string
		wantErr  string
	}{
		{in: good, want: good},
		{in: strings.ToUpper(good), want: good},
		{in: good[:63], wantErr: "63 characters"},
		{in: good + "a", wantErr: "65 characters"},
		{in: "sha256:" + good, wantErr: "71 characters"},
		{in: strings.Repeat("zz", 32), wantErr: "not hex"},
		{in: good[:62] + " a", wantErr: "not hex"},
		{in: strings.Repeat("x", 10000), wantErr: "10000 characters"},
	} {
		got, err := parseDigest(c.in)
		if c.wantErr != "" {
			if !errors.Is(err, ErrMalformedDigest) || !strings.Contains(err.Error(), c.wantErr) || len(err.Error()) > 200 {
				t.Errorf("%.20q: %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v", c.in, got, err)
		}
	}
}

func TestETagDigest(t *testing.T) {
	d := strings.Repeat("0f", 32)
	for in, want := range map[string]string{
		`"` + d + `"`:                        d,
		`"` + strings.ToUpper(d) + `"`:       d,
		`W/"` + d + `"`:                      "", // weak: not a byte digest
		d:                                    "", // unquoted
		`"9b2cf535f27731c974343645a3985328"`: "", // S3's MD5
		`"` + d[:60] + `-2"`:                 "", // S3 multipart
		`"`:                                  "",
	} {
		if got := etagDigest(in); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	limit := 10 * time.Second
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"11", limit, true},
		{"99999999999999999999999", limit, true}, // overflows int64: still "a long time"
		{now.Add(4 * time.Second).Format(http.TimeFormat), 4 * time.Second, true},
		{now.Add(time.Hour).Format(http.TimeFormat), limit, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"Sunday, 01-Mar-26 12:00:05 GMT", 5 * time.Second, true}, // RFC 850
		{"Sun Mar  1 12:00:06 2026", 6 * time.Second, true},       // asctime
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	} {
		got, ok := retryAfter(c.in, now, limit)
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"http://127.0.0.1:8080/v1/x", "http://127.0.0.1:8080/other", true},
		{"http://Example.com/x", "http://example.com:80/y", true},
		{"https://example.com/x", "https://example.com:443/y", true},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:9000/", false},
		{"http://example.com/", "https://example.com/", false},
		{"http://example.com/", "http://sub.example.com/", false},
		{"http://127.0.0.1/", "http://localhost/", false},
		{"http://[::1]:80/", "http://[::1]/", true},
	} {
		a, _ := url.Parse(c.a)
		b, _ := url.Parse(c.b)
		if got := sameOrigin(a, b); got != c.want {
			t.Errorf("%s %s: %v", c.a, c.b, got)
		}
	}
}

// A server's Retry-After is untrusted input: whatever it says, the wait
// is within [0, limit], and delta-seconds mean exactly what they say.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Sun, 01 Mar 2026 12:00:05 GMT", "Sunday, 01-Mar-26 12:00:05 GMT",
		"Sun Mar  1 12:00:06 2026", "-1", "1e3", "99999999999999999999", " 5"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		const limit = time.Minute
		d, ok := retryAfter(s, now, limit)
		if d < 0 || d > limit || !ok && d != 0 {
			t.Fatalf("%q: %v, %v", s, d, ok)
		}
		if v := strings.TrimSpace(s); ok && len(v) < 3 && strings.Trim(v, "0123456789") == "" {
			if n, _ := digits(v); min(time.Duration(n)*time.Second, limit) != d {
				t.Fatalf("%q: %v", s, d)
			}
		}
	})
}

// An expected digest and a server's ETag are untrusted input: a value
// accepted is always 64 lower-case hex digits, equal to the input folded.
func FuzzDigest(f *testing.F) {
	for _, s := range []string{strings.Repeat("a", 64), strings.Repeat("A", 64), "sha256:" + strings.Repeat("0", 64), `"` + strings.Repeat("1", 64) + `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(in, d string) {
			if len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "" || d != strings.ToLower(in) {
				t.Fatalf("%q accepted as %q", s, d)
			}
		}
		if d, err := parseDigest(s); err == nil {
			check(s, d)
		} else if !errors.Is(err, ErrMalformedDigest) {
			t.Fatalf("%q: %v", s, err)
		}
		if d := etagDigest(s); d != "" {
			check(s[1:len(s)-1], d)
		}
	})
}
