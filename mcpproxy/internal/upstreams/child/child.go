// Package child runs a stdio MCP server as a child process and speaks to
// it over its stdin and stdout (package ndjson), as the upstream connection
// contract says.
//
// What a child can do to Spillway is bounded:
//   - It runs in a process group of its own, and signals go to the group,
//     so what it starts (an npx or uvx launcher's real server, a
//     `sh -c 'x & exec y'` grandchild) ends with it. When the child exits,
//     what it left running in its group is killed (on Linux, where the
//     child's exit is seen before it is reaped, so its group id cannot
//     have been reused; elsewhere at Close).
//   - Close takes at most CloseBound whatever the child and its group do:
//     stdin closed, a grace, SIGTERM to the group, a grace, SIGKILL to the
//     group, reaped. A descendant that left the group and holds a pipe
//     open cannot make it hang (exec.Cmd.WaitDelay and closing our ends).
//   - Its stderr is always drained and logged line by line, at Debug only
//     and rate-limited (it is untrusted and often noisy: it must not flood
//     Spillway's logs); a line over MaxStderrLine is logged truncated and
//     reading goes on.
//   - Writes to its stdin honour the caller's context, so a child that
//     never reads blocks neither Send past it nor Close.
//   - Its environment is an allow-list (see Env): nothing of Spillway's own
//     configuration or store credentials unless configured by name.
//   - Its HOME is a directory of its own (0700, removed once the child is
//     reaped), not Spillway's: the default signing key and whatever else
//     lives under Spillway's home is not where the child looks, unless
//     HOME is configured by name. Only Command.User (another uid) keeps
//     it from files it finds by other paths.
//   - A panic in any goroutine this package starts is logged and becomes
//     the connection's error; the process lives on.
package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/ndjson"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/stall"
)

// Command is what to run. The zero value is not runnable: Path is needed.
type Command struct {
	Path string   // the program; without a slash it is looked up in PATH
	Args []string // its arguments, without the program
	Dir  string   // its working directory; "" for Spillway's
	// Env configures the child's environment beyond the allow-list: NAME
	// passes Spillway's value of NAME (if set), NAME=VALUE sets it. Unless
	// it names HOME, the child's HOME is a private directory (see Start).
	Env []string
	// User, when not nil, runs the child as that user and group, with no
	// supplementary groups (Unix; Spillway needs root or CAP_SETUID and
	// CAP_SETGID, else Start fails). Only a separate user keeps a child
	// from reading what Spillway's user can: its files (the signing key)
	// and, unless Spillway is non-dumpable, its memory and environment.
	User *User
}

// User is a numeric user and group to run a child as. See LookupUser.
type User struct{ UID, GID uint32 }

// Options tune a connection. The zero value is usable.
type Options struct {
	// MaxMessage caps one message read from the child, in bytes (≤ 0:
	// ndjson.DefaultMaxMessage).
	MaxMessage int64
	// Spool, when set, reads the child's messages through it (see
	// ndjson.NewSpoolingReader): their long strings wait on disk, and
	// MaxMessage caps only what stays in memory.
	Spool *spill.Spooler
	// Logger receives the child's stderr (at Debug, rate-limited) and
	// what the connection drops; nil discards.
	Logger *slog.Logger
	// StallTimeout stops a child that writes part of a message and then
	// nothing more for this long, or less than stall.MinProgress bytes
	// (≤ 0: never): every request waiting on it, its other clients' too,
	// gets an error instead of waiting forever behind a line that never
	// ends. Between messages a child may be silent as long as it likes.
	StallTimeout time.Duration
}

// Timings of Close. Their sum, with the reaping, stays under CloseBound.
const (
	// CloseBound is the longest Close takes.
	CloseBound = 5 * time.Second
	// stdinGrace is how long a child has to exit once its stdin is closed
	// (a stdio server ends at end of input), termGrace how long after
	// SIGTERM, killGrace how long after SIGKILL (a process in the kernel).
	stdinGrace = 1500 * time.Millisecond
	termGrace  = 1500 * time.Millisecond
	killGrace  = 500 * time.Millisecond
	// waitDelay bounds the wait for a pipe that a descendant outside the
	// group holds open after the child exited (exec.Cmd.WaitDelay for
	// stderr; the same bound for stdout).
	waitDelay = 1 * time.Second
)

// Conn is a running child and the JSON-RPC connection to it. It is safe
// for concurrent use; see the package doc for what it guarantees.
type Conn struct {
	conn    *ndjson.Conn
	cmd     *exec.Cmd
	log     *slog.Logger
	stdin   io.WriteCloser
	stdout  *trackedReader
	stderr  *stderrLog
	closing chan struct{} // closed when Close starts
	exited  chan struct{} // the child has exited (not yet reaped on Linux)
	reaped  chan struct{} // reaped, stderr drained
	waitErr error         // from cmd.Wait, set before reaped is closed
	home    string        // the child's private HOME, removed once reaped; "" if configured
}

