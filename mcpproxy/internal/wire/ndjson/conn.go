package ndjson

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// ErrPeerClosed is a Conn's Err when its input ended without Close.
var ErrPeerClosed = errors.New("wire: peer closed the connection")

// Options configure a Conn. The zero value is usable.
type Options struct {
	// MaxMessage caps one incoming message, in bytes (≤ 0:
	// DefaultMaxMessage).
	MaxMessage int64
	// Peer names the other side in the errors the Conn makes up ("upstream
	// message exceeds …"); default "peer".
	Peer string
	// Spool, when set, reads every incoming line through it (see
	// NewSpoolingReader): set it for an upstream peer only.
	Spool *spill.Spooler
	// Expand, when set, expands spill markers in every message sent (see
	// spill.Expand) and refuses every incoming message that holds one:
	// set it for a client peer only, so that markers never resolve on
	// their way to an upstream, nor for a client that names one.
	Expand bool
	// Answer, when set, answers what the peer sends that may not pass on
	// as it is, as JSON-RPC has a server do, so that the peer goes on: a
	// line that is not JSON gets -32700 (parse error); one that is JSON
	// but not one message (a batch, an id that is neither a string nor a
	// number) and a request whose id is null get -32600 (invalid
	// request); each with id null. Set it for a client peer only: an
	// upstream that writes junk is not answered.
	Answer bool
	// Logger receives what the Conn drops and why; nil discards.
	Logger *slog.Logger
	// End, when set, turns the reason the input ended (io.EOF or a read
	// error) into the Conn's Err: a child reports its exit status there.
	// It runs on the reading goroutine before Recv is closed, and not at
	// all when Close came first.
	End func(error) error
	// Stop, when set, runs once in Close, after writing has stopped: it
	// ends the peer (a child process) and closes what the Conn reads from
	// and writes to. Its error is Close's.
	Stop func() error
}

// Conn is one JSON-RPC connection over a byte stream: it reads messages
// from r with a Reader on a goroutine of its own and writes them to w with
// a Writer. It implements the upstream connection contract (Send, Recv,
// Err, Close) and is safe for concurrent use.
//
// A message over MaxMessage is never delivered: when its two ends show
// that it answers a request, Recv delivers in its place an error response
// (jsonrpc.CodeUpstream, "<peer> message exceeds the N byte limit") so the
// caller waiting for it gets an answer; when it is a request, the peer gets
// an error response (jsonrpc.CodeInvalidRequest) instead; anything else is
// logged and dropped, as are malformed lines (answered with Options.Answer).
// The connection goes on. The error responses the Conn makes up for the
// peer are written apart from reading, at most maxAnswers waiting at once
// (past that they are logged and dropped): a peer that does not read
// holds neither the reading nor memory.
type Conn struct {
	o    Options
	log  *slog.Logger
	w    *Writer
	recv chan *jsonrpc.Message
	done chan struct{} // closed when Close starts
	// answers holds a token per error response waiting to be written.
	answers chan struct{}

	closeOnce sync.Once
	closeErr  error

	mu  sync.Mutex
	err error
}

// NewConn starts reading r. Nothing is closed by the Conn itself: closing
// r and w is Options.Stop's job (the stdio face leaves its own stdin and
// stdout open, a child closes its pipes). Until r returns, the reading
// goroutine lives on, and Recv stays open, after Close.
func NewConn(r io.Reader, w io.Writer, o Options) *Conn {
	if o.Peer == "" {
		o.Peer = "peer"
	}
	c := &Conn{o: o, log: orDiscard(o.Logger), recv: make(chan *jsonrpc.Message, 16), done: make(chan struct{}),
		answers: make(chan struct{}, maxAnswers)}
	c.w = newWriter(w, c.log, o.Expand)
	rd := NewReader(r, o.MaxMessage)
	if o.Spool != nil {
		rd = NewSpoolingReader(r, o.MaxMessage, o.Spool)
	}
	go c.read(rd)
	return c
}

func (c *Conn) read(r *Reader) {
	err := c.safely("reading from the "+c.o.Peer, func() error { return c.readLoop(r) })
	select {
	case <-c.done:
		err = nil // closed: not worth a word
	default:
		if c.o.End != nil {
			err = c.safely("ending the connection", func() error { return c.o.End(err) })
		} else if errors.Is(err, io.EOF) {
			err = ErrPeerClosed
		}
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.recv)
}

// readLoop delivers messages until the input ends (its error, io.EOF at
// the end) or Close (nil).
func (c *Conn) readLoop(r *Reader) error {
	for {
		m, err := r.Read()
		var tooLarge *TooLargeError
		var malformed *MalformedError
		switch {
		case err == nil && c.o.Expand && spill.HasMarkers(m.Raw):
			m = c.reserved(m)
		case err == nil && c.o.Answer && m.IsRequest() && string(m.ID) == "null":
			c.log.Warn("refusing a request whose id is null from the "+c.o.Peer, "method", m.Method)
			c.answer(nil, jsonrpc.CodeInvalidRequest, jsonrpc.NullIDText)
			m = nil
		case err == nil:
		case errors.As(err, &tooLarge):
			m = c.tooLarge(tooLarge)
		case errors.As(err, &malformed):
			c.log.Warn("dropping a malformed message from the "+c.o.Peer, "err", malformed.Err,
				"bytes", malformed.Size, "start", string(malformed.Line))
			if c.o.Answer {
				c.answer(nil, malformed.Code(), malformedText(malformed))
			}
		default:
			return err
		}
		if m == nil {
			continue
		}
		select {
		case c.recv <- m:
		case <-c.done:
			return nil
		}
	}
}

