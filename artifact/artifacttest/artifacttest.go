// Package artifacttest runs a real artifact service on loopback for
// tests: a Service on the given store, with a fresh signing key, the
// built-in policy deciding mints and fetches, and its fetch endpoint
// served over HTTP.
package artifacttest

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/policy"
)

// Serve starts the service on store until t ends. redirect answers
// fetches with presigned storage URLs (S3 stores). It returns the service
// (its links point at the server) and the fetch handler.
func Serve(t testing.TB, store artifact.Store, redirect bool) (*artifact.Service, *artifact.Handler) {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	signer, err := artifact.NewSigner(artifact.Key{ID: "test", Secret: key})
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
	svc := &artifact.Service{Store: store, Signer: signer, PublicURL: u, Mint: eng}
	h := artifact.NewHandler(svc, artifact.HandlerOptions{Policy: eng, Redirect: redirect, Logger: slog.New(slog.DiscardHandler)})
	r := mux.NewRouter()
	h.Register(r)
	srv := &http.Server{Handler: r}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return svc, h
}
