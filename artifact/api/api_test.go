package api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/artifact/identity"
)

type fixture struct {
	svc *artifact.Service
	url string // the API's server
}

// newFixture serves the API over a real local store with the built-in
// policy, on loopback; links point at artifacttest's fetch endpoint.
func newFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	store, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return newStoreFixture(t, store, o)
}

func newStoreFixture(t *testing.T, store artifact.Store, o Options) *fixture {
	t.Helper()
	svc, _ := artifacttest.Serve(t, store, artifacttest.Options{})
	svc.Metrics = &artifact.Metrics{}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := mux.NewRouter()
	New(svc, o).Register(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &fixture{svc: svc, url: srv.URL}
}

func newAPIFixture(t *testing.T) *fixture {
	tenants, err := identity.ParseTenants("alice-token-0123456789=alice, bob-token-0123456789=bob")
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, Options{Tenants: tenants, MaxUpload: 1 << 20})
}

func get(t *testing.T, method, u string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	return call(t, method, u, "", nil, hdr)
}

func errCode(t *testing.T, b []byte) string {
	t.Helper()
	var e struct{ Code string }
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", b, err)
	}
	return e.Code
}

func call(t *testing.T, method, u, token string, body io.Reader, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, u, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestAPI(t *testing.T) {
	f := newAPIFixture(t)
	base := f.url + "/v1/artifacts"
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789"
	body := []byte(`{"rows":[1,2,3]}`)
	sum := sha256.Sum256(body)

	if resp, b := call(t, "POST", base, "", bytes.NewReader(body), nil); resp.StatusCode != 401 || errCode(t, b) != "unauthenticated" || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token = %d %s", resp.StatusCode, b)
	}
	if resp, _ := call(t, "POST", base, "wrong-token-0123456789", bytes.NewReader(body), nil); resp.StatusCode != 401 {
		t.Fatalf("unknown token = %d", resp.StatusCode)
	}
	resp, b := call(t, "POST", base+"?ttl=10m", alice, bytes.NewReader(body), map[string]string{
		"Content-Type": "application/json", "X-Spillway-Name": "rows.json", "X-Spillway-SHA256": hex.EncodeToString(sum[:]),
	})
	if resp.StatusCode != 201 {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	var link artifact.ResourceLink
	if err := json.Unmarshal(b, &link); err != nil {
		t.Fatal(err)
	}
	id, ok := artifact.IDFromURI(link.URI)
	if !ok || link.Name != "rows.json" || link.MimeType != "application/json" || link.Size != int64(len(body)) || link.Meta[artifact.MetaSHA256] != hex.EncodeToString(sum[:]) {
		t.Fatalf("link = %+v", link)
	}
	if _, got := get(t, "GET", link.HTTPURL, nil); !bytes.Equal(got, body) {
		t.Fatalf("fetched %q", got)
	}

	if resp, b := call(t, "POST", base, alice, strings.NewReader("abc"), map[string]string{"X-Spillway-SHA256": strings.Repeat("0", 64)}); resp.StatusCode != 400 || errCode(t, b) != "integrity" {
		t.Fatalf("bad checksum = %d %s", resp.StatusCode, b)
	}
	if resp, b := call(t, "POST", base, alice, bytes.NewReader(make([]byte, 2<<20)), nil); resp.StatusCode != 413 || errCode(t, b) != "too_large" {
		t.Fatalf("too large = %d %s", resp.StatusCode, b)
	}
	// Chunked, so the size is only discovered while streaming.
	if resp, b := call(t, "POST", base, alice, io.MultiReader(bytes.NewReader(make([]byte, 2<<20))), nil); resp.StatusCode != 413 {
		t.Fatalf("too large chunked = %d %s", resp.StatusCode, b)
	}

	// Another tenant's artifact answers exactly what an unknown one does
	// (it answered 403 where an unknown id answered 404: an existence oracle).
	unknown := artifact.NewID()
	for _, m := range []string{"GET", "DELETE", "POST /links"} {
		method, suffix, _ := strings.Cut(m, " ")
		other, ob := call(t, method, base+"/"+id+suffix, bob, nil, nil)
		none, nb := call(t, method, base+"/"+unknown+suffix, bob, nil, nil)
		if other.StatusCode != 404 || other.StatusCode != none.StatusCode || !bytes.Equal(ob, nb) {
			t.Fatalf("%s of another tenant's artifact = %d %s; unknown id = %d %s", m, other.StatusCode, ob, none.StatusCode, nb)
		}
	}
	resp, b = call(t, "POST", base+"/"+id+"/links", alice, strings.NewReader(`{"ttl":"1m","method":"HEAD"}`), nil)
	if resp.StatusCode != 201 {
		t.Fatalf("mint = %d %s", resp.StatusCode, b)
	}
	var head artifact.ResourceLink
	json.Unmarshal(b, &head)
	if r, _ := get(t, "GET", head.HTTPURL, nil); r.StatusCode != 403 {
		t.Fatalf("GET with minted HEAD link = %d", r.StatusCode)
	}
	if resp, b := call(t, "POST", base+"/"+id+"/links", alice, strings.NewReader(`{"bogus":1}`), nil); resp.StatusCode != 400 {
		t.Fatalf("unknown field = %d %s", resp.StatusCode, b)
	}

	if resp, b := call(t, "DELETE", base+"/"+id, alice, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("delete = %d %s", resp.StatusCode, b)
	}
	if r, b := get(t, "GET", link.HTTPURL, nil); r.StatusCode != 404 || errCode(t, b) != "not_found" {
		t.Fatalf("fetch after delete = %d %s", r.StatusCode, b)
	}
	if resp, _ := call(t, "DELETE", base+"/"+id, alice, nil, nil); resp.StatusCode != 404 {
		t.Fatalf("second delete = %d", resp.StatusCode)
	}
}

// Without inbound tokens the API is off, unless it is explicitly anonymous
// (its own loopback listener); then the Guard keeps browsers of other
// sites out.
func TestAPIOffWithoutTokens(t *testing.T) {
	f := newFixture(t, Options{})
	resp, b := call(t, "POST", f.url+"/v1/artifacts", "", strings.NewReader("x"), map[string]string{"Content-Type": "application/octet-stream"})
	if resp.StatusCode != 404 || errCode(t, b) != "api_off" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("upload to an API without tokens = %d %s", resp.StatusCode, b)
	}
}

