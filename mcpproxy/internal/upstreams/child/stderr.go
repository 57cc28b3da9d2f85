package child

import (
	"bytes"
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// MaxStderrLine is the most of one stderr line that is logged; the rest
// of a longer line is counted and dropped, and reading goes on.
const MaxStderrLine = 16 << 10

// A child's stderr is untrusted and often noisy: it is logged at Debug,
// never above, and at most stderrBurst lines at once, then stderrRate
// lines a second (a token bucket); lines past that are counted, and the
// count is logged with the next line that passes. So a child cannot flood
// Spillway's logs, whatever level they are kept at.
const (
	stderrBurst = 100
	stderrRate  = 10 // lines per second
)

// stderrLog logs a child's stderr line by line. exec's goroutine writes
// to it until the child's stderr ends; it never blocks longer than the
// logger and never fails, so the child can always write.
type stderrLog struct {
	mu      sync.Mutex
	log     *slog.Logger
	now     func() time.Time // the clock of the rate limit; nil: time.Now
	line    []byte           // the current line, up to MaxStderrLine
	dropped int              // bytes of it beyond that
	tokens  float64          // lines that may be logged now
	last    time.Time        // when tokens was last refilled
	skipped int              // lines not logged since the last one that was
}

// setLogger replaces the logger, once the child's pid is known.
func (s *stderrLog) setLogger(log *slog.Logger) {
	s.mu.Lock()
	s.log = log
	s.mu.Unlock()
}

// Write logs every line p completes and keeps the start of the next. It
// always takes all of p and never fails.
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
	if s.skipped > 0 {
		s.log.Debug("upstream stderr lines skipped", "skipped_lines", s.skipped)
		s.skipped = 0
	}
}

// emit logs the current line, if the rate limit allows, and starts the
// next.
func (s *stderrLog) emit() {
	defer func() { s.line, s.dropped = s.line[:0], 0 }()
	if !s.log.Enabled(context.Background(), slog.LevelDebug) || !s.allow() {
		return
	}
	attrs := []any{"line", string(bytes.TrimSuffix(s.line, []byte("\r")))}
	if s.dropped > 0 {
		attrs = append(attrs, "truncated", s.dropped)
	}
	if s.skipped > 0 {
		attrs = append(attrs, "skipped_lines", s.skipped)
		s.skipped = 0
	}
	s.log.Debug("upstream stderr", attrs...)
}

// allow takes a token for one line, or counts the line as skipped.
func (s *stderrLog) allow() bool {
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	t := now()
	if s.last.IsZero() {
		s.tokens = stderrBurst
	} else if d := t.Sub(s.last); d > 0 {
		s.tokens = min(stderrBurst, s.tokens+d.Seconds()*stderrRate)
	}
	s.last = t
	if s.tokens < 1 {
		s.skipped++
		return false
	}
	s.tokens--
	return true
}
