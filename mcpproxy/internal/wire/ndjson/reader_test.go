package ndjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// readAll reads r to its end: the messages' raw bytes, and one entry per
// skipped line ("too large N", or "malformed" and the JSON-RPC code that
// answers it).
func readAll(t testing.TB, r *Reader) (got []string, err error) {
	for {
		m, err := r.Read()
		var tl *TooLargeError
		var mf *MalformedError
		switch {
		case err == nil:
			var b bytes.Buffer
			if err := spill.Expand(&b, m.Raw); err != nil {
				return got, err
			}
			got = append(got, b.String())
		case errors.As(err, &tl):
			got = append(got, fmt.Sprintf("too large %d", tl.Size))
		case errors.As(err, &mf):
			got = append(got, fmt.Sprintf("malformed %d", mf.Code()))
		case errors.Is(err, io.EOF):
			return got, nil
		default:
			return got, err
		}
	}
}

func TestReader(t *testing.T) {
	const a, b = `{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","method":"n"}`
	tests := []struct {
		name, in string
		max      int64
		want     []string
	}{
		{"lines", a + "\n" + b + "\n", 0, []string{a, b}},
		{"CRLF and blank lines", "\r\n" + a + "\r\n \t\n\n" + b + "\r\n", 0, []string{a, b}},
		{"last line without newline", a + "\n" + b, 0, []string{a, b}},
		{"pretty-printed JSON is not a message", "{\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"n\"\n}\n" + b + "\n", 0,
			[]string{"malformed -32700", "malformed -32700", "malformed -32700", "malformed -32700", b}},
		{"a batch is not a message", "[" + b + "]\n" + b + "\n", 0, []string{"malformed -32600", b}},
		{"neither is an id that is an object", `{"jsonrpc":"2.0","id":{},"method":"m"}` + "\n", 0, []string{"malformed -32600"}},
		{"at the limit", a + "\n", int64(len(a)), []string{a}},
		{"at the limit with CRLF", a + "\r\n", int64(len(a)), []string{a}},
		{"one over the limit", a + "\n" + b + "\n", int64(len(a) - 1), []string{fmt.Sprintf("too large %d", len(a)), b}},
		{"over the limit, CRLF, no newline at the end", b + "\n" + a + "\r", int64(len(b)), []string{b, fmt.Sprintf("too large %d", len(a))}},
	}
	s := newSpooler(t, 8) // spools every string longer than 8 bytes
	for _, tt := range tests {
		for _, size := range []int{16, bufSize} {
			for _, spooled := range []bool{false, true} {
				r := newReaderSize(iotest.HalfReader(strings.NewReader(tt.in)), tt.max, size)
				if spooled {
					r.spool = s
				}
				got, err := readAll(t, r)
				if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") {
					t.Errorf("%s (buffer %d, spooled %v): got %q, %v; want %q", tt.name, size, spooled, got, err, tt.want)
				}
			}
		}
	}
}

