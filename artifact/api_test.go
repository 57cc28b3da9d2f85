package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/mux"
)

func newAPIFixture(t *testing.T) *fixture {
	f := newFixture(t)
	tenants, err := ParseTenants("alice-token-0123456789=alice, bob-token-0123456789=bob")
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter()
	log := slog.New(slog.DiscardHandler)
	NewHandler(f.svc, HandlerOptions{Policy: f.pol, Logger: log}).Register(r)
	NewAPI(f.svc, APIOptions{Tenants: tenants, MaxUpload: 1 << 20, Logger: log}).Register(r)
	f.srv.Config.Handler = r
	return f
}

func call(t *testing.T, method, u, token string, body io.Reader, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, u, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
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
	base := f.srv.URL + "/v1/artifacts"
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
	var link ResourceLink
	if err := json.Unmarshal(b, &link); err != nil {
		t.Fatal(err)
	}
	id, ok := IDFromURI(link.URI)
	if !ok || link.Name != "rows.json" || link.MimeType != "application/json" || link.Size != int64(len(body)) || link.Meta[MetaSHA256] != hex.EncodeToString(sum[:]) {
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

	if resp, b := call(t, "POST", base+"/"+id+"/links", bob, nil, nil); resp.StatusCode != 403 || errCode(t, b) != "forbidden" {
		t.Fatalf("other tenant mint = %d %s", resp.StatusCode, b)
	}
	resp, b = call(t, "POST", base+"/"+id+"/links", alice, strings.NewReader(`{"ttl":"1m","method":"HEAD"}`), nil)
	if resp.StatusCode != 201 {
		t.Fatalf("mint = %d %s", resp.StatusCode, b)
	}
	var head ResourceLink
	json.Unmarshal(b, &head)
	if r, _ := get(t, "GET", head.HTTPURL, nil); r.StatusCode != 403 {
		t.Fatalf("GET with minted HEAD link = %d", r.StatusCode)
	}
	if resp, b := call(t, "POST", base+"/"+id+"/links", alice, strings.NewReader(`{"bogus":1}`), nil); resp.StatusCode != 400 {
		t.Fatalf("unknown field = %d %s", resp.StatusCode, b)
	}

	if resp, _ := call(t, "DELETE", base+"/"+id, bob, nil, nil); resp.StatusCode != 403 {
		t.Fatalf("other tenant delete = %d", resp.StatusCode)
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
