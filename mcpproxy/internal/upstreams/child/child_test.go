//go:build unix

package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/spillway-dev/spillway/policy/policytest"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// closeDeadline is CloseBound plus a margin for a loaded machine: Close
// is measured against it in every test.
const closeDeadline = CloseBound + time.Second

// startSh runs script under sh as a child.
func startSh(t *testing.T, script string, env ...string) (*Conn, *policytest.Buffer) {
	t.Helper()
	logs := &policytest.Buffer{}
	c, err := Start(Command{Path: "sh", Args: []string{"-c", script}, Env: env},
		Options{MaxMessage: 1 << 20, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, logs
}

// closeWithin closes c, failing the test past closeDeadline, and checks
// that nothing of the child's process group is left running and that the
// child itself was reaped (no zombie of ours).
func closeWithin(t *testing.T, c *Conn) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(closeDeadline):
		t.Fatalf("Close did not return within %v", closeDeadline)
	}
	took := time.Since(start)
	t.Logf("Close took %v", took.Round(time.Millisecond))
	assertGroupGone(t, c.Pid())
	for drained := time.After(time.Second); ; { // Recv is closed too
		select {
		case m, ok := <-c.Recv():
			if ok {
				continue
			}
			if m != nil {
				t.Fatalf("Recv after Close: %v", m)
			}
		case <-drained:
			t.Fatal("Recv still open a second after Close")
		}
		break
	}
	return took
}

// assertGroupGone checks /proc: the child is reaped, and no live process
// is left in its group. (A killed grandchild is reaped by whoever adopted
// it, which is not Spillway; until then it is a zombie, and not counted.)
func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	deadline := time.Now().Add(2 * time.Second) // SIGKILL is asynchronous
	for {
		left := groupMembers(pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left in group %d: %v", pgid, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// groupMembers lists the processes of group pgid that are not zombies,
// and the child pgid itself in any state.
func groupMembers(pgid int) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var left []string
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if f[0] != "Z" || pid == pgid {
			left = append(left, fmt.Sprintf("%d %s (%s)", pid, f[0], b[:i+1]))
		}
	}
	return left
}

func request(id int) *jsonrpc.Message {
	m, _ := jsonrpc.DecodeMessage(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id))
	return m
}

func recvWithin(t *testing.T, c *Conn, d time.Duration) *jsonrpc.Message {
	t.Helper()
	select {
	case m := <-c.Recv():
		return m
	case <-time.After(d):
		t.Fatalf("nothing from the child within %v", d)
		return nil
	}
}

// echo: `exec cat` is a child that answers each message with itself.
func echo(t *testing.T, c *Conn, id int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Send(ctx, request(id)); err != nil {
		t.Fatal(err)
	}
	if m := recvWithin(t, c, 5*time.Second); m == nil || string(m.ID) != strconv.Itoa(id) {
		t.Fatalf("echo: got %v (Err %v)", m, c.Err())
	}
}

// A grandchild in the group holds stderr and stdout (`sh -c 'x & exec y'`,
// npx- and uvx-style launchers): Close used to hang on it, for ever.
func TestGrandchildHoldsStderr(t *testing.T) {
	c, _ := startSh(t, `sleep 1000 & exec cat`)
	echo(t, c, 1)
	closeWithin(t, c)
}

