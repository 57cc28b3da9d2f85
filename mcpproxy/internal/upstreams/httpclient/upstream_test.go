package httpclient

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/policy/policytest"
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

// Item 4 of issue 20: the configured URL, query included (how hosted
// servers take their key), reaches the upstream whole on every request:
// POST, GET, DELETE, and on the legacy transport the endpoint's POSTs,
// whose URL the server chose.
func TestConfiguredURLReachesWhole(t *testing.T) {
	const query = "key=s3cret&x=1"
	t.Run("streamable", func(t *testing.T) {
		var j journal
		url := serve(t, func(w http.ResponseWriter, r *http.Request) {
			m := request(r)
			j.add("%s %s ?%s", r.Method, m.Method, r.URL.RawQuery)
			switch {
			case r.Method == http.MethodGet:
				events(w, ": open\n\n")
				<-r.Context().Done()
			case m.Method == "initialize":
				w.Header().Set("Mcp-Session-Id", "s1")
				answer(w, m, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)
			case m.IsRequest():
				answer(w, m, `{}`)
			default:
				w.WriteHeader(http.StatusAccepted)
			}
		})
		c := dial(t, Options{URL: url + "?" + query, Transport: Streamable})
		handshake(t, c)
		call(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		waitFor(t, 5*time.Second, "the GET stream", func() bool { return len(j.list()) == 4 })
		c.Close()
		got := j.list()
		if len(got) != 5 {
			t.Fatalf("requests %q", got)
		}
		for _, g := range got {
			if !strings.HasSuffix(g, " ?"+query) {
				t.Errorf("%s: not the configured query", g)
			}
		}
	})
	t.Run("legacy", func(t *testing.T) {
		var j journal
		url := serve(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				j.add("GET ?%s", r.URL.RawQuery)
				events(w, "event: endpoint\ndata: /messages?sessionId=a%2Bb\n\n")
				<-r.Context().Done()
				return
			}
			m := request(r)
			j.add("POST %s ?%s", m.Method, r.URL.RawQuery)
			w.WriteHeader(http.StatusAccepted)
		})
		c := dial(t, Options{URL: url + "?" + query, Transport: Legacy})
		send(t, c, initialize)
		send(t, c, initialized)
		want := "GET ?" + query + "|POST initialize ?sessionId=a%2Bb&" + query + "|POST notifications/initialized ?sessionId=a%2Bb&" + query
		if got := strings.Join(j.list(), "|"); got != want {
			t.Errorf("requests\n%s\nwant\n%s", got, want)
		}
	})
}

// Item 4 of issue 20: an unreachable upstream is named in errors and logs
// without its query or userinfo, on every transport.
func TestUnreachableUpstreamRedacted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // nothing listens there now
	dead := "http://bob:pw-s3cret@" + ln.Addr().String() + "/mcp?key=s3cret"
	for _, transport := range []string{Auto, Streamable, Legacy} {
		t.Run("transport="+transport, func(t *testing.T) {
			var logs policytest.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c := dial(t, Options{URL: dead, Transport: transport, Logger: log})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := c.Send(ctx, msg(t, initialize))
			if err == nil {
				t.Fatal("Send to a closed port succeeded")
			}
			c.Close()
			for what, text := range map[string]string{"error": err.Error(), "log": logs.String()} {
				if strings.Contains(text, "s3cret") {
					t.Errorf("the %s shows the credentials: %s", what, text)
				}
			}
			if !strings.Contains(err.Error(), ln.Addr().String()+"/mcp?redacted") {
				t.Errorf("the error does not say which upstream: %v", err)
			}
		})
	}
	if _, err := New(Options{URL: "ftp://bob:pw-s3cret@h/mcp?key=s3cret"}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("New: %v", err)
	}
}
