package child

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"sync"
)

// MaxStderrLine is the most of one stderr line that is logged; the rest
// of a longer line is counted and dropped, and reading goes on.
const MaxStderrLine = 16 << 10

// stderrLog logs a child's stderr line by line. exec's goroutine writes
// to it until the child's stderr ends; it never blocks longer than the
// logger and never fails, so the child can always write.
type stderrLog struct {
	mu      sync.Mutex
	log     *slog.Logger
	line    []byte // the current line, up to MaxStderrLine
	dropped int    // bytes of it beyond that
}

func (s *stderrLog) setLogger(log *slog.Logger) {
	s.mu.Lock()
	s.log = log
	s.mu.Unlock()
}

func (s *stderrLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		if r := recover(); r != nil { // a logger's bug must not stop the draining
			s.line, s.dropped = s.line[:0], 0
			s.log.Error("panic logging the upstream's stderr", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	n := len(p)
	for len(p) > 0 {
		part, rest, eol := bytes.Cut(p, []byte("\n"))
		room := min(MaxStderrLine-len(s.line), len(part))
		s.line = append(s.line, part[:room]...)
		s.dropped += len(part) - room
		if !eol {
			break
		}
		s.emit()
		p = rest
	}
	return n, nil
}

// flush logs a last line without a newline.
func (s *stderrLog) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.line) > 0 || s.dropped > 0 {
		s.emit()
	}
}

func (s *stderrLog) emit() {
	line := string(bytes.TrimSuffix(s.line, []byte("\r")))
	if s.dropped > 0 {
		s.log.Info("upstream stderr", "line", line, "truncated", s.dropped)
	} else {
		s.log.Info("upstream stderr", "line", line)
	}
	s.line, s.dropped = s.line[:0], 0
}
