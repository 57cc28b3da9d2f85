package httpclient

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
)

// An upstream that redirects (307, which keeps the method and body) to
// another origin, here a second loopback server on another port: the
// configured upstream credentials and the message must not reach it, on
// any transport.
func TestRedirectToAnotherOriginRefused(t *testing.T) {
	for _, transport := range []string{Streamable, Auto, Legacy} {
		t.Run("transport="+transport, func(t *testing.T) {
			var elsewhere atomic.Int32
			other := serve(t, func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				w.WriteHeader(http.StatusAccepted)
			})
			url := serve(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other, http.StatusTemporaryRedirect)
			})
			c := dial(t, Options{URL: url, Transport: transport, Header: func(_ *jsonrpc.Message, h http.Header) {
				h.Set("Authorization", "Bearer upstream-secret")
			}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := c.Send(ctx, msg(t, initialize))
			if err == nil {
				// The answer then says what went wrong.
				if r, _ := await(t, c, "0"); r.Error == nil {
					t.Errorf("initialize answered %s", r.Raw)
				}
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the other origin received %d requests (Send: %v)", n, err)
			}
		})
	}
}
