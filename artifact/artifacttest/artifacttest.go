// Package artifacttest runs a real artifact service on loopback for
// tests: a Service on the given store, with a fresh signing key, the
// built-in policy deciding mints and fetches, and its fetch endpoint
// served over HTTP.
package artifacttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/policy"
)

// Options vary the service Serve starts.
type Options struct {
	// Redirect answers fetches with presigned storage URLs (S3 stores).
	Redirect bool
	// Policy decides fetches; nil is the built-in policy.
	Policy artifact.FetchAuthorizer
	// Cache is the service's cache; nil: none.
	Cache *artifact.Cache
	// WriteStallTimeout is the handler's (0: its default).
	WriteStallTimeout time.Duration
}

// Serve starts the service on store until t ends. It returns the service
// (its links point at the server) and the fetch handler.
func Serve(t testing.TB, store artifact.Store, o Options) (*artifact.Service, *artifact.Handler) {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	signer, err := token.NewSigner(token.Key{ID: "test", Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(context.Background(), policy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://" + ln.Addr().String())
	if o.Policy == nil {
		o.Policy = eng
	}
	svc := &artifact.Service{Store: store, Signer: signer, PublicURL: u, Mint: eng, Fetch: o.Policy, Cache: o.Cache}
	h := artifact.NewHandler(svc, artifact.HandlerOptions{Redirect: o.Redirect, WriteStallTimeout: o.WriteStallTimeout, Logger: slog.New(slog.DiscardHandler)})
	r := mux.NewRouter()
	h.Register(r)
	srv := &http.Server{Handler: r}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return svc, h
}

// A Range is a fetch's Range header ("" for none) and what the answer
// must be: its status and body[Start:End].
type Range struct {
	Header     string
	Status     int
	Start, End int
}

// CheckRanges fetches link once per range and wants each answer's
// status, its bytes, byte for byte, and the safe headers every served
// byte carries.
func CheckRanges(t testing.TB, link string, body []byte, ranges []Range) {
	t.Helper()
	for _, r := range ranges {
		req, _ := http.NewRequest(http.MethodGet, link, nil)
		if r.Header != "" {
			req.Header.Set("Range", r.Header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != r.Status || !bytes.Equal(got, body[r.Start:r.End]) {
			t.Errorf("Range %q: %s, %d bytes (%v), want %d and bytes %d-%d", r.Header, resp.Status, len(got), err, r.Status, r.Start, r.End)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("Range %q: no safe headers: %v", r.Header, resp.Header)
		}
	}
}
