//go:build !race

// The race detector drops sync.Pool items at random, so allocation
// counts are only exact without it.

package relay

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
)

// maxRelayAllocs is what TestRelayedCallAllocs allows: 159 before one
// hook on Close per request instead of two, one timer per stream instead
// of two, one key per message and one array per header copy; 142 after;
// 138 once untouched events pass on as they came; 135 once the end of a
// stream is told from a too-large event without errors.As and the
// response controller is held by value; 133 once an event is decoded
// without a slice, an SSE writer holds its flusher as it is and the event
// name "message" is not copied; 130 once a remembered call is one
// allocation, not three; 126 once the request's headers fill the map
// NewRequest made and a POST keeps one table of its requests, not two;
// 125 once an SSE reader's scratch space comes with its buffer; 119 once
// requests go through the client's transport alone (Relay.send).
const maxRelayAllocs = 121

// TestRelayedCallAllocs: what the relay allocates for one small
// tools/call in a session (an SSE response of one event), beyond what the
// same client and upstream allocate without it. A bare
// httputil.ReverseProxy allocates about 50 for the same exchange.
func TestRelayedCallAllocs(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Mcp-Session-Id", "s1")
		io.WriteString(w, "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n")
	}))
	defer up.Close()
	rl := New(Options{URL: up.URL, Methods: ownmethods.New(ownmethods.Options{})})
	defer rl.Close()
	rl.bind("s1", "t")
	var buf bytes.Buffer
	call := func(url string) func() {
		c := &client{t: t, url: url, tenant: "t"}
		return func() {
			resp := c.do(context.Background(), http.MethodPost, "s1", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`)
			buf.Reset()
			buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if !bytes.Contains(buf.Bytes(), []byte(`"result"`)) {
				t.Fatalf("%s: %s", resp.Status, buf.Bytes())
			}
		}
	}
	direct := testing.AllocsPerRun(200, call(up.URL))
	relayed := testing.AllocsPerRun(200, call(front(t, rl)))
	t.Logf("allocations per call: direct %v, through the relay %v: the relay's %v", direct, relayed, relayed-direct)
	if added := relayed - direct; added > maxRelayAllocs {
		t.Errorf("the relay allocates %v per call, want at most %d", added, maxRelayAllocs)
	}
}
