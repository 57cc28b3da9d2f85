package ndjson

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// ErrClosed is returned by Send and Write after Close.
var ErrClosed = errors.New("wire: connection closed")

// Writer writes messages as lines. One goroutine of its own does the
// writing, so a caller whose peer has stopped reading waits only as long
// as its context allows, and Close never waits for a write.
//
// A Writer is safe for concurrent use: concurrent Writes are written one
// at a time, in the order they started (the order their callers reached
// the hand-off, which a Go channel keeps first in, first out).
type Writer struct {
	expand bool // markers are expanded (a client's writer)
	reqs   chan writeReq
	done   chan struct{} // closed by Close
	once   sync.Once

	dead chan struct{} // closed when the writing goroutine stops on an error
	err  error         // why, set before dead is closed
}

type writeReq struct {
	line   []byte
	expand bool       // line holds markers to expand
	res    chan error // buffered: the writer never waits for a caller gone
	// after, when set, writes raw bytes right after the line (WriteThen).
	after func(w io.Writer) error
}

// NewWriter writes to w. A panic in w.Write is logged with its stack and
// fails the Writer, as a write error does: every later Write returns it.
// log may be nil.
func NewWriter(w io.Writer, log *slog.Logger) *Writer { return newWriter(w, log, false) }

// newWriter makes a Writer that expands spill markers when expand is set.
func newWriter(w io.Writer, log *slog.Logger, expand bool) *Writer {
	wr := &Writer{expand: expand, reqs: make(chan writeReq), done: make(chan struct{}), dead: make(chan struct{})}
	go wr.run(w, orDiscard(log))
	return wr
}

func (wr *Writer) run(w io.Writer, log *slog.Logger) {
	var cur *writeReq
	defer func() {
		if p := recover(); p != nil {
			log.Error("panic writing a message", "panic", p, "stack", string(debug.Stack()))
			err := fmt.Errorf("wire: panic writing: %v", p)
			if cur != nil {
				cur.res <- err
			}
			wr.fail(err)
		}
	}()
	for {
		select {
		case <-wr.done:
			return
		case req := <-wr.reqs:
			cur = &req
			err := write(w, req)
			cur = nil
			req.res <- err
			if err != nil && !errors.Is(err, spill.ErrGone) { // ErrGone: nothing was written
				wr.fail(err)
				return
			}
		}
	}
}

// write writes one line, its markers expanded if it has any: then in
// several writes, a long string streaming from its spill file, but still
// one line no other can come between.
func write(w io.Writer, req writeReq) error {
	err := writeLine(w, req)
	if err == nil && req.after != nil {
		if err = req.after(w); errors.Is(err, spill.ErrGone) {
			// The line is out: not the ErrGone that leaves the Writer going.
			err = errors.New("wire: writing after a line: " + err.Error())
		}
	}
	return err
}

// writeLine writes req's line, expanding its markers if it has any.
func writeLine(w io.Writer, req writeReq) error {
	if !req.expand {
		_, err := w.Write(req.line)
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	err := spill.Expand(bw, req.line)
	if err == nil {
		err = bw.Flush()
	}
	spill.Release(req.line) // a line to the client is never replayed, nor retried
	return err
}

func (wr *Writer) fail(err error) {
	wr.err = err
	close(wr.dead)
}

// Write writes raw as one line (compacted if it spans several: see
// jsonrpc.Line) in a single Write to the underlying writer, so a reader
// never sees half a message; a Conn's writer with Options.Expand expands
// spill markers first, streaming a long string in several Writes, and
// releases them once written (a marker that no longer resolves fails this
// Write with spill.ErrGone, nothing written, and the Writer goes on). It returns once the line is written, or with
// ctx.Err() when ctx ends first (the line may then still be written, whole,
// later), or ErrClosed after Close, or the error of an earlier write that
// failed.
func (wr *Writer) Write(ctx context.Context, raw []byte) error { return wr.WriteThen(ctx, raw, nil) }

// WriteThen is Write, then after is called with the underlying writer
// while no other line can come between: for bytes that belong to the
// line (binary transfer's frames). An error of after fails the Writer, as
// a write error does (the peer can no longer tell where the next line
// starts). after runs on the writing goroutine, even when ctx ends first.
func (wr *Writer) WriteThen(ctx context.Context, raw []byte, after func(w io.Writer) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	line := jsonrpc.Line(raw)
	req := writeReq{line: line, expand: wr.expand && spill.HasMarkers(line), res: make(chan error, 1), after: after}
	select {
	case wr.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-wr.done:
		return ErrClosed
	case <-wr.dead:
		return wr.err
	}
	select {
	case err := <-req.res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-wr.done:
		return ErrClosed
	}
}

// Close stops the Writer without waiting for a write in progress; closing
// the underlying writer (a child's stdin) is what ends such a write, and
// the caller's to do. Safe to call more than once.
func (wr *Writer) Close() error {
	wr.once.Do(func() { close(wr.done) })
	return nil
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
