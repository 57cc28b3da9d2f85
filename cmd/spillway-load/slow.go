package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

var (
	slowN     = flag.Int("slow-clients", 1000, "hostile connections per server in the slow-client measurement; 0 skips it")
	slowWatch = flag.Duration("slow-watch", 135*time.Second, "how long the slow-client measurement watches each server after connecting")
	slowOnly  = flag.Bool("slow-only", false, "run only the slow-client measurement")
	anchorDir = flag.String("anchor-dir", "", "internal: serve this folder as the bare net/http anchor")
	anchorAt  = flag.String("anchor", "", "internal: the anchor's listen address")
)

// slowKinds are the four kinds of hostile connection; each kind is a
// quarter of the connections.
var slowKinds = []string{"silent (no request)", "idle keep-alive", "upload dripping 1 B / 5 s", "fetch never read"}

// slowClients opens n hostile connections to Spillway and, in the same
// run, to a bare net/http server with the same server timeouts (the
// anchor), and samples each server's resident memory and descriptors from
// /proc until the watch ends. Each connection comes from its own loopback
// address (127.0.x.y), as n distinct clients would.
func slowClients() error {
	const token = mcpToken
	dir, _ := os.MkdirTemp("", "spillway-load-slow-")
	defer os.RemoveAll(dir)
	body := make([]byte, 32<<20)
	rand.Read(body)
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), body, 0o600); err != nil {
		return err
	}
	os.WriteFile(filepath.Join(dir, "small.txt"), []byte("ok\n"), 0o600)

	sp := startSpillway("--auth-tokens", token+"=load")
	link, err := upload(sp, token, body)
	if err != nil {
		return err
	}
	fetchURL, _ := url.Parse(link.HTTPURL)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	an := start(self, "-anchor-dir", dir, "-anchor", addr())

	fmt.Printf("## %d slow and idle connections (%s: a quarter each), each from its own address\n\n", *slowN, strings.Join(slowKinds, ", "))
	fmt.Printf("Server timeouts on both sides: ReadHeaderTimeout 10s, IdleTimeout 2m, no WriteTimeout. Spillway adds its\n" +
		"defaults: --write-stall-timeout 30s, --min-upload-rate 1024 over --upload-window 20s, --max-per-addr 64.\n" +
		"Memory is VmRSS (VmHWM for the peak) of the server process; descriptors are /proc/PID/fd.\n\n")
	type side struct {
		name, addr string
		get, small string // request targets
		upload     string
		auth       string
	}
	sides := []side{
		{"bare net/http (anchor): FileServer, uploads copied to a file", an, "/big.bin", "/small.txt", "/upload", ""},
		{"Spillway (fetch a 32 MiB artifact, upload to /v1/artifacts)", sp, fetchURL.RequestURI(), "/healthz", "/v1/artifacts", token},
	}
	for _, s := range sides {
		if err := slowSide(s.name, s.addr, s.get, s.small, s.upload, s.auth); err != nil {
			return err
		}
	}
	return nil
}

// sample is one reading of a server process at a moment of the watch:
// resident memory, its high-water mark and open descriptors (-1 if
// unknown).
type sample struct {
	at       time.Duration
	rss, hwm int64
	fds      int
}

// sampleOf reads the process pid now, at moment at of the watch.
func sampleOf(pid int, at time.Duration) sample {
	s := sample{at: at, hwm: peakRSS(pid), rss: procStatusKB(pid, "VmRSS") << 10, fds: -1}
	if es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.fds = len(es)
	}
	return s
}

// slowSide runs one side: a baseline sample, the connections, then a
// sample every second until the watch ends, and prints what it saw.
func slowSide(name, srv, get, small, upload, auth string) error {
	pid := pid(srv)
	base := sampleOf(pid, 0)
	ctx, cancel := context.WithTimeout(context.Background(), *slowWatch)
	defer cancel()
	t0 := time.Now()
	conns, err := openSlow(ctx, srv, get, small, upload, auth)
	if err != nil {
		return err
	}
	connected := time.Since(t0)
	samples, peak := sampleUntil(ctx, pid, t0)
	cancel()
	conns.wg.Wait()
	time.Sleep(2 * time.Second) // the server notices the closed connections
	end := sampleOf(pid, time.Since(t0))
	fmt.Printf("### %s\n\n", name)
	fmt.Printf("%d connections opened in %v; answered with an error at once: %d.\n\n", *slowN, connected.Round(time.Millisecond), conns.refused)
	printSlowSamples(base, peak, end, samples)
	return nil
}

