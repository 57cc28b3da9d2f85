package policy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/policy"
)

// allowAll is the fetch endpoint with the policy off: every verified token
// is served. It is the anchor for the cost of a decision.
type allowAll struct{}

func (allowAll) Fetch(context.Context, policy.FetchInput) (policy.FetchDecision, error) {
	return policy.FetchDecision{Allow: true}, nil
}

// BenchmarkFetchPolicy fetches the same artifact over loopback HTTP with the
// policy off, the built-in policy and the hardened example.
func BenchmarkFetchPolicy(b *testing.B) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	def, err := policy.New(ctx, policy.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	hard, err := policy.New(ctx, policy.Options{Dir: "../examples/policies/hardened", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	store, err := fsstore.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	key := make([]byte, 32)
	rand.Read(key)
	signer, err := artifact.NewSigner(artifact.Key{ID: "bench", Secret: key})
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{4 << 10, 10 << 20} {
		for _, p := range []struct {
			name string
			pol  artifact.FetchAuthorizer
		}{{"off", allowAll{}}, {"default", def}, {"hardened", hard}} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, p.name), func(b *testing.B) {
				srv := httptest.NewServer(nil)
				defer srv.Close()
				u, _ := url.Parse(srv.URL)
				svc := &artifact.Service{Store: store, Signer: signer, PublicURL: u, Mint: def, Cache: artifact.NewCache(artifact.CacheOptions{})}
				r := mux.NewRouter()
				artifact.NewHandler(svc, artifact.HandlerOptions{Policy: p.pol, Logger: quiet}).Register(r)
				srv.Config.Handler = r
				body := bytes.Repeat([]byte("x"), size)
				_, l, err := svc.Publish(ctx, artifact.Artifact{MimeType: "text/plain"}, bytes.NewReader(body), artifact.LinkOptions{})
				if err != nil {
					b.Fatal(err)
				}
				c := srv.Client()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					resp, err := c.Get(l.URL)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || n != int64(size) {
						b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
					}
				}
			})
		}
	}
}
