package policy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
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
	def, err := policy.New(ctx, policy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	hard, err := policy.New(ctx, policy.Options{Dir: "../examples/policies/hardened", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	store, err := fsstore.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	policies := []struct {
		name string
		pol  artifact.FetchAuthorizer
		svc  *artifact.Service
	}{{name: "off", pol: allowAll{}}, {name: "default", pol: def}, {name: "hardened", pol: hard}}
	for i := range policies {
		policies[i].svc, _ = artifacttest.Serve(b, store, artifacttest.Options{Policy: policies[i].pol, Cache: artifact.NewCache(artifact.CacheOptions{})})
	}
	for _, size := range []int{4 << 10, 10 << 20} {
		body := bytes.Repeat([]byte("x"), size)
		for _, p := range policies {
			_, l, err := p.svc.Publish(ctx, artifact.Artifact{MimeType: "text/plain"}, bytes.NewReader(body), artifact.LinkOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, p.name), func(b *testing.B) {
				c := &http.Client{}
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
