package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// conn is one JSON-RPC connection to a peer: a stdio child, a stdio
// client, or an HTTP upstream spoken to as a client.
type conn interface {
	// Send writes one message.
	Send(ctx context.Context, m *jsonrpc.Message) error
	// Recv delivers messages from the peer; it is closed when the peer is
	// gone, after which Err says why.
	Recv() <-chan *jsonrpc.Message
	Err() error
	Close() error
}

// streamConn speaks newline-delimited JSON-RPC over a reader and a
// writer (stdio). Lines have no length limit: one 100 MB message is one
// line.
type streamConn struct {
	wmu  sync.Mutex
	w    io.Writer
	recv chan *jsonrpc.Message
	err  error
	done chan struct{}
	log  *slog.Logger
	stop func() error
}

func newStreamConn(r io.Reader, w io.Writer, stop func() error, log *slog.Logger) *streamConn {
	c := &streamConn{w: w, recv: make(chan *jsonrpc.Message, 16), done: make(chan struct{}), log: log, stop: stop}
	go c.read(r)
	return c
}

func (c *streamConn) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	defer close(c.recv)
	for {
		line, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			m, derr := jsonrpc.DecodeMessage(line)
			if derr != nil {
				c.log.Warn("dropping a malformed message from the peer", "err", derr, "bytes", len(line))
			} else {
				select {
				case c.recv <- m:
				case <-c.done:
					c.err = errors.New("connection closed")
					return
				}
			}
		}
		if err != nil {
			select {
			case <-c.done: // we closed it: not an error worth a word
				return
			default:
			}
			if err == io.EOF {
				err = errors.New("peer closed the connection")
			}
			c.err = err
			return
		}
	}
}

// readLine reads up to and without '\n', however long the line. A long
// line is gathered in blocks and joined once at the end, so a 100 MB
// message costs its size plus the blocks, not the 2-3× of a doubling
// buffer.
func readLine(br *bufio.Reader) ([]byte, error) {
	chunk, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return bytes.TrimSuffix(append([]byte(nil), chunk...), []byte("\n")), err
	}
	var blocks [][]byte
	cur := make([]byte, 0, 256<<10)
	total := 0
	for {
		for len(chunk) > 0 {
			if len(cur) == cap(cur) {
				blocks = append(blocks, cur)
				cur = make([]byte, 0, min(2*cap(cur), 8<<20))
			}
			n := copy(cur[len(cur):cap(cur)], chunk)
			cur, chunk = cur[:len(cur)+n], chunk[n:]
			total += n
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
		chunk, err = br.ReadSlice('\n')
	}
	line := make([]byte, 0, total)
	for _, b := range blocks {
		line = append(line, b...)
	}
	line = append(line, cur...)
	return bytes.TrimSuffix(line, []byte("\n")), err
}

func (c *streamConn) Send(ctx context.Context, m *jsonrpc.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return errors.New("connection closed")
	default:
	}
	// One write of message plus newline, so a reader never sees half.
	buf := make([]byte, 0, len(m.Raw)+1)
	buf = append(append(buf, bytes.TrimSpace(m.Raw)...), '\n')
	_, err := c.w.Write(buf)
	return err
}

func (c *streamConn) Recv() <-chan *jsonrpc.Message { return c.recv }
func (c *streamConn) Err() error                    { return c.err }

func (c *streamConn) Close() error {
	c.wmu.Lock()
	select {
	case <-c.done:
		c.wmu.Unlock()
		return nil
	default:
		close(c.done)
	}
	c.wmu.Unlock()
	if c.stop != nil {
		return c.stop()
	}
	return nil
}

// CommandUpstream is a tool server run as a child process speaking stdio.
type CommandUpstream struct {
	Command string   // program
	Args    []string // its arguments
	Env     []string // extra environment, KEY=VALUE
	Dir     string
	Logger  *slog.Logger // the child's stderr goes here, line by line
}

func (*CommandUpstream) upstream() {}

// ParseCommand splits a command line on spaces, honouring single and
// double quotes, for --upstream-cmd.
func ParseCommand(s string) (*CommandUpstream, error) {
	var args []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if inWord {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return nil, errors.New("empty command")
	}
	return &CommandUpstream{Command: args[0], Args: args[1:]}, nil
}

// start runs one child and connects to its stdio.
func (u *CommandUpstream) start(log *slog.Logger) (*streamConn, error) {
	if u.Logger != nil {
		log = u.Logger
	}
	cmd := exec.Command(u.Command, u.Args...)
	cmd.Dir = u.Dir
	cmd.Env = append(os.Environ(), u.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting upstream %s: %w", u.Command, err)
	}
	log = log.With("upstream", u.Command, "pid", cmd.Process.Pid)
	log.Debug("upstream started")
	waited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			log.Info("upstream stderr", "line", sc.Text())
		}
		waited <- cmd.Wait()
	}()
	stop := func() error {
		stdin.Close() // a stdio server ends at end of input
		select {
		case <-waited:
			return nil
		case <-time.After(2 * time.Second):
		}
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-waited:
			return nil
		case <-time.After(2 * time.Second):
		}
		cmd.Process.Kill()
		<-waited
		return nil
	}
	return newStreamConn(stdout, stdin, stop, log), nil
}