// Start runs c and connects to its stdio. The process is started at once;
// nothing is sent to it.
func Start(c Command, o Options) (*Conn, error) {
	if c.Path == "" {
		return nil, errors.New("child: empty command")
	}
	env, home, err := environment(c)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ch, err := start(c, env, home, log.With("upstream", c.Path))
	if err != nil {
		if home != "" {
			os.RemoveAll(home)
		}
		return nil, err
	}
	if o.StallTimeout > 0 {
		ch.stopOnStall(o.StallTimeout)
	}
	go ch.safely("reaping the upstream", ch.reap)
	ch.conn = ndjson.NewConn(ch.stdout, ch.stdin, ndjson.Options{
		MaxMessage: o.MaxMessage,
		Spool:      o.Spool,
		Peer:       "upstream",
		Logger:     ch.log,
		End:        ch.ended,
		Stop:       ch.stop,
	})
	return ch, nil
}

// environment is the child's environment (the allow-list and c.Env) and,
// unless c.Env names HOME, the private HOME made for it ("" otherwise),
// which the caller removes if the child does not start.
func environment(c Command) (env []string, home string, err error) {
	env, err = Env(os.Environ(), c.Env)
	if err != nil {
		return nil, "", err
	}
	if names(c.Env, "HOME") {
		return env, "", nil
	}
	if home, err = privateHome(c.User); err != nil {
		return nil, "", err
	}
	return setEnv(env, "HOME", home), home, nil
}

// start starts the process of c, in a process group of its own, with its
// stdin, stdout and stderr connected to a new Conn (whose conn is not yet
// set), and logs to log.
func start(c Command, env []string, home string, log *slog.Logger) (*Conn, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir, cmd.Env = c.Dir, env
	ownGroup(cmd)
	if err := runAs(cmd, c.User); err != nil {
		return nil, err
	}
	cmd.WaitDelay = waitDelay
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// stdout is a pipe of ours, not exec's: exec would close its read end
	// as soon as the child is reaped, losing what the child wrote last.
	pr, pw, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return nil, err
	}
	cmd.Stdout = pw
	ch := &Conn{cmd: cmd, log: log, stdin: stdin, stdout: &trackedReader{f: pr},
		stderr: &stderrLog{log: log}, closing: make(chan struct{}),
		exited: make(chan struct{}), reaped: make(chan struct{}), home: home}
	cmd.Stderr = ch.stderr // drained by exec's goroutine, bounded by WaitDelay
	err = cmd.Start()
	pw.Close()
	if err != nil {
		stdin.Close()
		pr.Close()
		if c.User != nil && errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("starting upstream %s as uid %d: %w (running a child as another user needs root, or CAP_SETUID and CAP_SETGID)", c.Path, c.User.UID, err)
		}
		return nil, fmt.Errorf("starting upstream %s: %w", c.Path, err)
	}
	ch.stdout.grown = growPipe(pr)
	ch.log = ch.log.With("pid", cmd.Process.Pid)
	ch.stderr.setLogger(ch.log)
	ch.log.Debug("upstream started")
	return ch, nil
}

// stopOnStall kills the child when it writes part of a message and then
// stalls for longer than d (see Options.StallTimeout). It is killed, not
// closed: its stdout ends as when a child dies, and the connection's error
// (ended) says why.
func (c *Conn) stopOnStall(d time.Duration) {
	c.stdout.stall = stall.New(d, func() {
		c.log.Warn("upstream stalled mid-message: stopping it", "stalled", d)
		signalGroup(c.cmd.Process, killSignal)
	})
}

// Send writes m to the child's stdin as one line. A write the child does
// not take before ctx ends returns ctx.Err() and never holds up Close.
// Concurrent Sends are written in the order they started.
func (c *Conn) Send(ctx context.Context, m *jsonrpc.Message) error { return c.conn.Send(ctx, m) }

// Recv yields every message the child writes to stdout, in order (one
// over the size cap replaced as package ndjson says). It is closed when
// stdout ends: the child exited or closed it, or Close.
func (c *Conn) Recv() <-chan *jsonrpc.Message { return c.conn.Recv() }

// Err says why Recv was closed: "upstream exited: exit status N" and the
// like; nil when Close ended it.
func (c *Conn) Err() error { return c.conn.Err() }

// Close ends the child and its process group and reaps it, in at most
// CloseBound whatever they do: stdin closed, a grace, SIGTERM, a grace,
// SIGKILL. It returns an error only when the child could not be reaped in
// time (a process stuck in the kernel). Safe to call more than once and
// concurrently.
func (c *Conn) Close() error { return c.conn.Close() }

// Pid is the child's process id, which is also its process group's.
func (c *Conn) Pid() int { return c.cmd.Process.Pid }