// safely runs f, turning a panic into an error (logged with its stack):
// a bug in one connection must not end the process.
func (c *Conn) safely(what string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic "+what, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("wire: panic %s: %v", what, p)
		}
	}()
	return f()
}

// tooLarge decides what stands for a message over the cap: an error
// response to deliver, or nil.
func (c *Conn) tooLarge(e *TooLargeError) *jsonrpc.Message {
	g := jsonrpc.Peek(e.Head, e.Tail)
	log := c.log.With("bytes", e.Size, "limit", e.Limit, "id", string(g.ID))
	text, what := fmt.Sprintf("%s message exceeds the %d byte limit", c.o.Peer, e.Limit), "over the size limit"
	if e.Err != nil {
		log = log.With("err", e.Err)
		text, what = fmt.Sprintf("%s message of %d bytes could not be spooled", c.o.Peer, e.Size), "that could not be spooled"
	}
	switch {
	case g.ID != nil && g.Response:
		log.Warn("a response " + what + ": answering its request with an error")
		return jsonrpc.ErrorResponse(g.ID, jsonrpc.CodeUpstream, text)
	case g.ID != nil && g.Method:
		log.Warn("a request " + what + ": answering it with an error")
		c.answer(g.ID, jsonrpc.CodeInvalidRequest, "message exceeds the size limit")
	default:
		log.Warn("dropping a message "+what, "start", string(e.Head[:min(len(e.Head), tailSize)]))
	}
	return nil
}

// reserved refuses a message from a client that holds a string spelt as
// a spill marker: what the proxy echoes of it (an id) would be expanded on
// the way back, so a client must not name a spilled string. A request is
// answered with an error; nothing is delivered.
func (c *Conn) reserved(m *jsonrpc.Message) *jsonrpc.Message {
	c.log.Warn("dropping a message from the "+c.o.Peer+" that holds a spill marker", "method", m.Method)
	if m.IsRequest() {
		id := m.ID
		if spill.HasMarkers(id) {
			id = []byte("null")
		}
		c.answer(id, jsonrpc.CodeInvalidRequest, "the message holds a string reserved by Spillway")
	}
	return nil
}

// maxAnswers bounds the error responses waiting to be written to a peer.
const maxAnswers = 64

// answer writes an error response for id (nil: null) to the peer, on a
// goroutine of its own so that reading goes on, within 5 s. Past
// maxAnswers waiting, it is dropped.
func (c *Conn) answer(id []byte, code int, msg string) {
	select {
	case c.answers <- struct{}{}:
	default:
		c.log.Warn("the "+c.o.Peer+" reads none of the errors it is sent; dropping one", "code", code, "message", msg)
		return
	}
	go c.safely("answering the "+c.o.Peer, func() error {
		defer func() { <-c.answers }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.w.Write(ctx, jsonrpc.ErrorResponse(id, code, msg).Raw)
	})
}

// malformedText is the message that answers a malformed line, in JSON-RPC's
// words and then the decoder's.
func malformedText(e *MalformedError) string {
	switch {
	case e.Code() == jsonrpc.CodeParseError:
		return "Parse error: the line is not JSON (one JSON-RPC message per line)"
	case bytes.HasPrefix(bytes.TrimSpace(e.Line), []byte("[")):
		return "Invalid Request: a batch; MCP has none, send one message per line"
	}
	return "Invalid Request: " + e.Err.Error()
}

// Send writes m as one line. It honours ctx: a write still blocked when
// ctx ends returns ctx.Err() (the line may be written later, whole) and
// never holds up Close. Concurrent Sends are written in the order they
// started. After Close it returns ErrClosed; after a failed write, that
// write's error.
func (c *Conn) Send(ctx context.Context, m *jsonrpc.Message) error {
	return c.w.Write(ctx, m.Raw)
}

// SendThen sends m, then after writes raw bytes right behind its line,
// no other message between (see Writer.WriteThen).
func (c *Conn) SendThen(ctx context.Context, m *jsonrpc.Message, after func(w io.Writer) error) error {
	return c.w.WriteThen(ctx, m.Raw, after)
}

// Recv yields every message the peer sends, in order. It is closed when
// the input ends, after which Err says why.
func (c *Conn) Recv() <-chan *jsonrpc.Message { return c.recv }

// Err says why Recv was closed: nil when Close came first, ErrPeerClosed
// (or what Options.End made of it) when the peer ended, the read error or
// panic otherwise. Before Recv is closed it is nil.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close stops writing, stops delivering and runs Options.Stop. Safe to
// call more than once and concurrently: every call returns once the first
// has finished, with its error.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		c.w.Close()
		if c.o.Stop != nil {
			c.closeErr = c.o.Stop()
		}
	})
	return c.closeErr
}
