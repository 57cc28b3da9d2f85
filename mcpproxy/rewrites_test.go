package mcpproxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/stdio"
	"github.com/spillway-dev/spillway/policy"
)

// heldStore holds every Put until let is called, counting the Puts
// under way and the most there ever were at once.
type heldStore struct {
	artifact.Store
	mu        sync.Mutex
	now, most int
	entered   chan struct{}
	release   chan struct{}
	once      sync.Once
}

// let releases every Put, held or to come.
func (h *heldStore) let() { h.once.Do(func() { close(h.release) }) }

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

// rewriting returns the options of a proxy that offloads to a store
// whose Puts are held (see heldStore) until the test ends.
func rewriting(t *testing.T) (mcpproxy.Options, *heldStore) {
	fs, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &heldStore{Store: fs, entered: make(chan struct{}, 256), release: make(chan struct{})}
	t.Cleanup(store.let)
	svc, _ := serviceOn(t, store)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return mcpproxy.Options{Artifacts: svc, Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{}), StrictEras: true}, store
}

// held waits until n Puts entered the store, and fails t past a deadline.
func (h *heldStore) held(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.entered:
		case <-time.After(30 * time.Second):
			t.Fatalf("fewer than %d results were ever stored at once", n)
		}
	}
}

// checkMost fails t if more than DefaultMaxRewrites Puts ran at once.
func (h *heldStore) checkMost(t *testing.T, calls int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("%d large calls: %d stored at once at most", calls, h.most)
	if h.most > stdio.DefaultMaxRewrites {
		t.Errorf("%d stores at once, want at most %d", h.most, stdio.DefaultMaxRewrites)
	}
}

// A stdio client sends more large calls than the face rewrites at once:
// at most DefaultMaxRewrites are stored at once, the others wait their
// turn, and a ping sent meanwhile is answered. Then the client goes away,
// the stores still held, and ServeStdio returns.
func TestStdioRewritesBounded(t *testing.T) {
	o, store := rewriting(t)
	o.Upstream = &mcpproxy.HTTPUpstream{URL: bigHTTPUpstream(t, 64<<10, false), Transport: "streamable"}
	p, err := mcpproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(context.Background(), inR, outW) }()
	const calls = stdio.DefaultMaxRewrites + 4
	for i := range calls {
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{}}}`+"\n", i+1)
	}
	store.held(t, stdio.DefaultMaxRewrites)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":"ping","method":"ping"}`)
	answered := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(outR).ReadString('\n')
		answered <- l
	}()
	select {
	case l := <-answered:
		if !strings.Contains(l, `"id":"ping"`) {
			t.Errorf("the first line out: %.200s, want the ping's answer", l)
		}
	case <-time.After(30 * time.Second):
		t.Error("the ping was never answered while the results were stored")
	}
	inW.Close() // the client goes away
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ServeStdio did not return after its client went away")
	}
	store.checkMost(t, calls)
}

// The same on a session of the HTTP face: at most 16 of its results are
// stored at once, a ping on the session is answered meanwhile, and once
// the store lets go every call is answered.
func TestSessionRewritesBounded(t *testing.T) {
	o, store := rewriting(t)
	_, url := childProxy(t, "plain", o)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a deadlock guard
	defer cancel()
	sid := initSession(t, ctx, url)
	const calls = stdio.DefaultMaxRewrites + 4
	answers := make(chan string, calls+1)
	post := func(body string) {
		resp, err := sessionPost(ctx, url, sid, body)
		if err != nil {
			answers <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answers <- string(b)
	}
	big := strings.Repeat("x", 64<<10)
	for i := range calls {
		go post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"%s"}}}`, i+1, big))
	}
	store.held(t, stdio.DefaultMaxRewrites)
	go post(`{"jsonrpc":"2.0","id":"ping","method":"ping"}`)
	select {
	case a := <-answers:
		if !strings.Contains(a, `"id":"ping"`) {
			t.Errorf("the first answer: %.200s, want the ping's", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ping was never answered while the results were stored")
	}
	store.checkMost(t, calls)
	store.let()
	for range calls {
		if a := <-answers; !strings.Contains(a, `"result"`) {
			t.Errorf("a call answered %.200s", a)
		}
	}
}
