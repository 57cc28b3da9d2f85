package policytest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer that a running server may write to while a
// test reads it. The zero value is empty and ready; safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines waits, up to 10 seconds, until the buffer holds at least n
// lines (a server writes some once its response is out), then parses
// every line as a JSON object. A line that is not one fails t.
func (s *Buffer) Lines(t testing.TB, n int) []map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(s.String(), "\n") < n && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}
