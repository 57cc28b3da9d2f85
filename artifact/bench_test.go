package artifact

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
)

// BenchmarkFetchSmallCached is a 4 KiB artifact served from the blob cache
// over real loopback HTTP, policy call included (a fake that allows).
func BenchmarkFetchSmallCached(b *testing.B) {
	f := newFixture(b)
	body := bytes.Repeat([]byte("x"), 4096)
	_, l, err := f.svc.Publish(context.Background(), Artifact{MimeType: "text/plain"}, bytes.NewReader(body), LinkOptions{})
	if err != nil {
		b.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(l.URL)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n != int64(len(body)) {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}
}
