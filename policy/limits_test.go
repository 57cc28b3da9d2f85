package policy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostilePolicies each make every decision point hurt the process: one
// asks OPA for a billion-number array (gigabytes, built before anything
// could stop it), one spins through 10^8 iterations holding nothing.
var hostilePolicies = map[string]string{
	"range": `package spillway
fetch := {"allow": true} if count(numbers.range(1, 1e9)) > 0
mint := {"allow": true} if count(numbers.range_step(0, 1e9, 1)) > 0
offload := {"offload": true} if count(numbers.range(1e9, 1)) > 0
`,
	"spin": `package spillway
fetch := {"allow": true} if not spin
mint := {"allow": true} if not spin
offload := {"offload": true} if not spin
spin if {
	some i in numbers.range(1, 10000)
	some j in numbers.range(1, 10000)
	i == j + 20000
}
`,
}

// rssGrowthBound is how much a hostile decision may add to the process's
// resident memory.
const rssGrowthBound = 256 << 20

// Issue 38, item 10: numbers.range grew without bound inside a policy, and
// no decision had a deadline of its own, so a hostile policy took memory
// without bound or held a request for ever. Each decision point of each
// hostile policy now comes back denied (ErrEval), within the test's 10 s
// "never answered" limit, with the process's peak RSS less than 256 MiB
// above where it started. A decision that does not come back, or memory
// past the bound, cancels the decision so the test stops by itself.
func TestHostilePolicyDenied(t *testing.T) {
	points := map[string]func(context.Context, *Engine) (allowed bool, err error){
		"fetch": func(ctx context.Context, e *Engine) (bool, error) {
			d, err := e.Fetch(ctx, fetchIn("GET", "a"))
			return d.Allow, err
		},
		"mint": func(ctx context.Context, e *Engine) (bool, error) {
			d, err := e.Mint(ctx, MintInput{RequestedTTLSeconds: 60})
			return d.Allow, err
		},
		"offload": func(ctx context.Context, e *Engine) (bool, error) {
			d, err := e.Offload(ctx, OffloadInput{Kind: "text", Size: 20000})
			return d.Offload, err
		},
	}
	for name, rego := range hostilePolicies {
		dir := t.TempDir()
		writePolicy(t, dir, rego)
		e, err := New(ctx, Options{Dir: dir, DecisionTimeout: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for point, decide := range points {
			runtime.GC()
			debug.FreeOSMemory()
			resetPeakRSS(t)
			before := procStatus(t, "VmRSS")
			dctx, cancel := context.WithCancel(ctx)
			type answer struct {
				allowed bool
				err     error
			}
			done := make(chan answer, 1)
			go func() {
				allowed, err := decide(dctx, e)
				done <- answer{allowed, err}
			}()
			var a answer
			var failure string
			tick := time.NewTicker(10 * time.Millisecond)
			for never := time.After(10 * time.Second); a.err == nil && !a.allowed && failure == ""; {
				select {
				case a = <-done:
					if a.err == nil && !a.allowed {
						failure = "came back undenied by error"
					}
					continue
				case <-never:
					failure = "was never answered (10 s)"
				case <-tick.C:
					if grew := procStatus(t, "VmRSS") - before; grew > rssGrowthBound {
						failure = fmt.Sprintf("grew RSS by %d MiB", grew>>20)
					}
					if failure == "" {
						continue
					}
				}
				cancel()
				a = <-done
			}
			tick.Stop()
			cancel()
			peak := procStatus(t, "VmHWM") - before
			t.Logf("%s policy, %s: allowed=%v err=%v, peak RSS %d MiB above the start", name, point, a.allowed, a.err, peak>>20)
			switch {
			case failure != "":
				t.Errorf("%s policy, %s decision %s", name, point, failure)
			case a.allowed || !errors.Is(a.err, ErrEval):
				t.Errorf("%s policy, %s decision: allowed=%v err=%v, want denied with ErrEval", name, point, a.allowed, a.err)
			case peak > rssGrowthBound:
				t.Errorf("%s policy, %s decision: peak RSS %d MiB above the start, bound %d MiB", name, point, peak>>20, rssGrowthBound>>20)
			}
		}
		if s := e.Status(); name == "spin" && s.EvalTimeouts != int64(len(points)) {
			t.Errorf("spin policy: %d decisions counted as past their deadline, want %d", s.EvalTimeouts, len(points))
		}
	}
}

// procStatus reads a size field (kB) of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS makes VmHWM the current RSS (Linux 4.0+).
func resetPeakRSS(t *testing.T) {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// The bound counts numbers as OPA would make them, both ways and with a
// step; operand errors are OPA's own.
func TestRangeLen(t *testing.T) {
	for _, tt := range []struct {
		rego string
		want string // "" for an error
	}{
		{`numbers.range(1, 10000)`, "10000 numbers"},
		{`numbers.range(10000, 1)`, "10000 numbers"},
		{`numbers.range(0, 10000)`, "more than the 10000"},
		{`numbers.range(-5000, 5000)`, "more than the 10000"},
		{`numbers.range_step(0, 20000, 2)`, "10001 numbers: more"},
		{`numbers.range_step(0, 19999, 2)`, "10000 numbers"},
		{`numbers.range(1, 1e30)`, "more than the 10000"},
		{`numbers.range(1, 1.5)`, "must be integer"},
		{`numbers.range_step(1, 5, 0)`, "step must be a positive integer"},
	} {
		dir := t.TempDir()
		writePolicy(t, dir, "package spillway\nfetch := {\"allow\": true, \"reason\": sprintf(\"%d numbers\", [count("+tt.rego+")])}\noffload := {}\nmint := {}\n")
		e, err := New(ctx, Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		d, err := e.Fetch(ctx, fetchIn("GET", "a"))
		got := d.Reason
		if err != nil {
			got = err.Error()
		}
		if want := strings.TrimSuffix(tt.want, ": more"); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", tt.rego, got, want)
		}
	}
}
