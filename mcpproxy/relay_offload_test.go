package mcpproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
	"github.com/spillway-dev/spillway/policy"
)

// bigResult is a tools/call response for id whose one text item is
// 160 KB: over any offload threshold.
func bigResult(id int) string {
	text := strings.Repeat("0123456789abcdef", 10_000)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`, id, text)
}

// resumableUpstream is a session-era upstream that answers tools/call
// (id 2) on its POST stream as event e1, and replays e1 to a GET that
// resumes with Last-Event-ID. hold, when set, is called after e1 on the
// POST stream (the stream stays open until it returns).
func resumableUpstream(t *testing.T, hold func(r *http.Request)) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &m)
		event := func() {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "id: e1\ndata: "+bigResult(2)+"\n\n")
			w.(http.Flusher).Flush()
		}
		switch {
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "":
			event()
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"r","version":"1"}}}`, m.ID)
		case m.Method == "tools/call":
			event()
			if hold != nil {
				hold(r)
			}
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(up.Close)
	return up.URL
}

// offloadingProxy is a proxy in front of url that offloads with the
// built-in policy into store (nil: a temp dir).
func offloadingProxy(t *testing.T, url string, store artifact.Store) string {
	if store == nil {
		s, err := fsstore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		store = s
	}
	svc, _ := serviceOn(t, store)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: url, Transport: "streamable"}, Artifacts: svc,
		Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return serve(t, p)
}

// firstData is the data of the first event of r that carries any.
func firstData(t *testing.T, r *sse.Reader) []byte {
	t.Helper()
	for {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("the stream ended without data: %v", err)
		}
		if len(ev.Data) > 0 {
			return ev.Data
		}
	}
}

// A response the upstream replays after Last-Event-ID is offloaded as
// its first delivery was. Before: the first delivery was a preview with
// a link, the replay the whole 160 KB inline.
func TestRelayReplayIsOffloaded(t *testing.T) {
	url := offloadingProxy(t, resumableUpstream(t, nil), nil)
	a := &agent{url: url}
	a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "replay", "version": "1"}})
	resp, r := sseRequest(t, http.MethodPost, url, a.session, nil, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big"}}`)
	first := firstData(t, r)
	resp.Body.Close()
	resp, r = sseRequest(t, http.MethodGet, url, a.session, map[string]string{"Last-Event-ID": "e0"}, "")
	replay := firstData(t, r)
	resp.Body.Close()
	for name, got := range map[string][]byte{"first delivery": first, "replay": replay} {
		if len(got) > 8<<10 || !strings.Contains(string(got), `"resource_link"`) {
			t.Errorf("%s: %d bytes, link %v", name, len(got), strings.Contains(string(got), `"resource_link"`))
		}
	}
}

// gatedStore holds each Put until release, then stores unless the Put's
// context is done by then (as a network store would fail).
type gatedStore struct {
	artifact.Store
	entered, release chan struct{}
	done             chan error
}

func (g *gatedStore) Put(ctx context.Context, meta artifact.Artifact, r io.Reader) (artifact.Artifact, error) {
	g.entered <- struct{}{}
	<-g.release
	a, err := artifact.Artifact{}, ctx.Err()
	if err == nil {
		a, err = g.Store.Put(ctx, meta, r)
	}
	g.done <- err
	return a, err
}

// A result being offloaded when its client leaves is stored all the same
// (its link is there for a replay; the store is not cut half way).
// Before: the store saw the client's cancelled context ("context
// canceled") and the result went inline.
func TestRelayOffloadOutlivesTheClient(t *testing.T) {
	fs, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedStore{Store: fs, entered: make(chan struct{}), release: make(chan struct{}), done: make(chan error, 1)}
	cut := make(chan struct{})
	url := offloadingProxy(t, resumableUpstream(t, func(r *http.Request) {
		<-r.Context().Done() // the client left: the relay's upstream request ends
		close(cut)
	}), g)
	a := &agent{url: url}
	a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "leaver", "version": "1"}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", a.session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-g.entered // the result is being stored
	cancel()    // and its client leaves
	<-cut
	close(g.release)
	if err := <-g.done; err != nil {
		t.Fatalf("the store was cut when the client left: %v", err)
	}
}
