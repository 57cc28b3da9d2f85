package mcpproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/stdioface"
	"github.com/spillway-dev/spillway/policy"
)

// heldStore holds every Put until release is closed, counting the Puts
// under way and the most there ever were at once.
type heldStore struct {
	artifact.Store
	mu        sync.Mutex
	now, most int
	entered   chan struct{}
	release   chan struct{}
}

func (h *heldStore) Put(ctx context.Context, meta artifact.Artifact, r io.Reader) (artifact.Artifact, error) {
	h.mu.Lock()
	h.now++
	h.most = max(h.most, h.now)
	h.mu.Unlock()
	h.entered <- struct{}{}
	<-h.release
	h.mu.Lock()
	h.now--
	h.mu.Unlock()
	return artifact.Artifact{}, errors.New("held store: released")
}

// A stdio client sends more large calls than the face rewrites at once,
// then stops reading and goes away: at most DefaultMaxRewrites results
// are stored at once, and ServeStdio returns when the client's input
// ends, the stores still under way (they end by themselves).
func TestStdioRewritesBounded(t *testing.T) {
	fs, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &heldStore{Store: fs, entered: make(chan struct{}, 64), release: make(chan struct{})}
	defer close(store.release)
	svc, _ := serviceOn(t, store)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: bigHTTPUpstream(t, 64<<10, false), Transport: "streamable"},
		Artifacts: svc, Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{}), StrictEras: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	inR, inW := io.Pipe()
	_, outW := io.Pipe() // never read
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(context.Background(), inR, outW) }()
	const calls = stdioface.DefaultMaxRewrites + 4
	for i := range calls {
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{}}}`+"\n", i+1)
	}
	for range stdioface.DefaultMaxRewrites {
		select {
		case <-store.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the results were never stored")
		}
	}
	inW.Close() // the client goes away
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ServeStdio did not return after its client went away")
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	t.Logf("%d calls: %d stored at once at most", calls, store.most)
	if store.most > stdioface.DefaultMaxRewrites {
		t.Errorf("%d stores at once, want at most %d", store.most, stdioface.DefaultMaxRewrites)
	}
}
