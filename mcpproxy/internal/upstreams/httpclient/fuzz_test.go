package httpclient

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// FuzzResponse: whatever a server answers (an event stream or a JSON
// body of any bytes), the Conn neither panics nor leaves the request
// without an answer; the next request still works.
func FuzzResponse(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), true)
	f.Add([]byte("id: 1\nretry: 1\ndata:\n\n"), true)
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":null}\r\r"), true)
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"x"}]`), false)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":`), false)
	var body atomic.Pointer[[]byte]
	var sse atomic.Bool
	url := serve(f, func(w http.ResponseWriter, r *http.Request) {
		m := request(r)
		if r.Method != http.MethodPost || m.Method != "fuzz" {
			http.Error(w, "no", http.StatusNotFound) // no resumption: the GET fails at once
			return
		}
		if sse.Load() {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.Write(*body.Load())
	})
	c, err := New(Options{URL: url, Transport: Streamable, MaxMessage: 1 << 10, MaxRetries: 1, MaxRetryDelay: 10 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	f.Fuzz(func(t *testing.T, b []byte, isSSE bool) {
		body.Store(&b)
		sse.Store(isSSE)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"fuzz"}`))
		if err := c.Send(ctx, req); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case m := <-c.Recv():
				if m == nil {
					t.Fatalf("the connection ended: %v", c.Err())
				}
				if m.IsResponse() && string(m.ID) == "1" {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no answer to the request for %q", b)
			}
		}
	})
}
