package main

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Hostile clients against the real `spillway serve`: each is a raw TCP
// connection on loopback that behaves as a slow or greedy peer would.

const testToken = "limits-token-0123456789"

// bigFile writes n random bytes to a file and returns its path.
func bigFile(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	p := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serverConns counts the TCP connections this process holds open (with a
// descriptor) whose local port is port: the server's side of its clients.
func serverConns(t *testing.T, port string) int {
	t.Helper()
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(l)
			// local address, state (0A: listening), inode (0: no descriptor left)
			if len(fs) > 9 && strings.HasSuffix(fs[1], want) && fs[3] != "0A" && fs[9] != "0" {
				n++
			}
		}
	}
	return n
}

// eventually polls cond every 50 ms and fails t unless it holds within bound.
func eventually(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > bound {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s after %v", what, time.Since(start).Round(10*time.Millisecond))
}

// dial opens a raw connection with a small, fixed receive buffer (so that
// the kernel does not read on the client's behalf) and sends head.
func dial(t *testing.T, addr, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return c
}

func getHead(u *url.URL) string {
	return fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.RequestURI(), u.Host)
}

// Clients that never read their fetch are cut after the write stall
// timeout and release the server's descriptors; a client that reads slowly
// but steadily gets every byte.
func TestFetchClientThatNeverReads(t *testing.T) {
	const stall = 2 * time.Second
	data := t.TempDir()
	base := startServe(t, data, "--write-stall-timeout", stall.String(), "--max-per-addr", "0")
	const size = 32 << 20
	l := putFile(t, base, data, bigFile(t, size))
	u, _ := url.Parse(l.HTTPURL)
	_, port, _ := net.SplitHostPort(u.Host)

	const n = 20
	var conns []net.Conn
	for range n {
		conns = append(conns, dial(t, u.Host, getHead(u)))
	}
	eventually(t, 5*time.Second, "all clients connected", func() bool { return serverConns(t, port) == n })
	eventually(t, stall+5*time.Second, "server-side connections closed", func() bool { return serverConns(t, port) == 0 })
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.Copy(io.Discard, c)
		if got >= size || (err != nil && !strings.Contains(err.Error(), "reset")) {
			t.Errorf("client %d: read %d bytes, %v after the cut; want a short body and EOF or reset", i, got, err)
		}
	}

	// Slow but steady: 256 KiB every 100 ms, for longer than the stall
	// timeout. (Each write waits for the kernel to free a third of the
	// socket's send buffer, up to 4 MiB on Linux: the reader must drain
	// that within the timeout, as with nginx's send_timeout.)
	const steadySize = 16 << 20
	steady := putFile(t, base, data, bigFile(t, steadySize))
	c := dial(t, u.Host, getHead(mustURL(t, steady.HTTPURL)))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	var got int64
	for {
		m, err := io.ReadFull(resp.Body, buf)
		got += int64(m)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatalf("steady reader after %d bytes: %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != steadySize {
		t.Fatalf("steady reader got %d bytes, want %d", got, steadySize)
	}
	t.Logf("steady reader: %d bytes in %v (stall timeout %v)", got, time.Since(start).Round(time.Millisecond), stall)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Uploads that drip a byte every 500 ms are cut once a window passes
// without the minimum rate: 408, their temporary files removed, the
// server's descriptors released.
func TestUploadThatDrips(t *testing.T) {
	const window = 2 * time.Second
	data := t.TempDir()
	base := startServe(t, data, "--auth-tokens", testToken+"=acme", "--min-upload-rate", "1024",
		"--upload-window", window.String(), "--max-per-addr", "0")
	u := mustURL(t, base)
	tmp := filepath.Join(data, "artifacts", "tmp")
	temps := func() int {
		es, _ := os.ReadDir(tmp)
		k := 0
		for _, e := range es {
			if strings.HasPrefix(e.Name(), "put-") {
				k++
			}
		}
		return k
	}

	const n = 20
	head := fmt.Sprintf("POST /v1/artifacts HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n", u.Host, testToken)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var conns []net.Conn
	for range n {
		c := dial(t, u.Host, head)
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(500 * time.Millisecond):
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	eventually(t, 5*time.Second, "every upload has a temporary file", func() bool { return temps() == n })
	eventually(t, window+5*time.Second, "temporary files removed", func() bool { return temps() == 0 })
	eventually(t, 5*time.Second, "server-side connections closed", func() bool { return serverConns(t, u.Port()) == 0 })
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("dripping upload %d: %v %v, want 408", i, resp, err)
		}
	}
}

// A client address holding --max-per-addr requests gets 503 with
// Retry-After for the next, until the stall timeout frees its slots.
func TestPerAddressCap(t *testing.T) {
	const stall = time.Second
	data := t.TempDir()
	base := startServe(t, data, "--max-per-addr", "4", "--write-stall-timeout", stall.String())
	l := putFile(t, base, data, bigFile(t, 32<<20))
	u := mustURL(t, l.HTTPURL)
	for range 4 {
		// Held once the handler answers: read the status line, no more.
		c := dial(t, u.Host, getHead(u))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		status := make([]byte, len("HTTP/1.1 200"))
		if _, err := io.ReadFull(c, status); err != nil || string(status) != "HTTP/1.1 200" {
			t.Fatalf("held stream: %q, %v", status, err)
		}
	}
	resp, err := http.Head(l.HTTPURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("fifth request: %s, Retry-After %q; want 503 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	eventually(t, stall+5*time.Second, "slots freed", func() bool {
		resp, err := http.Head(l.HTTPURL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
