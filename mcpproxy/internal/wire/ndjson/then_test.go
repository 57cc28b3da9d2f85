package ndjson

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// lockedBuffer is a bytes.Buffer safe to read while a Conn writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// SendThen: the bytes after writes follow their line with nothing
// between, while other messages are sent concurrently; an error of after
// fails the connection.
func TestSendThen(t *testing.T) {
	var out lockedBuffer
	c := NewConn(strings.NewReader(""), &out, Options{Expand: true})
	defer c.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","method":"x"}`)) })
	}
	err := c.SendThen(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"result":{}}`), func(w io.Writer) error {
		_, err := io.WriteString(w, "RAW\x00BYTES")
		return err
	})
	wg.Wait()
	if err != nil || !strings.Contains(out.String(), `{"jsonrpc":"2.0","id":1,"result":{}}`+"\nRAW\x00BYTES") {
		t.Fatalf("%v: %q", err, out.String())
	}
	boom := errors.New("boom")
	if err := c.SendThen(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":2,"result":{}}`), func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("after's error: %v", err)
	}
	if err := c.Send(ctx, jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":3,"result":{}}`)); err == nil {
		t.Error("the connection went on after a frame failed")
	}
}
