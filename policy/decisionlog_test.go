package policy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// blockingWriter blocks every Write until release is closed.
type blockingWriter struct {
	release chan struct{}
	policytest.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	return w.Buffer.Write(p)
}

func (w *blockingWriter) lines() int { return strings.Count(w.String(), "\n") }

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// decideUntil makes n decisions on a goroutine and fails t if they are
// not all done within the bound (a hung writer must not hold them).
func decideUntil(t *testing.T, e *Engine, n int, bound time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			if _, err := e.Fetch(context.Background(), fetchIn("GET", "")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("%d decisions not done within %v: the decision log blocks them", n, bound)
	}
}

func metricsOf(e *Engine) string {
	var b bytes.Buffer
	e.WriteMetrics(&b)
	return b.String()
}

// A writer that blocks delays no decision: lines beyond the queue are
// dropped and counted, and the queued ones are written once it unblocks.
func TestDecisionLogBlockedWriter(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, allowAll)
	w := &blockingWriter{release: make(chan struct{})}
	e, err := New(ctx, Options{Dir: dir, DecisionLog: w, DecisionLogQueue: 8, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	decideUntil(t, e, 100, 10*time.Second)
	st := e.Status()
	// The writer holds one line, the queue eight: the rest were dropped.
	if st.DecisionLogDropped < 100-9 || !strings.Contains(metricsOf(e), "spillway_policy_decision_log_dropped_total ") {
		t.Errorf("dropped = %d\n%s", st.DecisionLogDropped, metricsOf(e))
	}
	close(w.release)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.lines() + int(e.Status().DecisionLogDropped); got != 100 {
		t.Errorf("%d written + %d dropped, want 100 in all", w.lines(), e.Status().DecisionLogDropped)
	}
}

// A writer that fails is counted, and logged once per period, not per line.
func TestDecisionLogWriteErrors(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, allowAll)
	var logs policytest.Buffer
	e, err := New(ctx, Options{Dir: dir, DecisionLog: failingWriter{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	decideUntil(t, e, 50, 10*time.Second)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(); st.DecisionLogWriteErrors != 50 || !strings.Contains(metricsOf(e), "spillway_policy_decision_log_write_errors_total 50") {
		t.Errorf("write errors = %d\n%s", st.DecisionLogWriteErrors, metricsOf(e))
	}
	if n := strings.Count(logs.String(), "decision log write failed"); n != 1 || !strings.Contains(logs.String(), "disk full") {
		t.Errorf("%d log lines about failed writes, want 1:\n%s", n, logs.String())
	}
}

// Close gives up on a writer that never returns, within its bound, and
// says how many lines were lost.
func TestDecisionLogCloseBounded(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, allowAll)
	w := &blockingWriter{release: make(chan struct{})}
	defer close(w.release)
	e, err := New(ctx, Options{Dir: dir, DecisionLog: w, DecisionLogQueue: 8, DecisionLogFlush: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	decideUntil(t, e, 5, 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not written") {
			t.Errorf("Close = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited on a hung writer")
	}
}