func TestAPIAnonymousGuard(t *testing.T) {
	f := newFixture(t, Options{Anonymous: true})
	base := f.url + "/v1/artifacts"
	for _, tt := range []struct {
		name string
		hdr  map[string]string
		code string
	}{
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, "cross_site"},
		{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "cross_site"},
		{"cross-site", map[string]string{"Content-Type": "application/octet-stream", "Sec-Fetch-Site": "cross-site"}, "cross_site"},
		{"foreign origin", map[string]string{"Content-Type": "application/octet-stream", "Origin": "http://evil.example"}, "forbidden_origin"},
		{"rebinding", map[string]string{"Content-Type": "application/octet-stream", "Host": "evil.example"}, "forbidden_host"},
	} {
		if resp, b := call(t, "POST", base, "", strings.NewReader("x"), tt.hdr); resp.StatusCode != 403 || errCode(t, b) != tt.code {
			t.Errorf("%s: upload = %d %s", tt.name, resp.StatusCode, b)
		}
	}
	resp, b := call(t, "POST", base, "", strings.NewReader("x"), map[string]string{"Content-Type": "text/plain", "X-Spillway-Name": "x.txt"})
	if resp.StatusCode != 201 {
		t.Fatalf("upload with an X-Spillway header = %d %s", resp.StatusCode, b)
	}
}

// rawUpload sends head (request line and headers, up to the blank line)
// and body over one TCP connection, half-closes it, and reads the answer.
func rawUpload(t *testing.T, base, head, body string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, head+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// Finding 10: a malformed or aborted upload body answered 503
// "unavailable" and counted as a store failure. It is the sender's fault.
func TestUploadBrokenBody(t *testing.T) {
	f := newAPIFixture(t)
	const hdr = "POST /v1/artifacts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice-token-0123456789\r\n" +
		"Content-Type: application/octet-stream\r\n"
	for _, tt := range []struct{ name, head, body string }{
		{"malformed chunk", hdr + "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\nzz\r\nmore\r\n"},
		{"aborted", hdr + "Content-Length: 100000\r\n", strings.Repeat("x", 1000)},
		{"aborted chunked", hdr + "Transfer-Encoding: chunked\r\n", "400\r\n" + strings.Repeat("x", 100)},
	} {
		resp, b := rawUpload(t, f.url, tt.head, tt.body)
		if resp.StatusCode != 400 || errCode(t, b) != "incomplete" {
			t.Errorf("%s: upload = %d %s", tt.name, resp.StatusCode, b)
		}
	}
	var m bytes.Buffer
	f.svc.Metrics.WritePrometheus(&m)
	if !strings.Contains(m.String(), "spillway_artifact_store_failures_total 0\n") {
		t.Errorf("broken uploads counted as store failures:\n%s", m.String())
	}
}
