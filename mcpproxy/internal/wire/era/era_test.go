package era

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// answers is an Ask (our own interface) that answers by method.
func answers(byMethod map[string]string) Ask {
	return func(ctx context.Context, req *jsonrpc.Message) (*jsonrpc.Message, error) {
		s, ok := byMethod[req.Method]
		if !ok {
			<-ctx.Done() // silence: a server that never answers
			return nil, ctx.Err()
		}
		return jsonrpc.MustDecode(s), nil
	}
}

func TestProbe(t *testing.T) {
	notFound := `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`
	for _, tc := range []struct {
		name            string
		answers         map[string]string
		versions        []string
		stateless, sess bool
		wantErr         string
	}{
		{name: "stateless only", answers: map[string]string{
			"server/discover": `{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}`,
		}, versions: []string{"2026-07-28"}, stateless: true},
		{name: "both eras", answers: map[string]string{
			"server/discover": `{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2025-11-25","2026-07-28"],"capabilities":{}}}`,
		}, versions: []string{"2025-11-25", "2026-07-28"}, stateless: true, sess: true},
		{name: "session only, discover refused", answers: map[string]string{
			"server/discover": notFound,
			"initialize":      `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`,
		}, versions: []string{"2025-06-18"}, sess: true},
		{name: "discover with no versions", answers: map[string]string{
			"server/discover": `{"jsonrpc":"2.0","id":1,"result":{}}`,
			"initialize":      `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`,
		}, versions: []string{"2025-11-25"}, sess: true},
		{name: "neither", answers: map[string]string{
			"server/discover": notFound, "initialize": notFound,
		}, wantErr: "neither"},
		{name: "initialize without a version", answers: map[string]string{
			"server/discover": notFound, "initialize": `{"jsonrpc":"2.0","id":1,"result":{}}`,
		}, wantErr: "no protocolVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Probe(context.Background(), answers(tc.answers))
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrUnknown) {
					t.Fatalf("err %v, want ErrUnknown (%s)", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(e.Versions, tc.versions) || e.Stateless() != tc.stateless || e.Session() != tc.sess {
				t.Errorf("got %v stateless=%v session=%v, want %v %v %v", e.Versions, e.Stateless(), e.Session(), tc.versions, tc.stateless, tc.sess)
			}
			if tc.sess && !tc.stateless && e.Initialize == nil {
				t.Error("a session-only upstream's initialize result is not kept")
			}
			if e.Speaks("2026-07-28") != tc.stateless || e.Speaks("2025-11-25") != tc.sess || e.Speaks("") != tc.sess {
				t.Error("Speaks disagrees with the eras")
			}
		})
	}
}

// A session-era server that never answers server/discover (over stdio,
// silence) is still learned, after DiscoverWait.
func TestProbeSilentDiscover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits DiscoverWait")
	}
	e, err := Probe(context.Background(), answers(map[string]string{
		"initialize": `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`,
	}))
	if err != nil || !e.Session() || e.Stateless() {
		t.Fatalf("%v %v", e, err)
	}
}

func TestCache(t *testing.T) {
	var probes atomic.Int32
	gate := make(chan struct{})
	c := NewCache(func(ctx context.Context) (Eras, error) {
		probes.Add(1)
		<-gate
		return Eras{Versions: []string{"2025-11-25"}}, nil
	})
	if _, ok := c.Known(); ok {
		t.Fatal("known before any probe")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e, err := c.Get(context.Background()); err != nil || !e.Session() {
				t.Errorf("Get: %v %v", e, err)
			}
		}()
	}
	// A caller that leaves does not end the probe for the others.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled Get: %v", err)
	}
	close(gate)
	wg.Wait()
	if n := probes.Load(); n != 1 {
		t.Errorf("%d probes for 9 concurrent Gets, want 1", n)
	}
	c.Get(context.Background())
	if n := probes.Load(); n != 1 {
		t.Errorf("%d probes after a cached Get, want 1", n)
	}
	c.Forget()
	c.Get(context.Background())
	if n := probes.Load(); n != 2 {
		t.Errorf("%d probes after Forget, want 2", n)
	}
}

func TestCacheError(t *testing.T) {
	var probes atomic.Int32
	down := errors.New("connection refused")
	c := NewCache(func(ctx context.Context) (Eras, error) {
		if probes.Add(1) == 1 {
			return Eras{}, down
		}
		return Eras{Versions: []string{"2026-07-28"}}, nil
	})
	c.retryAfter = 100 * time.Millisecond
	if _, err := c.Get(context.Background()); !errors.Is(err, down) {
		t.Fatalf("first Get: %v, want the probe's error", err)
	}
	// Within retryAfter the error is answered, not probed again.
	if _, err := c.Get(context.Background()); !errors.Is(err, down) || probes.Load() != 1 {
		t.Fatalf("second Get: %v after %d probes", err, probes.Load())
	}
	deadline := time.Now().Add(time.Minute) // a deadlock guard
	for {
		e, err := c.Get(context.Background())
		if err == nil {
			if !e.Stateless() || probes.Load() != 2 {
				t.Fatalf("%v after %d probes", e, probes.Load())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream was never probed again")
		}
		time.Sleep(c.retryAfter / 4)
	}
}

func TestFixed(t *testing.T) {
	c := Fixed(Eras{Versions: []string{"2025-06-18"}})
	c.Forget()
	if e, ok := c.Known(); !ok || !e.Session() {
		t.Fatalf("a configured cache forgot: %v %v", e, ok)
	}
}
