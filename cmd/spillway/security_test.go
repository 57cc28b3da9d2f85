package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/token"
)

// newServeErr builds `spillway serve` with args and returns why it refused.
func newServeErr(t *testing.T, args ...string) error {
	t.Helper()
	fs := newFlagSet("serve")
	var c serveConfig
	c.register(fs)
	args = append([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir()}, args...)
	if err := parseLayered(fs, args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	s, err := newServer(context.Background(), &c, slog.New(slog.DiscardHandler), io.Discard, io.Discard)
	if err == nil {
		s.close()
	}
	return err
}

// apiCall sends one request to the running server.
func apiCall(t *testing.T, method, url string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// Tokens can come from a file that only the owner can read, and base64
// padding in a token survives the token=tenant split.
func TestServeAuthTokensFile(t *testing.T) {
	const token = "c2VjcmV0LXRva2VuLTAxMjM0NTY3OA=="
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# the team\n"+token+"=team\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := newServeErr(t, "--auth-tokens-file", file); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("group-readable token file: err = %v", err)
	}
	if err := newServeErr(t, "--auth-tokens-file", file, "--auth-tokens", "abcdefghijklmnop=x"); err == nil {
		t.Fatal("both token flags accepted")
	}
	os.Chmod(file, 0o600)
	base := startServe(t, t.TempDir(), "--auth-tokens-file", file)
	resp, b := apiCall(t, "POST", base+"/v1/artifacts", strings.NewReader("hello"),
		"Authorization", "Bearer "+token, "Content-Type", "application/octet-stream")
	if resp.StatusCode != 201 {
		t.Fatalf("upload with the file's token = %d %s", resp.StatusCode, b)
	}
	if resp, _ := apiCall(t, "POST", base+"/v1/artifacts", strings.NewReader("hello"),
		"Authorization", "Bearer "+strings.TrimRight(token, "="), "Content-Type", "application/octet-stream"); resp.StatusCode != 401 {
		t.Fatalf("upload with the token unpadded = %d", resp.StatusCode)
	}
}

// narrowLink stores body through the running service (as an offload
// would) and mints the kind of link a sandbox is handed: HEAD only, bound
// to 127.0.0.1/32, 30 s.
func narrowLink(t *testing.T, s *server, tenant string) (artifact.Artifact, artifact.Link) {
	t.Helper()
	ctx := context.Background()
	a, err := s.deps.svc.Put(ctx, artifact.Artifact{Tenant: tenant, MimeType: "text/plain"}, time.Hour, strings.NewReader("secret bytes"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.deps.svc.Link(ctx, a, artifact.LinkOptions{Tenant: tenant, Method: token.MethodHead,
		CIDR: netip.MustParsePrefix("127.0.0.1/32"), TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return a, l
}

func linkToken(t *testing.T, l artifact.Link) string {
	t.Helper()
	u, err := url.Parse(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("t")
}

// stillThere asserts the sandbox's own link still works: nothing was deleted.
func stillThere(t *testing.T, l artifact.Link) {
	t.Helper()
	if resp, b := apiCall(t, "HEAD", l.URL, nil); resp.StatusCode != 200 {
		t.Fatalf("the artifact is gone: HEAD = %d %s", resp.StatusCode, b)
	}
}

// Finding 1, the default configuration: with no inbound tokens, a sandbox
// holding a narrow link (so knowing the artifact id) minted itself a wide
// one and deleted the artifact; a cross-site text/plain POST uploaded.
// Now the API is off on the listener links point at.
func TestServeAPIOffWithoutAuth(t *testing.T) {
	s := startServer(t, t.TempDir())
	base := "http://" + s.Addr()
	a, l := narrowLink(t, s, "")
	v1 := base + "/v1/artifacts/" + a.ID
	for _, tt := range []struct {
		name, method, url, body string
		hdr                     []string
	}{
		{"mint", "POST", v1 + "/links", `{"ttl":"30m"}`, []string{"Content-Type", "application/json"}},
		{"mint with the link token", "POST", v1 + "/links", `{"ttl":"30m"}`, []string{"Content-Type", "application/json", "Authorization", "Bearer " + linkToken(t, l)}},
		{"stat", "GET", v1, "", nil},
		{"delete", "DELETE", v1, "", nil},
		{"upload", "POST", base + "/v1/artifacts", "x", []string{"Content-Type", "application/octet-stream"}},
		{"cross-site text/plain upload", "POST", base + "/v1/artifacts", "x", []string{"Content-Type", "text/plain",
			"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}},
	} {
		if resp, b := apiCall(t, tt.method, tt.url, strings.NewReader(tt.body), tt.hdr...); resp.StatusCode < 400 {
			t.Errorf("%s = %d %s", tt.name, resp.StatusCode, b)
		} else if resp.StatusCode != 404 && resp.StatusCode != 403 {
			t.Errorf("%s = %d %s, want 404 (API off) or 403", tt.name, resp.StatusCode, b)
		}
	}
	stillThere(t, l)
}

// With inbound tokens the API is on, and a link token is no identity.
func TestServeLinkHolderCannotUseAPI(t *testing.T) {
	const owner = "owner-token-0123456789"
	s := startServer(t, t.TempDir(), "--auth-tokens", owner+"=team")
	base := "http://" + s.Addr()
	a, l := narrowLink(t, s, "team")
	tok := linkToken(t, l)
	v1 := base + "/v1/artifacts/" + a.ID
	for _, auth := range [][]string{nil, {"Authorization", "Bearer " + tok}} {
		for _, tt := range []struct{ method, url, body string }{
			{"POST", v1 + "/links", `{"ttl":"30m"}`},
			{"POST", v1 + "/links?t=" + tok, `{"ttl":"30m"}`},
			{"GET", v1, ""},
			{"DELETE", v1, ""},
			{"DELETE", v1 + "?t=" + tok, ""},
			{"POST", base + "/v1/artifacts", "x"},
		} {
			hdr := append([]string{"Content-Type", "application/json"}, auth...)
			if resp, b := apiCall(t, tt.method, tt.url, strings.NewReader(tt.body), hdr...); resp.StatusCode != 401 {
				t.Errorf("%s %s with %v = %d %s", tt.method, tt.url, auth, resp.StatusCode, b)
			}
		}
	}
	stillThere(t, l)
	// The owner can.
	if resp, b := apiCall(t, "POST", v1+"/links", strings.NewReader(`{"ttl":"1m"}`), "Authorization", "Bearer "+owner, "Content-Type", "application/json"); resp.StatusCode != 201 {
		t.Fatalf("owner mint = %d %s", resp.StatusCode, b)
	}
}

// --api-listen serves the API on an address of its own, without tokens
// when it is loopback; the link listener has no API then, and browsers of
// other sites cannot use the open one.
func TestServeAPIListen(t *testing.T) {
	if err := newServeErr(t, "--api-listen", "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "--api-listen") {
		t.Fatalf("non-loopback --api-listen without tokens: err = %v", err)
	}
	s := startServer(t, t.TempDir(), "--api-listen", "127.0.0.1:0")
	base, api := "http://"+s.Addr(), "http://"+s.APIAddr()
	if resp, b := apiCall(t, "POST", base+"/v1/artifacts", strings.NewReader("x"), "Content-Type", "application/octet-stream"); resp.StatusCode != 404 {
		t.Fatalf("upload on the link listener = %d %s", resp.StatusCode, b)
	}
	// CSRF: what a page of another site can send, even to loopback.
	for _, hdr := range [][]string{
		{"Content-Type", "text/plain", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"},
		{"Content-Type", "text/plain", "Sec-Fetch-Site", "cross-site"},
		{"Content-Type", "text/plain"},
		{"Content-Type", "application/x-www-form-urlencoded"},
		{"Content-Type", "application/octet-stream", "Sec-Fetch-Site", "same-site"},
	} {
		if resp, b := apiCall(t, "POST", api+"/v1/artifacts", strings.NewReader("x"), hdr...); resp.StatusCode != 403 {
			t.Errorf("upload with %q = %d %s", hdr, resp.StatusCode, b)
		}
	}
	resp, b := apiCall(t, "POST", api+"/v1/artifacts", strings.NewReader("x"), "Content-Type", "application/octet-stream")
	if resp.StatusCode != 201 {
		t.Fatalf("upload on --api-listen = %d %s", resp.StatusCode, b)
	}
	var link artifact.ResourceLink
	json.Unmarshal(b, &link)
	id, _ := artifact.IDFromURI(link.URI)
	if resp, b := apiCall(t, "POST", api+"/v1/artifacts/"+id+"/links", strings.NewReader(`{"ttl":"1m"}`), "Content-Type", "application/json"); resp.StatusCode != 201 {
		t.Fatalf("mint on --api-listen = %d %s", resp.StatusCode, b)
	}
	if resp, b := apiCall(t, "DELETE", api+"/v1/artifacts/"+id, nil, "Origin", "http://evil.example"); resp.StatusCode != 403 {
		t.Fatalf("cross-origin delete = %d %s", resp.StatusCode, b)
	}
	if resp, b := apiCall(t, "DELETE", api+"/v1/artifacts/"+id, nil); resp.StatusCode != 204 {
		t.Fatalf("delete on --api-listen = %d %s", resp.StatusCode, b)
	}
}

// DNS rebinding: a page on a name that resolves to this server sends that
// name as Host. Every route but /a/ refuses it, on both listeners.
func TestServeForeignHostRefused(t *testing.T) {
	const owner = "owner-token-0123456789"
	auth := []string{"Authorization", "Bearer " + owner}
	for _, apiListen := range []bool{false, true} {
		args := []string{"--auth-tokens", owner + "=team", "--allowed-hosts", "spill.example.com"}
		if apiListen {
			args = append(args, "--api-listen", "127.0.0.1:0")
		}
		s := startServer(t, t.TempDir(), args...)
		a, l := narrowLink(t, s, "team")
		probes := []string{"/readyz", "/metrics", "/healthz"}
		apiBase, bases := "http://"+s.Addr(), []string{"http://" + s.Addr()}
		if apiListen {
			apiBase = "http://" + s.APIAddr()
			bases = append(bases, apiBase)
		}
		type req struct{ method, url string }
		var reqs []req
		for _, b := range bases {
			for _, p := range probes {
				reqs = append(reqs, req{"GET", b + p})
			}
		}
		reqs = append(reqs, req{"GET", apiBase + "/v1/artifacts/" + a.ID}, req{"DELETE", apiBase + "/v1/artifacts/" + a.ID})
		for _, r := range reqs {
			u, _ := url.Parse(r.url)
			port := u.Port()
			resp, b := apiCall(t, r.method, r.url, nil, append([]string{"Host", "rebound.evil.example:" + port}, auth...)...)
			if resp.StatusCode != 403 || !strings.Contains(string(b), "forbidden_host") {
				t.Errorf("%s %s with a foreign Host = %d %s", r.method, r.url, resp.StatusCode, b)
			}
			if resp, b := apiCall(t, "GET", r.url, nil, append([]string{"Host", "spill.example.com"}, auth...)...); resp.StatusCode != 200 {
				t.Errorf("GET %s with an allowed Host = %d %s", r.url, resp.StatusCode, b)
			}
		}
		// The link endpoint authenticates by its token alone.
		if resp, b := apiCall(t, "HEAD", l.URL, nil, "Host", "rebound.evil.example"); resp.StatusCode != 200 {
			t.Fatalf("link with a foreign Host = %d %s", resp.StatusCode, b)
		}
	}
}

// Finding 10: mux cleaned /a//ID?t=TOKEN with a 301 whose Location repeated
// the token, without the safety headers.
func TestServeUncleanPathNoRedirect(t *testing.T) {
	s := startServer(t, t.TempDir())
	_, l := narrowLink(t, s, "")
	u, _ := url.Parse(l.URL)
	tok := u.Query().Get("t")
	id := u.Path[strings.LastIndexByte(u.Path, '/')+1:]
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/a//" + id, "/a/./" + id, "/x/../a/" + id, "/a/" + id + "/"} {
		req, _ := http.NewRequest("HEAD", "http://"+s.Addr()+p+"?t="+tok, nil)
		req.URL.Opaque = p // sent as written, not cleaned by the client
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 || resp.Header.Get("Location") != "" ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("HEAD %s = %d, Location %q, headers %v", p, resp.StatusCode, resp.Header.Get("Location"), resp.Header)
		}
	}
	stillThere(t, l)
}

// Finding 10: /readyz told anyone the store's and policy's error text
// (endpoints, buckets, paths). Only an authenticated caller, the
// management listener and the log get it now.
func TestServeReadyzHidesDetail(t *testing.T) {
	const owner = "owner-token-0123456789"
	data := t.TempDir()
	s := startServer(t, data, "--auth-tokens", owner+"=team", "--api-listen", "127.0.0.1:0")
	// The store can no longer write: Ping fails naming the path.
	if err := os.RemoveAll(filepath.Join(data, "artifacts", "tmp")); err != nil {
		t.Fatal(err)
	}
	resp, b := apiCall(t, "GET", "http://"+s.Addr()+"/readyz", nil)
	if resp.StatusCode != 503 || strings.Contains(string(b), data) || strings.Contains(string(b), "checks") {
		t.Errorf("anonymous readyz = %d %s", resp.StatusCode, b)
	}
	var ready struct{ Ready *bool }
	if json.Unmarshal(b, &ready) != nil || ready.Ready == nil || *ready.Ready {
		t.Errorf("anonymous readyz says nothing of readiness: %s", b)
	}
	for _, tt := range []struct{ url, auth string }{
		{"http://" + s.Addr() + "/readyz", "Bearer " + owner},
		{"http://" + s.APIAddr() + "/readyz", ""},
	} {
		resp, b := apiCall(t, "GET", tt.url, nil, "Authorization", tt.auth)
		if resp.StatusCode != 503 || !strings.Contains(string(b), data) {
			t.Errorf("readyz %s with %q = %d %s", tt.url, tt.auth, resp.StatusCode, b)
		}
	}
}

// Issue 38, item 10: /metrics on --listen, which sandboxes holding links
// reach, told anyone every tenant's counters. It follows /readyz's rule
// for details now: a caller with an inbound token, or --api-listen.
func TestServeMetricsNeedToken(t *testing.T) {
	const owner = "owner-token-0123456789"
	s := startServer(t, t.TempDir(), "--auth-tokens", owner+"=team", "--api-listen", "127.0.0.1:0")
	listen, api := "http://"+s.Addr()+"/metrics", "http://"+s.APIAddr()+"/metrics"
	for _, tt := range []struct {
		url, auth string
		status    int
	}{
		{listen, "", 401},
		{listen, "Bearer another-token-0123456789", 401},
		{listen, "Bearer " + owner, 200},
		{api, "", 200},
	} {
		resp, b := apiCall(t, "GET", tt.url, nil, "Authorization", tt.auth)
		counters := strings.Contains(string(b), "spillway_fetch_requests_total")
		if resp.StatusCode != tt.status || counters != (tt.status == 200) {
			t.Errorf("GET %s with %q = %d (counters: %v), want %d", tt.url, tt.auth, resp.StatusCode, counters, tt.status)
		}
		if tt.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s with %q: 401 without WWW-Authenticate", tt.url, tt.auth)
		}
	}
}

// Issue 38, item 10: /mcp refused a missing or unknown token with a plain
// text body, which an MCP client cannot read as a JSON-RPC error; and an
// unknown route said "no such artifact" (code not_found), as if the path
// named one. Now the 401 carries a JSON-RPC error (id null) beside
// WWW-Authenticate, and an unknown route is a 404 of its own (no_route).
func TestServeMCPUnauthorizedAndUnknownRoute(t *testing.T) {
	const owner = "owner-token-0123456789"
	for _, args := range [][]string{
		{"--upstream-cmd", "cat"}, // the local token guards /mcp
		{"--upstream-cmd", "cat", "--auth-tokens", owner + "=team"},
	} {
		base := startServe(t, t.TempDir(), args...)
		for _, auth := range []string{"", "Bearer another-token-0123456789"} {
			resp, b := apiCall(t, "POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"ping"}`),
				"Content-Type", "application/json", "Accept", "application/json, text/event-stream", "Authorization", auth)
			var e struct {
				JSONRPC string `json:"jsonrpc"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			err := json.Unmarshal(b, &e)
			if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
				resp.Header.Get("Content-Type") != "application/json" || err != nil ||
				e.JSONRPC != "2.0" || !bytes.Contains(b, []byte(`"id":null`)) || e.Error.Code != -32001 || e.Error.Message == "" {
				t.Errorf("%v: POST /mcp with %q = %d, WWW-Authenticate %q, %s (%v); want 401 with a JSON-RPC error, id null",
					args, auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b, err)
			}
		}
		for _, p := range []string{"/nope", "/a", "/a/x/y", "/v2/artifacts"} {
			resp, b := apiCall(t, "GET", base+p, nil)
			if resp.StatusCode != 404 || errCode(b) != "no_route" || strings.Contains(string(b), "artifact") ||
				resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%v: GET %s = %d %s, want a 404 no_route that names no artifact", args, p, resp.StatusCode, b)
			}
		}
	}
}

// errCode is the code of an error body of the service, "" if none.
func errCode(b []byte) string {
	var e struct{ Code string }
	json.Unmarshal(b, &e)
	return e.Code
}

// Issue 38, item 10: no policy decision had a deadline of its own, so a
// policy that spins held every fetch for ever. With --policy-timeout the
// fetch is denied (403) once its decision passes the deadline; the
// client's 10 s timeout is the test's "never answered".
func TestServeSpinningPolicyDenies(t *testing.T) {
	dir := t.TempDir()
	const spin = `package spillway
mint := {"allow": true}
offload := {"offload": false}
fetch := {"allow": true} if not spin
spin if {
	some i in numbers.range(1, 10000)
	some j in numbers.range(1, 10000)
	i == j + 20000
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(spin), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, t.TempDir(), "--policy", dir, "--policy-timeout", "200ms")
	_, l := narrowLink(t, s, "")
	req, _ := http.NewRequest(http.MethodHead, l.URL, nil)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("a fetch under a spinning policy was never answered: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a fetch under a spinning policy = %d, want 403", resp.StatusCode)
	}
	if st := s.deps.engine.Status(); st.EvalTimeouts != 1 {
		t.Errorf("%d decisions counted past their deadline, want 1", st.EvalTimeouts)
	}
}
