package mcpproxy_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// Spillway as a client (the stdio face before an HTTP upstream) speaks
// first with a POST of the client's initialize, as the spec's
// backwards-compatibility rule says: no GET probe before it. Messages
// arrive in the client's order.
func TestStdioFacePostsFirst(t *testing.T) {
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		method := ""
		if i := strings.Index(string(b), `"method":"`); i >= 0 {
			method, _, _ = strings.Cut(string(b[i+10:]), `"`)
		}
		mu.Lock()
		got = append(got, r.Method+" "+method)
		mu.Unlock()
		switch {
		case r.Method != http.MethodPost:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
		case method == "tools/list":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer up.Close()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Input ends only once the answers are in, so the face stays up.
	go p.ServeStdio(ctx, io.MultiReader(in, ctxReader{ctx}), pw)
	br := bufio.NewReader(pr)
	for n := 0; n < 2; n++ {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var posts []string
	for _, g := range got {
		if strings.HasPrefix(g, "POST ") {
			posts = append(posts, g)
		}
	}
	// The session's GET stream opens beside, after initialized.
	if len(got) == 0 || got[0] != "POST initialize" || strings.Join(posts, ",") != "POST initialize,POST notifications/initialized,POST tools/list" {
		t.Errorf("the upstream saw %q; want POST initialize first, then the client's order", got)
	}
}

// ctxReader blocks until ctx ends, then reads as EOF.
type ctxReader struct{ ctx context.Context }

func (r ctxReader) Read([]byte) (int, error) {
	<-r.ctx.Done()
	return 0, io.EOF
}
