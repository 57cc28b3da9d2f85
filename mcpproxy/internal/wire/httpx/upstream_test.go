package httpx

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// A redirect to another origin (here: another loopback port) is refused
// before anything reaches it; one within the origin is followed, body and
// headers included.
func TestUpstreamClientRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()
	var got atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
		case "/mcp":
			b, _ := io.ReadAll(r.Body)
			got.Store(r.Header.Get("Authorization") + " " + string(b))
		}
	}))
	defer up.Close()
	c := UpstreamClient(nil)
	post := func(path string) error {
		req, _ := http.NewRequest(http.MethodPost, up.URL+path, strings.NewReader(`{"jsonrpc":"2.0"}`))
		req.Header.Set("Authorization", "Bearer upstream-secret")
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := post("/away"); !errors.Is(err, ErrCrossOrigin) {
		t.Errorf("redirect to %s: err %v, want ErrCrossOrigin", other.URL, err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other origin received %d requests, want none", n)
	}
	if err := post("/here"); err != nil {
		t.Fatalf("same-origin redirect: %v", err)
	}
	if g, _ := got.Load().(string); g != `Bearer upstream-secret {"jsonrpc":"2.0"}` {
		t.Errorf("same-origin redirect delivered %q", g)
	}
}

// A caller's client keeps its own transport and redirect rule, behind the
// origin rule, and is not modified.
func TestUpstreamClientWrapsBase(t *testing.T) {
	calls := 0
	base := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		calls++
		return http.ErrUseLastResponse
	}}
	c := UpstreamClient(base)
	from, _ := url.Parse("http://example.test/mcp")
	same, _ := url.Parse("http://example.test:80/other")
	away, _ := url.Parse("http://example.test:8080/mcp")
	via := []*http.Request{{URL: from}}
	if err := c.CheckRedirect(&http.Request{URL: away}, via); !errors.Is(err, ErrCrossOrigin) {
		t.Errorf("to another port: %v", err)
	}
	if err := c.CheckRedirect(&http.Request{URL: same}, via); !errors.Is(err, http.ErrUseLastResponse) || calls != 1 {
		t.Errorf("same origin: err %v after %d calls of the base's rule", err, calls)
	}
	if base.Transport != nil {
		t.Error("base modified")
	}
}

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"http://h/a", "http://h:80/b?q", true},
		{"https://H:443/", "https://h/", true},
		{"http://h/", "https://h/", false},
		{"http://h:8080/", "http://h/", false},
		{"http://h/", "http://h.evil/", false},
		{"http://user@h/", "http://h/", true},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if got := SameOrigin(a, b); got != tc.want {
			t.Errorf("SameOrigin(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://mcp.example/mcp?key=s3cret&x=1": "https://mcp.example/mcp?redacted",
		"http://bob:pw@127.0.0.1:9/mcp":          "http://redacted@127.0.0.1:9/mcp",
		"http://h/mcp#frag":                      "http://h/mcp",
		"http://h/mcp":                           "http://h/mcp",
		"http://h/mcp?":                          "http://h/mcp?redacted",
		"http://h/%zz?key=s3cret":                "(an unparsable URL)",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// An unreachable upstream's error names it without its query.
func TestRedactError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL + "/mcp?key=s3cret"
	srv.Close() // nothing listens there now
	resp, err := UpstreamClient(nil).Get(u)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a closed server answered")
	}
	if !strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("net/http no longer names the URL (%v): this redaction may be moot", err)
	}
	red := RedactError(err)
	if strings.Contains(red.Error(), "s3cret") || !strings.Contains(red.Error(), "/mcp?redacted") {
		t.Errorf("redacted: %v", red)
	}
	var ue *url.Error
	if !errors.As(red, &ue) || !errors.Is(errors.Unwrap(red), errors.Unwrap(err)) {
		t.Errorf("the cause is lost: %v", red)
	}
	if other := errors.New("x"); any(RedactError(other)) != any(other) { // the very same error, not one that wraps it
		t.Error("another error changed")
	}
}
