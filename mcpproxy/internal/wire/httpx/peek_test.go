package httpx

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// countingBody counts the bytes read from it.
type countingBody struct {
	io.Reader
	n int
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.Reader.Read(p)
	c.n += n
	return n, err
}
func (c *countingBody) Close() error { return nil }

func TestPeekBody(t *testing.T) {
	const msg = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	src := &countingBody{Reader: strings.NewReader(msg)}
	r, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	r.Body = src
	for i := range 2 { // the second peek reads nothing more
		b, err := PeekBody(r, 1<<10)
		if err != nil || string(b) != msg || src.n != len(msg) {
			t.Fatalf("peek %d: %q %v, %d bytes read from the body", i, b, err, src.n)
		}
	}
	if b, _ := io.ReadAll(r.Body); string(b) != msg {
		t.Fatalf("the face reads %q", b)
	}

	r.Body = &countingBody{Reader: strings.NewReader(strings.Repeat("x", 100))}
	if _, err := PeekBody(r, 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over max: %v", err)
	}
	if b, err := PeekBody(r, 200); err != nil || len(b) != 100 { // a larger max reads the rest
		t.Fatalf("the same body under a larger max: %d bytes, %v", len(b), err)
	}
	if b, _ := io.ReadAll(r.Body); len(b) != 100 {
		t.Fatalf("after a refused peek the face reads %d bytes, want 100", len(b))
	}

	// A body somebody began to read is peeked afresh, from where it is.
	r.Body = &countingBody{Reader: strings.NewReader("abcdef")}
	PeekBody(r, 10)
	io.ReadFull(r.Body, make([]byte, 2))
	if b, err := PeekBody(r, 10); err != nil || string(b) != "cdef" {
		t.Fatalf("peek after a read: %q %v", b, err)
	}
}