// A grandchild that left the group (setsid) and holds every pipe cannot
// be signalled with the group: Close still returns in time (WaitDelay, and
// closing our end of stdout), and when the child exits on its own, Recv is
// closed with its status although stdout never ends.
func TestEscapedGrandchild(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	t.Cleanup(func() {
		b, _ := os.ReadFile(pidFile)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	c, _ := startSh(t, `setsid sleep 1000 & echo $! > `+pidFile+`; exec cat`)
	echo(t, c, 1)
	closeWithin(t, c)

	c, _ = startSh(t, `setsid sleep 1000 & echo $! >> `+pidFile+`; read l; exit 4`)
	c.Send(context.Background(), request(1))
	if m := recvWithin(t, c, closeDeadline); m != nil || c.Err() == nil || !strings.Contains(c.Err().Error(), "exit status 4") {
		t.Fatalf("got %v, Err %v; want Recv closed with exit status 4", m, c.Err())
	}
	closeWithin(t, c)
}

// A child that never reads its stdin: Send returns at its context's end,
// and Close is not held up by the write still pending.
func TestChildNeverReadsStdin(t *testing.T) {
	c, _ := startSh(t, `exec sleep 1000`)
	big, _ := jsonrpc.DecodeMessage(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"n","params":{"p":%q}}`, strings.Repeat("x", 1<<20)))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	sent := make(chan error, 1)
	go func() { sent <- c.Send(ctx, big) }()
	select {
	case err := <-sent:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send = %v; want the context's deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Send blocked past its context")
	}
	closeWithin(t, c)
}

// 2 MiB of stderr without a newline, then a valid answer: the long line is
// logged truncated and the child goes on (today's reader stopped at 1 MiB
// and the child wedged on a full stderr pipe).
func TestLongStderrLine(t *testing.T) {
	c, logs := startSh(t, `head -c 2097152 /dev/zero | tr '\0' x >&2; echo " end" >&2; echo after >&2; exec cat`)
	echo(t, c, 7)
	closeWithin(t, c)
	out := logs.String()
	if !strings.Contains(out, fmt.Sprintf("truncated=%d", 2097152+4-MaxStderrLine)) || !strings.Contains(out, "line=after") {
		t.Fatalf("log: %.500s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > MaxStderrLine+500 {
			t.Fatalf("a log line of %d bytes", len(l))
		}
	}
}

// Pretty-printed JSON breaks the framing: its lines are logged and
// dropped, and what follows in one line still arrives.
func TestPrettyPrinted(t *testing.T) {
	c, logs := startSh(t, `printf '{\n  "jsonrpc": "2.0",\n  "method": "pretty"\n}\n{"jsonrpc":"2.0","method":"compact"}\n'; exec cat`)
	if m := recvWithin(t, c, 5*time.Second); m == nil || m.Method != "compact" {
		t.Fatalf("got %v", m)
	}
	echo(t, c, 2)
	closeWithin(t, c)
	if n := strings.Count(logs.String(), "dropping a malformed message"); n != 4 {
		t.Fatalf("%d malformed lines logged; want 4", n)
	}
}

// A child answering "result": null is relayed as it is (the proxy used to
// panic on it further on).
func TestResultNull(t *testing.T) {
	c, _ := startSh(t, `read l; id=$(echo "$l" | sed 's/.*"id":\([0-9]*\).*/\1/'); printf '{"jsonrpc":"2.0","id":%s,"result":null}\n' "$id"; exec cat >/dev/null`)
	if err := c.Send(context.Background(), request(5)); err != nil {
		t.Fatal(err)
	}
	if m := recvWithin(t, c, 5*time.Second); m == nil || string(m.ID) != "5" || string(m.Result) != "null" {
		t.Fatalf("got %v", m)
	}
	closeWithin(t, c)
}

// A child and grandchild that ignore SIGTERM and stdin's end: SIGKILL to
// the group, within the bound.
func TestIgnoresSIGTERM(t *testing.T) {
	c, logs := startSh(t, `trap '' TERM; sleep 1000 & sleep 1000 & wait`)
	if took := closeWithin(t, c); took < stdinGrace+termGrace {
		t.Errorf("Close took %v: was SIGTERM ignored?", took)
	}
	if !strings.Contains(logs.String(), "SIGKILL") {
		t.Errorf("log: %s", logs)
	}
}

// A child that exits at once: Recv is closed with its status, Send fails
// rather than blocks, Close is quick.
func TestExitsAtOnce(t *testing.T) {
	c, _ := startSh(t, `exit 3`)
	if m := recvWithin(t, c, 5*time.Second); m != nil || c.Err() == nil || !strings.Contains(c.Err().Error(), "exit status 3") {
		t.Fatalf("got %v, Err %v", m, c.Err())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Send(ctx, request(1)); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send to a dead child = %v", err)
	}
	if took := closeWithin(t, c); took > time.Second {
		t.Errorf("Close of a dead child took %v", took)
	}
}

// The child sees the allow-list and what was configured, never
// Spillway's own settings or store credentials.
func TestEnvironment(t *testing.T) {
	t.Setenv("SPILLWAY_SIGNING_KEY", "secret-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-aws")
	t.Setenv("MINIO_ROOT_PASSWORD", "secret-minio")
	t.Setenv("PASSED_THROUGH", "yes")
	t.Setenv("NOT_PASSED", "no")
	t.Setenv("LC_ALL", "C")
	out := filepath.Join(t.TempDir(), "env")
	c, _ := startSh(t, `env > `+out+`; exec cat`, "PASSED_THROUGH", "SET_HERE=a=b", "UNSET_NAME")
	echo(t, c, 1) // env has run
	closeWithin(t, c)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, secret := range []string{"SPILLWAY_", "AWS_", "MINIO_", "secret-", "NOT_PASSED", "UNSET_NAME"} {
		if strings.Contains(env, secret) {
			t.Errorf("the child saw %s:\n%s", secret, env)
		}
	}
	for _, want := range []string{"PASSED_THROUGH=yes\n", "SET_HERE=a=b\n", "LC_ALL=C\n", "PATH=" + os.Getenv("PATH") + "\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("the child did not see %q:\n%s", want, env)
		}
	}
}

func TestStartMissingProgram(t *testing.T) {
	if _, err := Start(Command{Path: "/nonexistent/mcp-server"}, Options{}); err == nil {
		t.Fatal("Start of a missing program succeeded")
	}
}

// StallTimeout: a child that writes part of a message and then nothing
// is killed once the read for the rest has waited that long, and the
// connection's error says so; a child silent between messages (a whole
// line written, then nothing) lives on.
func TestStallTimeout(t *testing.T) {
	start := func(script string) *Conn {
		c, err := Start(Command{Path: "sh", Args: []string{"-c", script}},
			Options{MaxMessage: 1 << 20, StallTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	stopped := func(what, script string) {
		t.Helper()
		c := start(script)
		t0 := time.Now()
		select {
		case m, ok := <-c.Recv():
			if ok {
				t.Fatalf("a message from the %s child: %v", what, m)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("a %s child is still read from after 10 s (StallTimeout 300 ms)", what)
		}
		if err := c.Err(); !errors.Is(err, mux.ErrStalled) {
			t.Fatalf("%s: Err = %v, want one wrapping mux.ErrStalled", what, err)
		}
		t.Logf("%s child ended after %v", what, time.Since(t0).Round(time.Millisecond))
	}
	stopped("stalled", `printf '{"jsonrpc":"2.0","id":1,"result":{"text":"half'; exec sleep 30`)
	// A child that trickles a byte every 100 ms mid-line never makes one
	// read wait 300 ms, but its reads' waits add up: it is stopped too.
	stopped("trickling", `printf '{"jsonrpc":"2.0","id":1,"result":{"text":"'; while :; do printf x; sleep 0.1; done`)

	idle := start(`printf '{"jsonrpc":"2.0","method":"notifications/message","params":{}}\n'; exec sleep 30`)
	recvWithin(t, idle, 5*time.Second)
	select {
	case m, ok := <-idle.Recv():
		t.Fatalf("a child silent between messages was ended: %v, %v (Err %v)", m, ok, idle.Err())
	case <-time.After(time.Second):
	}

	// A healthy child whose small messages each straddle two writes 120 ms
	// apart (a message's end and the next one's start in one write) is not
	// a trickle: each message's wait starts from zero, and it lives on.
	chatty := start(`printf '{"jsonrpc":"2.0","method":"notifications/message",'; while :; do sleep 0.12; printf '"params":{}}\n{"jsonrpc":"2.0","method":"notifications/message",'; done`)
	deadline := time.After(1500 * time.Millisecond)
	for n := 0; ; {
		select {
		case _, ok := <-chatty.Recv():
			if !ok {
				t.Fatalf("a child sending a message every 120 ms was ended after %d (Err %v)", n, chatty.Err())
			}
			n++
			continue
		case <-deadline:
			if n < 5 {
				t.Fatalf("%d messages in 1.5 s from a child sending one every 120 ms", n)
			}
		}
		break
	}
}
