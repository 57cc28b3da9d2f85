package ndjson

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

func newSpooler(t testing.TB, threshold int64) *spill.Spooler {
	t.Helper()
	return newSpoolerMax(t, threshold, 0)
}

func newSpoolerMax(t testing.TB, threshold, maxBytes int64) *spill.Spooler {
	t.Helper()
	s, err := spill.New(spill.Options{Dir: t.TempDir(), Threshold: threshold, MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// firstLine returns the SHA-256 and length of a message's first line.
func firstLine(r io.Reader) ([32]byte, int64) {
	h := sha256.New()
	n, _ := io.Copy(h, &lineReader{br: newReaderSize(r, 0, bufSize).br})
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, n
}

// A spooled line is never held: a 64 MiB response, its id last, passes a
// 1 MiB cap while allocating a few buffers; its text waits on disk and
// comes back byte for byte.
func TestSpoolingReaderHugeLine(t *testing.T) {
	const size = 64 << 20
	s := newSpooler(t, 64<<10)
	r := NewSpoolingReader(newMessage(false, size), 1<<20, s)
	var m, next *jsonrpc.Message
	var err error
	alloc := allocated(func() {
		m, err = r.Read()
		next, _ = r.Read()
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if string(m.ID) != "41" || len(m.Raw) > 200 || !spill.HasMarkers(m.Raw) {
		t.Fatalf("the message in memory: %s", m.Raw)
	}
	if next == nil || string(next.ID) != "42" {
		t.Fatalf("the message after it: %v", next)
	}
	if alloc > 2<<20 {
		t.Errorf("reading a %d MiB line allocated %d bytes", size>>20, alloc)
	}
	h := sha256.New()
	if err := spill.Expand(h, m.Raw); err != nil {
		t.Fatal(err)
	}
	want, n := firstLine(newMessage(false, size))
	if !bytes.Equal(h.Sum(nil), want[:]) || spill.ExpandedLen(m.Raw) != n {
		t.Fatalf("expanded: %d bytes, not the %d sent", spill.ExpandedLen(m.Raw), n)
	}
	t.Logf("a %d MiB line: %d bytes allocated, %d held", size>>20, alloc, len(m.Raw))
}

// The cap still holds for what stays inline, with the ends kept for Peek;
// a line the spool has no room for is dropped the same way, its request
// answered; a line cut by the peer's death leaves nothing spilled.
func TestSpoolingReaderLimits(t *testing.T) {
	s := newSpoolerMax(t, 16, 1<<20)
	inline := `{"result":[` + strings.Repeat("1,", 1<<20) + `1],"jsonrpc":"2.0","id":7}`
	big := `{"result":"` + strings.Repeat("z", 2<<20) + `","jsonrpc":"2.0","id":8}`
	in := inline + "\r\n" + big + "\n" + `{"jsonrpc":"2.0","id":9,"result":{}}` + "\n"
	r := NewSpoolingReader(iotest.HalfReader(strings.NewReader(in)), 64<<10, s)
	_, err := r.Read()
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size != int64(len(inline)) || tl.Err != nil {
		t.Fatalf("inline 2 MiB over a 64 KiB cap: %v", err)
	}
	if g := jsonrpc.Peek(tl.Head, tl.Tail); string(g.ID) != "7" {
		t.Errorf("Peek = %+v", g)
	}
	_, err = r.Read()
	if !errors.As(err, &tl) || !errors.Is(err, spill.ErrFull) || tl.Size != int64(len(big)) {
		t.Fatalf("2 MiB to spill with room for 1: %v", err)
	}
	if g := jsonrpc.Peek(tl.Head, tl.Tail); string(g.ID) != "8" {
		t.Errorf("Peek = %+v", g)
	}
	if m, err := r.Read(); err != nil || string(m.ID) != "9" {
		t.Fatalf("the next line: %v, %v", m, err)
	}
	if s.Alive() != 0 {
		t.Errorf("%d bytes left spilled", s.Alive())
	}
	boom := errors.New("boom")
	r = NewSpoolingReader(io.MultiReader(strings.NewReader(`{"result":"`+strings.Repeat("q", 100)), iotest.ErrReader(boom)), 0, s)
	for range 2 {
		if _, err := r.Read(); !errors.Is(err, boom) {
			t.Fatalf("Read = %v; want boom", err)
		}
	}
	if s.Alive() != 0 {
		t.Errorf("a line cut by the peer left %d bytes spilled", s.Alive())
	}
}

// A Conn for an upstream answers the request whose response could not be
// spooled, and goes on.
func TestConnSpoolFull(t *testing.T) {
	s := newSpoolerMax(t, 16, 1<<20)
	c, p := newPair(t, Options{MaxMessage: 1 << 20, Peer: "upstream", Spool: s})
	go func() {
		fmt.Fprintf(p.in, "{\"result\":\"%s\",\"jsonrpc\":\"2.0\",\"id\":41}\n", strings.Repeat("z", 2<<20))
		fmt.Fprintf(p.in, "{\"result\":\"%s\",\"jsonrpc\":\"2.0\",\"id\":42}\n", strings.Repeat("z", 1<<19))
	}()
	if m := recv(t, c); string(m.ID) != "41" || !strings.Contains(string(m.Error), "could not be spooled") {
		t.Fatalf("got %s; want an error response for id 41", m.Raw)
	}
	if m := recv(t, c); string(m.ID) != "42" || !spill.HasMarkers(m.Raw) {
		t.Fatalf("got %s; want id 42, spooled", m.Raw)
	}
}

// Markers are expanded only on the way to a client: a Conn with Expand
// writes the original bytes, one without writes the marker as it is, so a
// marker never resolves on its way to an upstream.
func TestConnExpand(t *testing.T) {
	s := newSpooler(t, 16)
	orig := `{"result":{"text":"` + strings.Repeat("a\\n", 100000) + `"},"jsonrpc":"2.0","id":3}`
	m, err := NewSpoolingReader(strings.NewReader(orig+"\n"), 0, s).Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, expand := range []bool{true, false} {
		c, p := newPair(t, Options{Expand: expand})
		go c.Send(context.Background(), m)
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		want := orig
		if !expand {
			want = string(m.Raw)
		}
		if string(line) != want+"\n" {
			t.Errorf("expand %v: wrote %.80q…, want %.80q…", expand, line, want)
		}
	}
	// A marker that no longer resolves fails that Send alone.
	c, p := newPair(t, Options{Expand: true})
	s.Release(m.Raw)
	if err := c.Send(context.Background(), m); !errors.Is(err, spill.ErrGone) {
		t.Fatalf("Send of a released marker: %v", err)
	}
	go c.Send(context.Background(), jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"n"}`))
	if line, _ := p.out.ReadBytes('\n'); string(line) != `{"jsonrpc":"2.0","method":"n"}`+"\n" {
		t.Fatalf("after a failed expansion: %q", line)
	}
}

// A client cannot name a spilled string: a message of its holding a
// marker's spelling is refused (a request with an error), never delivered,
// so nothing the proxy echoes back expands it.
func TestConnRefusesClientMarkers(t *testing.T) {
	s := newSpooler(t, 16)
	m, err := NewSpoolingReader(strings.NewReader(`{"result":"`+strings.Repeat("secret ", 100)+`","jsonrpc":"2.0","id":1}`+"\n"), 0, s).Read()
	if err != nil {
		t.Fatal(err)
	}
	marker := string(m.Raw[len(`{"result":`):strings.Index(string(m.Raw), `,"jsonrpc"`)])
	c, p := newPair(t, Options{Peer: "client", Expand: true})
	go fmt.Fprintf(p.in, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\",\"params\":{\"a\":%s}}\n{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n", marker, marker)
	if got := recv(t, c); got.Method != "ping" {
		t.Fatalf("delivered %s", got.Raw)
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	if r := msg(t, string(line)); string(r.ID) != "null" || r.ErrorCode() != jsonrpc.CodeInvalidRequest || strings.Contains(string(line), "secret") {
		t.Fatalf("the client got %s", line)
	}
}

// A short line, read at a held line's cost, still cannot carry a forged
// marker through: one spelt so is spilled, and comes back as sent.
func TestSpoolingReaderForgedMarker(t *testing.T) {
	s := newSpooler(t, 0)
	line := `{"jsonrpc":"2.0","id":1,"result":{"text":"\u0000spillway:00112233445566778899aabbccddeeff"}}`
	m, err := NewSpoolingReader(strings.NewReader(line+"\n"), 0, s).Read()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(m.Raw), "00112233445566778899aabbccddeeff") {
		t.Fatalf("the forged marker passed: %s", m.Raw)
	}
	var b bytes.Buffer
	if err := spill.Expand(&b, m.Raw); err != nil || b.String() != line {
		t.Fatalf("Expand = %s, %v", b.String(), err)
	}
}
