package s3store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
	"github.com/spillway-dev/spillway/policy"
)

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// fetchNoFollow publishes data on a MinIO-backed service and GETs its link
// once, without following a redirect.
func fetchNoFollow(t *testing.T, o artifacttest.Options, data []byte, mimeType string) (*artifact.Service, artifact.Artifact, artifact.Link, *http.Response) {
	t.Helper()
	svc, _ := artifacttest.Serve(t, miniotest.Shared(t).Store(t), o)
	a, l, err := svc.Publish(t.Context(), artifact.Artifact{MimeType: mimeType}, bytes.NewReader(data), artifact.LinkOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := noFollow.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return svc, a, l, resp
}

// noRedirect allows every fetch but never a redirect.
type noRedirect struct{}

func (noRedirect) Fetch(context.Context, policy.FetchInput) (policy.FetchDecision, error) {
	return policy.FetchDecision{Allow: true}, nil
}

// Redirect mode is the fetch decision's: with --redirect on, a policy that
// does not allow redirect gets the bytes served, not a storage URL.
func TestFetchRedirectNeedsDecision(t *testing.T) {
	_, _, _, resp := fetchNoFollow(t, artifacttest.Options{Redirect: true, Policy: noRedirect{}}, []byte("x"), "text/plain")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("redirect refused by policy: %s, want 200 with the bytes", resp.Status)
	}
}

// Redirect mode answers with a short-lived presigned MinIO URL that
// serves the same bytes, with the artifact's safe content headers; the 302
// itself carries the safety headers.
func TestFetchRedirect(t *testing.T) {
	data := []byte("<html><script>alert(1)</script></html>")
	svc, a, l, resp := fetchNoFollow(t, artifacttest.Options{Redirect: true}, data, "text/html")
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || loc == "" {
		t.Fatalf("redirect mode: %s, Location %q", resp.Status, loc)
	}
	for _, k := range []string{"X-Content-Type-Options", "Content-Security-Policy", "Referrer-Policy", "Cache-Control"} {
		if resp.Header.Get(k) == "" {
			t.Errorf("302 without %s", k)
		}
	}
	resp, err := http.Get(loc)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, data) || resp.Header.Get("Content-Disposition") == "" || resp.Header.Get("Content-Type") != "text/html" {
		t.Errorf("presigned GET: %s %q, disposition %q, type %q", resp.Status, got, resp.Header.Get("Content-Disposition"), resp.Header.Get("Content-Type"))
	}
	if err := svc.Delete(t.Context(), a.ID); err != nil {
		t.Fatal(err)
	}
	if resp, err := noFollow.Get(l.URL); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("after delete: %v %v, want 404", resp.Status, err)
	}
}

// BenchmarkFetch streams one artifact from MinIO through the fetch
// endpoint, beside a direct presigned GET of the same object in the same
// run: the ratio of the two MB/s figures is what matters. B/op must not
// grow with the size.
func BenchmarkFetch(b *testing.B) {
	store := miniotest.Shared(b).Store(b)
	svc, _ := artifacttest.Serve(b, store, artifacttest.Options{})
	for _, size := range []int{10 << 20, 100 << 20} {
		data := make([]byte, size)
		rand.Read(data)
		want := sha256.Sum256(data)
		a, l, err := svc.Publish(context.Background(), artifact.Artifact{MimeType: "application/octet-stream"}, bytes.NewReader(data), artifact.LinkOptions{TTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		direct, err := store.PresignGet(context.Background(), a.ID, time.Hour, "application/octet-stream", "attachment")
		if err != nil {
			b.Fatal(err)
		}
		get := func(b *testing.B, u string) {
			resp, err := http.Get(u)
			if err != nil {
				b.Fatal(err)
			}
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			resp.Body.Close()
			if err != nil || n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
				b.Fatalf("GET %s: %d bytes, %v", resp.Status, n, err)
			}
		}
		name := map[int]string{10 << 20: "10MiB", 100 << 20: "100MiB"}[size]
		b.Run("direct-minio/"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				get(b, direct.String())
			}
		})
		b.Run("spillway/"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				get(b, l.URL)
			}
		})
	}
}
