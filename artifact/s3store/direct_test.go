//go:build linux

package s3store_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
	"github.com/spillway-dev/spillway/artifact/s3store"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
)

// spliceCounter is an S3 store whose readers count what the fetch
// endpoint reads of them through Read (a buffer of its own), and how many
// handed it their connection instead (artifact.ConnSection).
type spliceCounter struct {
	artifact.Store
	read, conns, closed atomic.Int64
}

func (s *spliceCounter) Open(ctx context.Context, id string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.Store.Open(ctx, id, off, n)
	if err != nil {
		return nil, err
	}
	cr := &countedReader{ReadCloser: rc, read: &s.read, closed: &s.closed}
	if cs, ok := rc.(artifact.ConnSection); ok {
		s.conns.Add(1)
		return &countedConn{countedReader: cr, cs: cs}, nil
	}
	return cr, nil
}

type countedReader struct {
	io.ReadCloser
	read, closed *atomic.Int64
}

func (c *countedReader) Close() error {
	c.closed.Add(1)
	return c.ReadCloser.Close()
}

func (c *countedReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// countedConn is a countedReader that hands over its connection.
type countedConn struct {
	*countedReader
	cs artifact.ConnSection
}

func (c *countedConn) ConnSection() ([]byte, *net.TCPConn, int64) { return c.cs.ConnSection() }
func (c *countedConn) SectionErr(err error) error                 { return c.cs.SectionErr(err) }

// seeded returns n bytes of a fixed pseudo-random sequence.
func seeded(n int) []byte {
	r := rand.New(rand.NewPCG(22, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// serveSeeded publishes size seeded bytes on st, its readers counted,
// behind a fetch endpoint (with o), and returns the counter, the bytes and
// the link's URL.
func serveSeeded(t *testing.T, st artifact.Store, size int, o ...artifacttest.Options) (*spliceCounter, []byte, string) {
	t.Helper()
	store := &spliceCounter{Store: st}
	data := seeded(size)
	return store, data, publishOn(t, store, data, o...)
}

// wantSpliced fails t unless the endpoint spliced exactly one fetch.
func wantSpliced(t *testing.T, store *spliceCounter) {
	t.Helper()
	if c := store.conns.Load(); c != 1 {
		t.Errorf("%d fetches spliced, want 1", c)
	}
}

// publishOn stores data on store behind a fetch endpoint (with o) and
// returns its link's URL.
func publishOn(t *testing.T, store artifact.Store, data []byte, o ...artifacttest.Options) string {
	t.Helper()
	svc, _ := artifacttest.Serve(t, store, append(o, artifacttest.Options{})[0])
	_, l, err := svc.Publish(t.Context(), artifact.Artifact{MimeType: "application/octet-stream"}, bytes.NewReader(data), artifact.LinkOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return l.URL
}

// TestFetchSpliced: an artifact on MinIO (over http) leaves the fetch
// endpoint by splice, whole or as a range, byte for byte: the store hands
// the endpoint its own connection to MinIO, positioned at the body, and
// the endpoint reads nothing through a buffer of its own (through
// minio-go, it read every byte twice in user space: 54 ms of CPU per
// 100 MiB fetch against 28 ms spliced).
func TestFetchSpliced(t *testing.T) {
	store, data, link := serveSeeded(t, miniotest.Shared(t).Store(t), 3<<20+12345) // past any cache, not a multiple of a chunk
	n := len(data)
	artifacttest.CheckRanges(t, link, data, []artifacttest.Range{
		{Header: "", Status: http.StatusOK, Start: 0, End: n},
		{Header: "bytes=70000-2100000", Status: http.StatusPartialContent, Start: 70000, End: 2100001},
		{Header: "bytes=1000000-", Status: http.StatusPartialContent, Start: 1000000, End: n},
		{Header: "bytes=-100", Status: http.StatusPartialContent, Start: n - 100, End: n},
		{Header: "bytes=5-5", Status: http.StatusPartialContent, Start: 5, End: 6},
	})
	// The last two, under 1 MiB, go through minio-go's pooled connections.
	if r, c := store.read.Load(), store.conns.Load(); r != 101 || c != 3 {
		t.Errorf("the endpoint read %d bytes through Read and was handed %d connections, want 101 bytes (the small ranges) and 3", r, c)
	}
}

// TestOpenDirectRead: Open's reader of 1 MiB or more reads the same bytes
// through Read as through its connection, for any range (a smaller one
// comes through minio-go), and Open answers a missing object, or a range
// past the end, as minio-go did (ErrNotFound, empty).
func TestOpenDirectRead(t *testing.T) {
	st := miniotest.Shared(t).Store(t)
	data := seeded(3<<20 + 7)
	a := put(t, st, artifact.Artifact{MimeType: "application/octet-stream"}, data)
	for _, r := range [][2]int64{{0, -1}, {0, int64(len(data))}, {1000, 2 << 20}, {int64(len(data)) - 3, -1}, {10, 1 << 40}, {1000, 5000}} {
		small := r[1] >= 0 && r[1] < 1<<20
		for _, viaConn := range []bool{false, true} {
			rc, err := st.Open(t.Context(), a.ID, r[0], r[1])
			if err != nil {
				t.Fatal(err)
			}
			cs, isConn := rc.(artifact.ConnSection)
			if isConn == small {
				t.Fatalf("Open(%v) on http: %T; want a connection for 1 MiB or more, minio-go's body below", r, rc)
			}
			var got []byte
			if viaConn && isConn {
				head, c, n := cs.ConnSection()
				rest, err := io.ReadAll(io.LimitReader(c, n))
				if err != nil {
					t.Fatal(err)
				}
				got = append(bytes.Clone(head), rest...)
			} else if got, err = io.ReadAll(rc); err != nil {
				t.Fatal(err)
			}
			rc.Close()
			end := int64(len(data))
			if r[1] >= 0 {
				end = min(end, r[0]+r[1])
			}
			if !bytes.Equal(got, data[r[0]:end]) {
				t.Errorf("Open(%v), via its connection %v: %d bytes, want %d-%d", r, viaConn, len(got), r[0], end)
			}
		}
	}
	if _, err := st.Open(t.Context(), artifact.NewID(), 0, -1); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Open of a missing object: %v, want ErrNotFound", err)
	}
	rc, err := st.Open(t.Context(), a.ID, int64(len(data))+10, -1)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(rc); len(b) != 0 || err != nil {
		t.Errorf("Open past the end: %d bytes, %v, want none", len(b), err)
	}
	rc.Close()
}

// getPartial GETs url and reads its body until the first error, returning
// how many bytes came and the error.
func getPartial(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return len(b), err
}

// TestFetchSplicedStall: a MinIO that stops sending in the middle of a
// spliced body (a real server on loopback that forwards the headers and
// 256 KiB, then holds the connection open, silent) fails the fetch within
// IdleTimeout: the client sees a short body, not a hung one.
func TestFetchSplicedStall(t *testing.T) {
	const idle = time.Second
	st, p := proxied(t, func(o *s3store.Options) { o.IdleTimeout = idle })
	store, data, link := serveSeeded(t, st, 4<<20)
	p.StallAfter = 256 << 10
	p.Set(miniotest.StallBody)
	var n int
	err := within(t, idle+10*time.Second, "fetching a stalled body", func() error {
		var err error
		n, err = getPartial(link)
		return err
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) || n < 256<<10 || n >= len(data) {
		t.Errorf("stalled fetch: %d bytes, %v; want a broken body of at least 256 KiB and less than all", n, err)
	}
	wantSpliced(t, store)
}

// TestFetchSplicedSlowClient: a client that stops reading for longer than
// IdleTimeout, twice, in the middle of a spliced body bigger than every
// socket buffer on the way, is not taken for a stalled MinIO: what MinIO
// sent waits to be read. The body arrives whole.
func TestFetchSplicedSlowClient(t *testing.T) {
	const idle = time.Second
	st, _ := proxied(t, func(o *s3store.Options) { o.IdleTimeout = idle })
	store, data, link := serveSeeded(t, st, 48<<20)
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []byte
	buf := make([]byte, 256<<10)
	for _, pause := range []int{1 << 20, 8 << 20} {
		for len(got) < pause {
			m, err := resp.Body.Read(buf)
			got = append(got, buf[:m]...)
			if err != nil {
				t.Fatalf("after %d bytes: %v", len(got), err)
			}
		}
		time.Sleep(idle + idle/2)
	}
	rest, err := io.ReadAll(resp.Body)
	got = append(got, rest...)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("slow client: %d bytes of %d, %v", len(got), len(data), err)
	}
	wantSpliced(t, store)
}

// TestFetchSplicedClientGone: a client that goes away in the middle of a
// spliced body while MinIO is silent ends the fetch at once (the request's
// context), long before IdleTimeout: the endpoint closes the store's
// reader, and with it the connection to MinIO.
func TestFetchSplicedClientGone(t *testing.T) {
	const idle = time.Minute
	st, p := proxied(t, func(o *s3store.Options) { o.IdleTimeout = idle })
	store, data, link := serveSeeded(t, st, 4<<20)
	p.StallAfter = 256 << 10
	p.Set(miniotest.StallBody)

	c := dialGet(t, link)
	// All MinIO sent and no more: the fetch now waits on MinIO, not on a
	// write to the client that the client's going away would fail.
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, p.StallAfter)
	if _, err := io.ReadFull(resp.Body, head); err != nil || !bytes.Equal(head, data[:len(head)]) {
		t.Fatalf("the body's first %d bytes: %v, or not the artifact's", len(head), err)
	}
	if store.closed.Load() != 0 {
		t.Fatal("the fetch ended before the client went away")
	}
	c.Close()
	waitClosed(t, store, "ending the fetch of a client that went away")
	wantSpliced(t, store)
}

// waitClosed waits for the fetch of store's one reader to end.
func waitClosed(t *testing.T, store *spliceCounter, what string) {
	t.Helper()
	within(t, 20*time.Second, what, func() bool {
		for store.closed.Load() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		return true
	})
}

// dialGet sends a GET of link on a connection of its own and returns it.
func dialGet(t *testing.T, link string) net.Conn {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req, _ := http.NewRequest(http.MethodGet, link, nil)
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFetchSplicedWriteStall: a client that stops reading in the middle of
// a spliced body is cut after WriteStallTimeout, as one of a buffered
// body is (MinIO keeps sending, so only the write deadline can end it):
// the endpoint closes the store's reader, and the client gets a short
// body.
func TestFetchSplicedWriteStall(t *testing.T) {
	store, data, link := serveSeeded(t, miniotest.Shared(t).Store(t), 64<<20, artifacttest.Options{WriteStallTimeout: time.Second}) // far more than the socket buffers on the way
	c := dialGet(t, link)
	if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil { // the spliced slices grow
		t.Fatal(err)
	}
	waitClosed(t, store, "cutting a client that stopped reading")
	n, _ := io.Copy(io.Discard, c)
	if n >= int64(len(data)) {
		t.Errorf("the stalled client still got the whole body (%d bytes)", n)
	}
	wantSpliced(t, store)
}

// TestFetchSplicedSlowSteadyClient: a client that reads steadily but far
// slower than the store sends, 64 KiB every 50 ms, on a small receive
// buffer so that Spillway's writes wait on it, is never cut: the body
// arrives whole. (The kernel wakes a writer only once a good part of its
// send buffer is free, up to 2 MiB here: WriteStallTimeout is 5 s.)
func TestFetchSplicedSlowSteadyClient(t *testing.T) {
	store, data, link := serveSeeded(t, miniotest.Shared(t).Store(t), 12<<20, artifacttest.Options{WriteStallTimeout: 5 * time.Second})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) })
		return cmp.Or(err, serr)
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	resp, err := client.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make([]byte, 0, len(data))
	buf := make([]byte, 64<<10)
	for len(got) < len(data) {
		m, err := io.ReadFull(resp.Body, buf[:min(len(buf), len(data)-len(got))])
		got = append(got, buf[:m]...)
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("slow client: wrong bytes")
	}
	wantSpliced(t, store)
}
