//go:build unix

package child

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// A child's stderr is untrusted: a logger at Info (the default level)
// sees none of it; at Debug it is there.
func TestStderrOnlyAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		logs := &policytest.Buffer{}
		c, err := Start(Command{Path: "sh", Args: []string{"-c", `echo "ERROR: the sky is falling" >&2; exec cat`}},
			Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))})
		if err != nil {
			t.Fatal(err)
		}
		echo(t, c, 1)
		closeWithin(t, c)
		got := strings.Contains(logs.String(), "the sky is falling")
		if want := level == slog.LevelDebug; got != want {
			t.Errorf("logger at %v: stderr logged = %v, want %v; log:\n%s", level, got, want, logs)
		}
		if level == slog.LevelDebug && !strings.Contains(logs.String(), "level=DEBUG") {
			t.Errorf("stderr logged above Debug:\n%s", logs)
		}
	}
}

// A flood of stderr lines is logged up to the burst, then at the rate;
// what was skipped is counted with the next line logged.
func TestStderrRateLimited(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1_000_000, 0)
	s := &stderrLog{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		now: func() time.Time { return now }}
	for i := range 1000 {
		fmt.Fprintf(s, "line %d\n", i)
	}
	if n := strings.Count(buf.String(), "upstream stderr"); n != stderrBurst {
		t.Fatalf("%d of 1000 lines logged at once; want the burst, %d", n, stderrBurst)
	}
	now = now.Add(time.Second)
	for i := range 1000 {
		fmt.Fprintf(s, "later %d\n", i)
	}
	s.flush()
	out := buf.String()
	if n := strings.Count(out, "line=\"later"); n != stderrRate {
		t.Fatalf("%d lines logged a second later; want the rate, %d", n, stderrRate)
	}
	if !strings.Contains(out, "skipped_lines=900") || !strings.Contains(out, "skipped_lines=990") {
		t.Fatalf("skipped lines not counted:\n%s", out[len(out)-500:])
	}
}

// A real child writing 20,000 lines to stderr: the log gets no more than
// the burst and the rate allow over the time it took, and the child is
// never held up.
func TestStderrFlood(t *testing.T) {
	start := time.Now()
	c, logs := startSh(t, `i=0; while [ $i -lt 20000 ]; do echo "noise $i" >&2; i=$((i+1)); done; exec cat`)
	echo(t, c, 1)
	closeWithin(t, c)
	allowed := stderrBurst + int(time.Since(start).Seconds()*stderrRate) + 1
	if n := strings.Count(logs.String(), "msg=\"upstream stderr\""); n > allowed || n < stderrBurst {
		t.Fatalf("%d stderr lines logged; want between %d and %d", n, stderrBurst, allowed)
	}
}