func TestReaderError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","method":"a"}`+"\n"+`{"jsonrpc":"2.0","me`), iotest.ErrReader(boom)), 0)
	if m, err := r.Read(); err != nil || m.Method != "a" {
		t.Fatalf("first Read = %v, %v", m, err)
	}
	for range 2 { // the cut line is dropped, and the error sticks
		if m, err := r.Read(); !errors.Is(err, boom) {
			t.Fatalf("Read = %v, %v; want boom", m, err)
		}
	}
}

// message streams one message of n bytes carrying id, then a newline, and
// a second small message, without holding either.
type message struct {
	parts [][]byte
	n     int // bytes of filler still to send
	fill  []byte
}

func newMessage(idFirst bool, n int) *message {
	head, tail := `{"jsonrpc":"2.0","id":41,"result":{"t":"`, `"}}`
	if !idFirst {
		head, tail = `{"result":{"t":"`, `"},"jsonrpc":"2.0","id":41}`
	}
	return &message{
		parts: [][]byte{[]byte(head), nil, []byte(tail + "\n" + `{"jsonrpc":"2.0","id":42,"result":{}}` + "\n")},
		n:     n - len(head) - len(tail),
		fill:  bytes.Repeat([]byte("x"), 32<<10),
	}
}

func (m *message) Read(p []byte) (int, error) {
	for len(m.parts) > 0 {
		if m.parts[0] == nil { // the filler
			if m.n == 0 {
				m.parts = m.parts[1:]
				continue
			}
			k := copy(p[:min(len(p), m.n)], m.fill)
			m.n -= k
			return k, nil
		}
		k := copy(p, m.parts[0])
		if m.parts[0] = m.parts[0][k:]; len(m.parts[0]) == 0 {
			m.parts = m.parts[1:]
		}
		return k, nil
	}
	return 0, io.EOF
}

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A line over the cap is discarded as it streams: reading 32 MiB over a
// 1 MiB cap allocates a few buffers, not the message, and the error keeps
// both ends, so the id shows whichever end it is at.
func TestReaderDiscardsWithoutHolding(t *testing.T) {
	for _, idFirst := range []bool{true, false} {
		r := NewReader(newMessage(idFirst, 32<<20), 1<<20)
		var err error
		var next *jsonrpc.Message
		alloc := allocated(func() {
			_, err = r.Read()
			next, _ = r.Read()
		})
		var tl *TooLargeError
		if !errors.As(err, &tl) || tl.Size != 32<<20 || tl.Limit != 1<<20 {
			t.Fatalf("Read = %v; want a TooLargeError of %d bytes", err, 32<<20)
		}
		if g := jsonrpc.Peek(tl.Head, tl.Tail); string(g.ID) != "41" || !g.Response {
			t.Errorf("id first %v: Peek = %+v", idFirst, g)
		}
		if next == nil || string(next.ID) != "42" {
			t.Fatalf("the message after it: %v", next)
		}
		if alloc > 2<<20 {
			t.Errorf("discarding 32 MiB allocated %d bytes", alloc)
		}
	}
}

// A long legal line is kept in about its own size: the blocks it is
// gathered in, then one copy, never the 2-3× of a doubling buffer.
func TestReaderLongLineMemory(t *testing.T) {
	const size = 24 << 20
	r := NewReader(newMessage(true, size), 64<<20)
	var m *jsonrpc.Message
	var err error
	alloc := allocated(func() { m, err = r.Read() })
	if err != nil || len(m.Raw) != size {
		t.Fatalf("Read: %v", err)
	}
	if c := cap(m.Raw); c > size+size/8 {
		t.Errorf("the message holds %d bytes for %d", c, size)
	}
	if alloc > 2*size+2<<20 {
		t.Errorf("reading %d bytes allocated %d", size, alloc)
	}
	t.Logf("a %d MiB line: %.2f× its size allocated, %d bytes held", size>>20, float64(alloc)/size, cap(m.Raw))
}

// malformed is what readAll says of a line the decoder refuses: -32700
// when it is not JSON, -32600 when it is JSON but not one message.
func malformed(line string) string {
	if json.Valid([]byte(line)) {
		return "malformed -32600"
	}
	return "malformed -32700"
}

// FuzzReader: whatever arrives, the reader does not panic; every message
// it yields is one line the decoder accepts, within the cap; every line it
// skips is over the cap or malformed, exactly as a line-by-line model says.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\n{\"jsonrpc\":\"2.0\",\"method\":\"n\"}"), uint8(40), uint8(3))
	f.Add([]byte("{\n\"jsonrpc\":\"2.0\"}\n[1]\n   \r\n\r"), uint8(5), uint8(1))
	fuzzSpooler := newSpooler(f, 4)
	f.Fuzz(func(t *testing.T, in []byte, max, chunk uint8) {
		limit := int64(max) + 1
		var want []string
		over := map[int]string{} // the lines over the cap, by index in want
		lines := strings.Split(string(in), "\n")
		for i, l := range lines {
			l = strings.TrimSuffix(l, "\r")
			switch {
			case i == len(lines)-1 && l == "":
			case int64(len(l)) > limit:
				want = append(want, fmt.Sprintf("too large %d", len(l)))
				over[len(want)-1] = l
			case strings.TrimSpace(l) == "":
			default:
				if m, err := jsonrpc.DecodeMessage([]byte(l)); err == nil {
					want = append(want, string(m.Raw))
				} else {
					want = append(want, malformed(l))
				}
			}
		}
		src := io.Reader(bytes.NewReader(in))
		if chunk%2 == 1 {
			src = iotest.OneByteReader(src)
		}
		r := newReaderSize(src, limit, 16+int(chunk))
		spooled := chunk&2 != 0
		if spooled {
			r.spool = fuzzSpooler
		}
		got, err := readAll(t, r)
		if spooled && err == nil && len(got) == len(want) {
			// A spooled line's long strings do not count against the cap,
			// and a malformed line may be found so before the cap is.
			for i, l := range over {
				_, err := jsonrpc.DecodeMessage([]byte(l))
				if got[i] == malformed(l) && err != nil || got[i] == l && err == nil {
					want[i] = got[i]
				}
			}
		}
		if err != nil || strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("got %q, %v\nwant %q", got, err, want)
		}
		for _, g := range got {
			if g[0] == '{' {
				if _, err := jsonrpc.DecodeMessage([]byte(g)); err != nil || int64(len(g)) > limit && !spooled {
					t.Fatalf("yielded %q", g)
				}
			}
		}
	})
}