// safely runs f, logging a panic with its stack instead of dying of it.
func (c *Conn) safely(what string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic "+what, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// reap waits for the child, ends what it left in its group, and reaps it.
func (c *Conn) reap() {
	pid := c.cmd.Process.Pid
	// On Linux the child is seen to exit before it is reaped: its pid, the
	// group's id, stays reserved while the group is signalled, so the
	// signal cannot reach a stranger that reused the number.
	early := waitExited(pid) == nil
	if early {
		close(c.exited)
		signalGroup(c.cmd.Process, killSignal)
	}
	err := c.cmd.Wait()
	if !early {
		close(c.exited)
	}
	c.stderr.flush()
	if c.home != "" {
		if err := os.RemoveAll(c.home); err != nil {
			c.log.Warn("removing the upstream's home", "err", err)
		}
	}
	c.waitErr = err
	close(c.reaped)
	c.log.Debug("upstream reaped", "status", err)
	// If something outside the group still holds stdout, the reader
	// would wait for it forever: once it has waited waitDelay in a read
	// (so nothing the child wrote is left unread), end it.
	for !c.stdout.finished() {
		if c.stdout.blockedFor() > waitDelay {
			c.stdout.close()
			return
		}
		select {
		case <-c.closing: // Close closes stdout itself
			return
		case <-time.After(waitDelay / 10):
		}
	}
}

// ended turns the end of stdout into the connection's error: the child's
// exit status when it exited.
func (c *Conn) ended(err error) error {
	if w := c.stdout.stall; w != nil && w.Fired() {
		return fmt.Errorf("nothing more for %v: %w", w.Timeout(), mux.ErrStalled)
	}
	select {
	case <-c.reaped:
	case <-time.After(stdinGrace + waitDelay):
		if errors.Is(err, io.EOF) {
			return errors.New("upstream closed its stdout")
		}
		return fmt.Errorf("reading from the upstream: %w", err)
	}
	if c.waitErr != nil {
		return fmt.Errorf("upstream exited: %w", c.waitErr)
	}
	return errors.New("upstream exited")
}

// stop ends the child: see the package doc. It is ndjson.Conn's Stop, run
// once by Close.
func (c *Conn) stop() error {
	start := time.Now()
	close(c.closing)
	c.stdin.Close() // also ends a write blocked on a child that never reads
	pid := c.cmd.Process.Pid
	if !within(c.exited, stdinGrace) {
		c.log.Debug("upstream did not exit at end of input: SIGTERM to its group")
		signalGroup(c.cmd.Process, termSignal)
		if !within(c.exited, termGrace) {
			c.log.Warn("upstream ignored SIGTERM: SIGKILL to its group")
			signalGroup(c.cmd.Process, killSignal)
			within(c.exited, killGrace)
		}
	}
	reaped := within(c.reaped, CloseBound-time.Since(start)-100*time.Millisecond)
	c.stdout.close() // ends the reader if something outside the group holds stdout
	if !reaped {
		return fmt.Errorf("child: upstream %d did not exit within %v", pid, CloseBound)
	}
	return nil
}

// within reports whether ch is closed within d.
func within(ch <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// trackedReader is the child's stdout, with what the reaper needs to know
// to end a read nobody will ever answer.
type trackedReader struct {
	f      *os.File
	readAt atomic.Int64 // when the read in progress started (UnixNano), 0 if none
	mid    bool         // the last byte read was not a message's end (a newline)
	stall  *stall.Watch // times a read that starts mid; nil: none (Options.StallTimeout)
	done   atomic.Bool  // a read returned an error: the reader is finished
	grown  bool         // growPipe grew it; set before any close
	closed sync.Once
}

// close closes f, giving back its place among the grown pipes. Safe to
// call more than once, concurrently.
func (r *trackedReader) close() {
	r.closed.Do(func() {
		r.f.Close()
		if r.grown {
			shrunk()
		}
	})
}

// Read reads the child's stdout, noting when a read is in progress for
// blockedFor and timing a read that starts mid-message for the stall
// watch.
func (r *trackedReader) Read(p []byte) (int, error) {
	r.readAt.Store(time.Now().UnixNano())
	timed := r.mid && r.stall != nil
	if timed {
		r.stall.Begin()
	}
	n, err := r.f.Read(p)
	if n > 0 {
		r.mid = p[n-1] != '\n'
	}
	if timed {
		// A line that ended inside these bytes starts the next one's
		// clock from zero (past MinProgress bytes it starts anyway).
		ended := n < stall.MinProgress && bytes.IndexByte(p[:n], '\n') >= 0
		r.stall.End(n, r.mid && !ended)
	}
	r.readAt.Store(0)
	if err != nil {
		r.done.Store(true)
	}
	return n, err
}

// finished reports whether a read returned an error (the end of stdout).
func (r *trackedReader) finished() bool { return r.done.Load() }

// blockedFor is how long the read in progress has waited; 0 if none is.
func (r *trackedReader) blockedFor() time.Duration {
	at := r.readAt.Load()
	if at == 0 {
		return 0
	}
	return time.Since(time.Unix(0, at))
}
