package offload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// slowStore is a Store of our own in front of a real one: its Put reads
// the bytes chunk bytes at a time, pausing before each read, and with
// stallAfter > 0 stops reading after that many bytes until its context
// ends (a store that hangs mid-upload).
type slowStore struct {
	artifact.Store
	chunk      int
	pause      time.Duration
	stallAfter int64
}

func (s slowStore) Put(ctx context.Context, a artifact.Artifact, r io.Reader) (artifact.Artifact, error) {
	return s.Store.Put(ctx, a, &slowReader{ctx: ctx, r: r, s: s})
}

type slowReader struct {
	ctx  context.Context
	r    io.Reader
	s    slowStore
	read int64
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.s.stallAfter > 0 && r.read >= r.s.stallAfter {
		<-r.ctx.Done()
		return 0, r.ctx.Err()
	}
	time.Sleep(r.s.pause)
	n, err := r.r.Read(p[:min(len(p), r.s.chunk)])
	r.read += int64(n)
	return n, err
}

// rewriteWithin runs Rewrite, failing the test if it has not returned
// within a minute: a stalled store must end the rewrite, never hold it.
func rewriteWithin(t *testing.T, off *Rewriter, c Call, in []byte) ([]byte, []artifact.Artifact, error) {
	t.Helper()
	type answer struct {
		out    []byte
		stored []artifact.Artifact
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		out, stored, err := off.Rewrite(context.Background(), c, in)
		done <- answer{out, stored, err}
	}()
	select {
	case a := <-done:
		return a.out, a.stored, a.err
	case <-time.After(time.Minute):
		t.Fatal("Rewrite never returned")
		return nil, nil, nil
	}
}

// A result whose storing takes many stall intervals but keeps moving is
// stored and linked: the deadline follows progress, not the total. (A
// fixed deadline this long passed the whole text inline.)
func TestStoreSlowButMovingIsStored(t *testing.T) {
	text := strings.Repeat("a line of a long log\n", 100_000) // 2 MB
	// 64 KiB every 100 ms: about 3 s in all, three times the stall bound.
	store := slowStore{Store: testService(t, nil).Store, chunk: StallBytes, pause: 100 * time.Millisecond}
	off := New(testService(t, store), threshold{0}, Options{StoreStall: time.Second})
	out, stored, err := rewriteWithin(t, off, Call{Method: "tools/call", Tool: "t"}, toolResult(map[string]any{"type": "text", "text": text}))
	if err != nil || len(stored) != 1 || stored[0].Size != int64(len(text)) {
		t.Fatalf("stored %v, %v; the client got %d bytes", stored, err, len(out))
	}
	if len(out) > 8<<10 || !bytes.Contains(out, []byte(`"resource_link"`)) {
		t.Fatalf("the client got %d bytes, want a preview and a link: %.300s", len(out), out)
	}
}

// A store that stops moving ends the rewrite within a stall interval or
// two, and a result over the budget then becomes a tool error saying so:
// never the output inline. One within the budget passes as it came.
func TestStoreStalledIsAnError(t *testing.T) {
	text := strings.Repeat("a line of a long log\n", 100_000)
	store := slowStore{Store: testService(t, nil).Store, chunk: 32 << 10, stallAfter: 128 << 10}
	off := New(testService(t, store), threshold{0}, Options{StoreStall: 500 * time.Millisecond})
	out, stored, err := rewriteWithin(t, off, Call{Method: "tools/call", Tool: "t"}, toolResult(map[string]any{"type": "text", "text": text}))
	if err != nil || len(stored) != 0 {
		t.Fatalf("stalled store: stored %v, %v", stored, err)
	}
	var r struct {
		Content []struct{ Text string }
		IsError bool
	}
	if json.Unmarshal(out, &r) != nil || !r.IsError || len(r.Content) != 1 || len(out) > 1024 ||
		!strings.Contains(r.Content[0].Text, "could not be stored") || !strings.Contains(r.Content[0].Text, "2.1 MiB") {
		t.Fatalf("stalled store: the client got %d bytes: %.300s", len(out), out)
	}

	// Failing fast is no different: over the budget, an error.
	dead := New(testService(t, deadStore{}), threshold{0}, Options{})
	out, _, err = dead.Rewrite(context.Background(), Call{Method: "tools/call"}, toolResult(map[string]any{"type": "text", "text": text}))
	if err != nil || len(out) > 1024 || !bytes.Contains(out, []byte(`"isError":true`)) {
		t.Fatalf("store down, over the budget: the client got %d bytes, %v", len(out), err)
	}
	in, _ := json.Marshal(map[string]any{"contents": []any{map[string]any{"uri": "x://a", "text": text}}})
	if out, _, err := dead.Rewrite(context.Background(), Call{Method: "resources/read", URI: "x://a"}, in); !errors.Is(err, ErrWithheld) || out != nil {
		t.Fatalf("resources/read, store down, over the budget: %d bytes, %v", len(out), err)
	}
}

// The stall rule applies only while something is being stored: the
// rewrite's own work (scanning a 50 MB result, a preview, under -race on a
// loaded machine) can take longer than a stall interval with no store in
// sight, and must not be taken for a stalled store. Before storing was
// marked, a 10 ms watch ended the rewrite's context after 10 ms whatever
// was going on.
func TestStallCountsOnlyStoring(t *testing.T) {
	ctx, stop := watchStall(context.Background(), 10*time.Millisecond)
	defer stop()
	time.Sleep(100 * time.Millisecond) // ten intervals of our own work, nothing stored
	if err := context.Cause(ctx); err != nil {
		t.Fatalf("the watch ended the rewrite while nothing was stored: %v", err)
	}
	done := storing(ctx) // a store that then moves nothing
	defer done()
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), ErrStalled) {
			t.Fatalf("cause %v, want ErrStalled", context.Cause(ctx))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a store that moved nothing was never cut")
	}
}