// slowConns are the hostile connections of one side, each held by a
// goroutine in wg until the watch ends.
type slowConns struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	refused int // answered with an error status at once (the per-address cap, say)
}

// openSlow opens -slow-clients connections to srv, each from its own
// loopback address, and has each played by hold (the kinds in turn)
// until ctx ends.
func openSlow(ctx context.Context, srv, get, small, upload, auth string) (*slowConns, error) {
	conns := &slowConns{}
	for i := range *slowN {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+i/250), byte(2+i%250))}
		c, err := (&net.Dialer{LocalAddr: local}).Dial("tcp", srv)
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		conns.wg.Add(1)
		go func() {
			defer conns.wg.Done()
			defer c.Close()
			kind := i % len(slowKinds)
			if !hold(ctx, c, kind, srv, get, small, upload, auth) {
				conns.mu.Lock()
				conns.refused++
				conns.mu.Unlock()
			}
		}()
	}
	return conns, nil
}

// sampleUntil samples the process every second until ctx ends, and
// returns the samples and the one with the most descriptors.
func sampleUntil(ctx context.Context, pid int, t0 time.Time) (samples []sample, peak sample) {
	peak = sampleOf(pid, 0)
	for tick := time.NewTicker(time.Second); ctx.Err() == nil; {
		select {
		case <-ctx.Done():
		case <-tick.C:
			s := sampleOf(pid, time.Since(t0))
			samples = append(samples, s)
			if s.fds > peak.fds {
				peak = s
			}
		}
	}
	return samples, peak
}

// printSlowSamples prints a side's memory and descriptors before, at the
// peak, at fixed times of the watch, and once the clients have gone.
func printSlowSamples(base, peak, end sample, samples []sample) {
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
	fmt.Printf("| when | VmRSS | descriptors |\n|---|---|---|\n")
	row := func(label string, s sample) {
		fmt.Printf("| %s | %s | %d |\n", label, mb(s.rss), s.fds)
	}
	row("before", base)
	row(fmt.Sprintf("peak descriptors (at %v)", peak.at.Round(time.Second)), peak)
	for _, at := range []time.Duration{15 * time.Second, 25 * time.Second, 40 * time.Second, 90 * time.Second, 130 * time.Second} {
		for _, s := range samples {
			if s.at >= at {
				row(fmt.Sprintf("after %v", at), s)
				break
			}
		}
	}
	row("clients gone", end)
	fmt.Printf("\nVmHWM over the run: %s (%s before): %.1f KB per connection at the peak.\n\n",
		mb(end.hwm), mb(base.hwm), float64(end.hwm-base.hwm)/1e3/float64(*slowN))
}

// hold plays one hostile client of the given kind until ctx ends or the
// server closes the connection. It reports false when the server answered
// at once with an error status.
func hold(ctx context.Context, c net.Conn, kind int, host, get, small, upload, auth string) bool {
	authHdr := ""
	if auth != "" {
		authHdr = "Authorization: Bearer " + auth + "\r\n"
	}
	closed := make(chan struct{})
	go func() { // ends the connection with the watch
		select {
		case <-ctx.Done():
			c.Close()
		case <-closed:
		}
	}()
	defer close(closed)
	switch kind {
	case 0: // silent
		io.Copy(io.Discard, c)
	case 1: // one small request, then idle on the kept-alive connection
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", small, host)
		buf := make([]byte, 4<<10)
		n, _ := c.Read(buf)
		if !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 200")) {
			return false
		}
		io.Copy(io.Discard, c)
	case 2: // an upload that drips
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/octet-stream\r\nContent-Length: 10000000\r\n\r\n", upload, host, authHdr)
		for {
			if _, err := c.Write([]byte("x")); err != nil {
				return true
			}
			select {
			case <-ctx.Done():
				return true
			case <-time.After(5 * time.Second):
			}
		}
	case 3: // a fetch never read
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", get, host)
		<-ctx.Done()
	}
	return true
}

// anchorServe is the bare net/http anchor: the same server timeouts as
// spillway serve, a FileServer, and an upload handler that copies the body
// to a file, with none of Spillway's limits.
func anchorServe() int {
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServer(http.Dir(*anchorDir)))
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.CreateTemp(*anchorDir, "upload-*")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if _, err := io.Copy(f, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	srv := &http.Server{Addr: *anchorAt, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
