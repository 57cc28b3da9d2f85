package artifact_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
	"github.com/spillway-dev/spillway/artifact/fsstore"
)

// gatedStore is a real fsstore whose Stat and Delete can be held at a
// chosen point, to order a fetch against a delete deterministically.
type gatedStore struct {
	artifact.Store
	mu           sync.Mutex
	afterStat    func() // runs once, after the real Stat, before it returns
	beforeDelete func() // runs once, before the real Delete
}

func (g *gatedStore) take(f *func()) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := *f
	*f = nil
	return h
}

func (g *gatedStore) Stat(ctx context.Context, id string) (artifact.Artifact, error) {
	a, err := g.Store.Stat(ctx, id)
	if h := g.take(&g.afterStat); h != nil {
		h()
	}
	return a, err
}

func (g *gatedStore) Delete(ctx context.Context, id string) error {
	if h := g.take(&g.beforeDelete); h != nil {
		h()
	}
	return g.Store.Delete(ctx, id)
}

func newGated(t *testing.T) (*gatedStore, *artifact.Service) {
	fs, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedStore{Store: fs}
	svc, _ := artifacttest.Serve(t, g, artifacttest.Options{Cache: artifact.NewCache(artifact.CacheOptions{})})
	return g, svc
}

func status(t *testing.T, method, url string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// A fetch that runs while Delete is deleting from the store must not leave
// the artifact cached: it was served 0, 2 and 4 s after DELETE returned
// 204 when the cache was evicted before the store delete.
func TestDeleteRacingFetchLeavesNothingCached(t *testing.T) {
	g, svc := newGated(t)
	ctx := context.Background()
	a, l, err := svc.Publish(ctx, artifact.Artifact{MimeType: "text/plain"}, strings.NewReader("secret"), artifact.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := status(t, "GET", l.URL); s != 200 {
		t.Fatalf("before delete: %d", s)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	g.beforeDelete = func() { close(entered); <-release }
	done := make(chan error)
	go func() { done <- svc.Delete(ctx, a.ID) }()
	<-entered
	// Delete has not returned: serving is still allowed, caching is not.
	if s := status(t, "GET", l.URL); s != 200 {
		t.Fatalf("during delete: %d", s)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"GET", "HEAD"} {
		if s := status(t, m, l.URL); s != 404 {
			t.Errorf("%s after Delete returned: %d, want 404", m, s)
		}
	}
}

// A fetch whose Stat read the store before the delete and returns after
// it must not cache the metadata (the tombstone): HEAD needs nothing more.
func TestDeleteTombstoneStopsInFlightFetch(t *testing.T) {
	g, svc := newGated(t)
	ctx := context.Background()
	// Put through the store, not the service, so nothing is cached yet.
	a, err := g.Put(ctx, artifact.Artifact{ID: artifact.NewID(), MimeType: "text/plain", Expires: time.Now().Add(time.Hour)}, strings.NewReader("secret"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := svc.Link(ctx, a, artifact.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	statted, release := make(chan struct{}), make(chan struct{})
	g.afterStat = func() { close(statted); <-release }
	inflight := make(chan int)
	go func() { inflight <- status(t, "HEAD", l.URL) }()
	<-statted
	if err := svc.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-inflight // began before the delete: its answer may be either
	if s := status(t, "HEAD", l.URL); s != 404 {
		t.Fatalf("HEAD after Delete returned: %d, want 404", s)
	}
}
