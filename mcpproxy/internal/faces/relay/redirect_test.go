package relay

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
)

// TestRelayRedirects: once the upstream has answered without a redirect
// the relay sends its requests through the client's transport alone
// (send); an upstream that then starts redirecting is still followed
// within its origin, each call processed once where it was sent, and a
// redirect to another origin is still refused, the other origin never
// reached; an upstream gone is answered as before. Without send's
// fallback the client got the 307 itself.
func TestRelayRedirects(t *testing.T) {
	var otherHits, movedHits atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
	}))
	defer other.Close()
	var mode atomic.Value // "", "same" or "cross": where /mcp sends its requests
	mode.Store("")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch m := mode.Load().(string); {
		case r.URL.Path == "/mcp" && m == "same":
			http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
			return
		case r.URL.Path == "/mcp" && m == "cross":
			http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
			return
		case r.URL.Path == "/moved":
			movedHits.Add(1)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"at\":\""+r.URL.Path+"\"}}\n\n")
	}))
	defer up.Close()
	rl := New(Options{URL: up.URL + "/mcp", Methods: ownmethods.New(ownmethods.Options{})})
	defer rl.Close()
	c := &client{t: t, url: front(t, rl), tenant: "a"}
	call := func() string {
		t.Helper()
		resp := c.do(context.Background(), http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Status + " " + string(b)
	}
	for i, step := range []struct{ mode, want string }{
		{"", `"at":"/mcp"`},       // through the client: learns the upstream answers directly
		{"", `"at":"/mcp"`},       // through the transport alone
		{"same", `"at":"/moved"`}, // the transport meets the redirect: sent again through the client
		{"same", `"at":"/moved"`}, // through the client
		{"", `"at":"/mcp"`},
	} {
		mode.Store(step.mode)
		if got := call(); !strings.Contains(got, step.want) {
			t.Fatalf("call %d (%q): %s, want %s", i+1, step.mode, got, step.want)
		}
	}
	if n := movedHits.Load(); n != 2 {
		t.Errorf("/moved processed %d calls, want 2 (each redirected call once)", n)
	}
	for range 2 { // the second through the transport alone
		mode.Store("")
		call()
		mode.Store("cross")
		if got := call(); strings.Contains(got, `"result"`) {
			t.Errorf("a redirect to another origin was followed: %s", got)
		}
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}
	// Through the transport alone, an upstream gone is what it was
	// through the client: a 502 with the request's JSON-RPC error.
	mode.Store("")
	call()
	up.Close()
	if got := call(); !strings.HasPrefix(got, "502 ") || !strings.Contains(got, "upstream MCP server unreachable") {
		t.Errorf("the upstream gone: %s", got)
	}
}
