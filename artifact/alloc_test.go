package artifact

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// TestFetchSmallCachedAllocs bounds what a small cached fetch allocates
// beyond what http.FileServer allocates serving the same bytes to the same
// client over loopback: the difference is the fetch endpoint's own
// (routing, token, policy input, headers, log line). Each response header
// used to cost a fresh slice and a canonicalisation, and the media type
// was parsed three times.
func TestFetchSmallCachedAllocs(t *testing.T) {
	f := newFixture(t)
	body := bytes.Repeat([]byte("x"), 4096)
	_, l := f.publish(t, body, "text/plain; charset=utf-8", "notes.txt", LinkOptions{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	anchor := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer anchor.Close()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	perFetch := func(url string) float64 {
		fetch := func() {
			resp, err := c.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n != int64(len(body)) {
				t.Fatalf("%s: status %d, %d bytes", url, resp.StatusCode, n)
			}
		}
		fetch() // the connection and the cache
		return testing.AllocsPerRun(200, fetch)
	}
	spill, files := perFetch(l.URL), perFetch(anchor.URL+"/notes.txt")
	t.Logf("allocations per fetch: %.0f through the endpoint, %.0f through http.FileServer", spill, files)
	if extra := spill - files; extra > 64 {
		t.Errorf("the endpoint allocates %.0f more than http.FileServer per small cached fetch, want at most 64", extra)
	}
}

// TestFetchLogLine: every fetch logs one line with what it served and the
// token's id, never the token.
func TestFetchLogLine(t *testing.T) {
	f := newFixture(t)
	body := bytes.Repeat([]byte("y"), 1000)
	a, l := f.publish(t, body, "text/plain", "", LinkOptions{})
	var buf policytest.Buffer
	r := mux.NewRouter()
	NewHandler(f.svc, HandlerOptions{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}).Register(r)
	srv := httptest.NewServer(r)
	defer srv.Close()
	u, _ := url.Parse(l.URL)
	resp, got := get(t, http.MethodGet, srv.URL+u.RequestURI(), nil)
	if resp.StatusCode != 200 || !bytes.Equal(got, body) {
		t.Fatalf("%s, %d bytes", resp.Status, len(got))
	}
	var line struct {
		Msg, Method, Artifact, Remote, TokenID string
		Status                                 int
		Bytes                                  int64
		Level                                  string
	}
	// The line is written once the response is out: wait for it (the
	// bound only guards against a hang).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(buf.String(), "\n") && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1: %q", len(lines), buf.String())
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(lines[0], `"token_id"`, `"tokenid"`)), &line); err != nil {
		t.Fatal(err)
	}
	tok := u.Query().Get("t")
	if line.Msg != "fetch" || line.Level != "INFO" || line.Method != "GET" || line.Artifact != a.ID || line.Status != 200 ||
		line.Bytes != int64(len(body)) || line.Remote == "" || line.TokenID == "" || strings.Contains(lines[0], tok) {
		t.Errorf("log line %s", lines[0])
	}
}
