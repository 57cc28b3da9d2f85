package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// serveRun runs `spillway serve` through run() on a free loopback port.
// It returns the base URL, the exit code channel and the server's log.
func serveRun(t *testing.T, ctx context.Context, data string, extra ...string) (string, <-chan int, *policytest.Buffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"serve", "--listen", addr, "--data", data, "--log-level", "info"}, extra...)
	var log policytest.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, nil, &log, &log, func(string) string { return "" }) }()
	return "http://" + addr, done, &log
}

// waitUp polls base until it answers or the server exits.
func waitUp(t *testing.T, base string, done <-chan int) (exited bool, code int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case code := <-done:
			return true, code
		default:
		}
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			return false, 0
		}
	}
	t.Fatal("serve neither answered nor exited within 10 s")
	return
}

// serveMustRefuse runs `spillway serve` through run() and wants it to exit
// non-zero at start, saying wantErr.
func serveMustRefuse(t *testing.T, wantErr string, extra ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done, log := serveRun(t, ctx, t.TempDir(), extra...)
	exited, code := waitUp(t, base, done)
	if !exited {
		cancel()
		<-done
	}
	if !exited || code == 0 || !bytes.Contains([]byte(log.String()), []byte(wantErr)) {
		t.Errorf("serve %v: exited=%v code=%d, want a refusal saying %q\n%s", extra, exited, code, wantErr, log.String())
	}
}
