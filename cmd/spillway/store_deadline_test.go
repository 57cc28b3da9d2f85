package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/spillway-dev/spillway/policy/policytest"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
)

// The real `spillway serve` on a real MinIO reached through a proxy that
// turns hostile: a hung store answers fetches and uploads with 503 and
// Retry-After within 10 s (the default store timeout is 5 s), a body that
// stalls mid-stream is cut after the store's idle timeout, and the server
// serves again once the store does.
func TestServeHungStore(t *testing.T) {
	const bound = 10 * time.Second
	srv := miniotest.Start(t)
	proxy := miniotest.NewFaultProxy(t, srv.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	store := fmt.Sprintf("s3://hung?endpoint=%s&secure=false&create=true&region=us-east-1&idle-timeout=2s", proxy.Addr)
	base := runServe(t, "--data", t.TempDir(), "--store", store, "--auth-tokens", testToken+"=acme")

	upload := func(body []byte) (*http.Response, artifact.ResourceLink) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/artifacts", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l artifact.ResourceLink
		json.NewDecoder(resp.Body).Decode(&l)
		return resp, l
	}
	data := make([]byte, 8<<20) // past the blob cache: fetches stream from the store
	rand.Read(data)
	resp, l := upload(data)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s", resp.Status)
	}
	unavailable := func(what string, resp *http.Response, took time.Duration) {
		t.Helper()
		t.Logf("%s on a hung store: %s after %v", what, resp.Status, took.Round(10*time.Millisecond))
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || took > bound {
			t.Errorf("%s: %s, Retry-After %q after %v; want 503 with Retry-After within %v",
				what, resp.Status, resp.Header.Get("Retry-After"), took, bound)
		}
	}
	client := &http.Client{Timeout: bound + 5*time.Second}

	proxy.Set(miniotest.Hang)
	start := time.Now()
	resp, err := client.Get(l.HTTPURL)
	if err != nil {
		t.Fatalf("fetch on a hung store: no answer: %v", err)
	}
	resp.Body.Close()
	unavailable("fetch", resp, time.Since(start))

	start = time.Now()
	resp, _ = upload([]byte("small"))
	unavailable("upload", resp, time.Since(start))

	proxy.StallAfter = 256 << 10
	proxy.Set(miniotest.StallBody)
	start = time.Now()
	resp, err = client.Get(l.HTTPURL)
	if err != nil {
		t.Fatalf("fetch on a stalling store: %v", err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	t.Logf("stalled body: %s, %d bytes, %v after %v", resp.Status, n, err, took.Round(10*time.Millisecond))
	if err == nil || n >= int64(len(data)) || took > bound {
		t.Errorf("stalled body: %d of %d bytes, err %v after %v; want a cut transfer within %v", n, len(data), err, took, bound)
	}

	proxy.Set(miniotest.Pass)
	resp, err = client.Get(l.HTTPURL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after the store recovered: %s, %d bytes, %v", resp.Status, len(got), err)
	}
}

// runServe runs `spillway serve` through run, as main does, on a free
// loopback port until t ends, and returns its base URL once it answers.
func runServe(t *testing.T, args ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr policytest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", addr, "--log-level", "warn"}, args...), nil, io.Discard, &stderr, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, stderr.String())
		}
	})
	base := "http://" + addr
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			return base
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		default:
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("serve did not answer within 30s: %s", stderr.String())
		}
	}
}
