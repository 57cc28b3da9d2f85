//go:build !race

// The race detector changes allocation counts.

package stall

import (
	"io"
	"strings"
	"testing"
	"time"
)

// A body that comes whole in one read (a small call's answer, the common
// case) costs its guard one allocation, the Reader: the Watch, its timer
// and its callback are made only for a read that starts mid-message.
// Before, every guarded body made all three.
func TestReaderAllocs(t *testing.T) {
	src := strings.NewReader("")
	body := io.NopCloser(src)
	buf := make([]byte, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
		g := Events(body, time.Minute)
		for {
			if _, err := g.Read(buf); err != nil {
				break
			}
		}
		g.Stop()
	})
	if allocs > 1 {
		t.Errorf("%v allocations to guard a body read whole, want 1", allocs)
	}
}
