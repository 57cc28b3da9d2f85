package sse

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// ErrInvalid is wrapped by Write for an event that cannot be written as
// given: an id, event name or comment with a line break (or an id with
// NUL), or a retry that is negative or not whole milliseconds.
var ErrInvalid = errors.New("sse: invalid event")

// SetHeaders sets the headers of an event-stream response on h.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	// Reverse proxies such as nginx buffer responses by default, which
	// would hold every event back until the stream ends.
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
}

// Writer writes events, each in full and flushed before Write returns.
// It is safe for concurrent use: events never interleave.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	flush   func() error // w's flush, when w is an http.ResponseWriter
	flusher flusher      // or w itself, when w has Flush() error
	buf     []byte
	final   bool // every event is written for good (see Final)
}

// NewWriter returns a Writer to w. When w is an http.ResponseWriter (or
// has a Flush method) each event is flushed; the caller sets the headers
// (SetHeaders) and status before the first event.
func NewWriter(w io.Writer) *Writer {
	sw := &Writer{w: w}
	switch f := w.(type) {
	case http.ResponseWriter:
		rc := http.NewResponseController(f)
		sw.flush = func() error {
			if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return err
			}
			return nil
		}
	case flusher:
		sw.flusher = f // not f.Flush: a method value is an allocation per writer
	}
	return sw
}

type flusher interface{ Flush() error }

// Final makes sw release the spilled strings of every event once written,
// ids or not: for a writer whose events are never replayed from this
// process (a relay: its upstream replays). It returns sw.
func (sw *Writer) Final() *Writer {
	sw.final = true
	return sw
}

// Flush sends what is buffered; it fails when the peer is gone.
func (sw *Writer) Flush() error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.flushLocked()
}

func (sw *Writer) flushLocked() error {
	switch {
	case sw.flusher != nil:
		return sw.flusher.Flush()
	case sw.flush != nil:
		return sw.flush()
	}
	return nil
}

// Check reports, wrapping ErrInvalid, why ev cannot be written.
func Check(ev *Event) error {
	if strings.ContainsAny(ev.ID, "\r\n\x00") {
		return fmt.Errorf("%w: id %.40q has a line break or NUL", ErrInvalid, ev.ID)
	}
	if strings.ContainsAny(ev.Name, "\r\n") {
		return fmt.Errorf("%w: event name %.40q has a line break", ErrInvalid, ev.Name)
	}
	for _, c := range ev.Comments {
		if strings.ContainsAny(c, "\r\n") {
			return fmt.Errorf("%w: comment %.40q has a line break", ErrInvalid, c)
		}
	}
	if ev.Retry < 0 || ev.Retry%time.Millisecond != 0 {
		return fmt.Errorf("%w: retry %v is not a whole number of milliseconds", ErrInvalid, ev.Retry)
	}
	return nil
}

// Write writes ev, field by field, then a blank line, and flushes. Line
// breaks in Data (LF, CRLF or CR) each start a new data line, which a
// reader joins back with LF. Spill markers in Data are expanded (see
// spill.Expand), and released once written when the event has no id:
// only an event with an id can be replayed. An event with no field writes
// nothing. Write returns an error wrapping ErrInvalid (see Check) or
// spill.ErrGone before writing anything, or the underlying writer's error.
func (sw *Writer) Write(ev Event) error {
	if err := Check(&ev); err != nil {
		return err
	}
	hasID := ev.HasID || ev.ID != ""
	hasRetry := ev.HasRetry || ev.Retry != 0
	hasData := ev.HasData || len(ev.Data) > 0
	if !hasID && ev.Name == "" && !hasRetry && !hasData && len(ev.Comments) == 0 {
		return nil
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	b := appendFields(sw.buf[:0], &ev, hasID, hasRetry)
	// Spill markers in the data are expanded on the way out (the strings
	// they stand for hold no line break, so the data lines are the
	// markers' lines): the event is framed in memory, then written by
	// spill.Expand, which resolves every marker before writing a byte.
	expand := hasData && spill.HasMarkers(ev.Data)
	dataAt := len(b)
	if hasData {
		var err error
		if b, err = sw.appendData(b, ev.Data, expand); err != nil {
			return err
		}
	}
	b = append(b, '\n')
	var err error
	if expand {
		err = spill.Expand(&prefixed{w: sw.w, p: b[:dataAt]}, b[dataAt:])
		if !hasID || sw.final {
			// Never replayed, and never written again if this write
			// failed (a client that stopped reading keeps no disk).
			spill.Release(ev.Data)
		}
	} else {
		_, err = sw.w.Write(b)
	}
	if cap(b) <= 64<<10 {
		sw.buf = b[:0]
	}
	if err != nil {
		return err
	}
	return sw.flushLocked()
}

// appendFields appends ev's fields but data to b, each on a line of its
// own: comments, id, event name, retry.
func appendFields(b []byte, ev *Event, hasID, hasRetry bool) []byte {
	for _, c := range ev.Comments {
		b = append(append(append(b, ": "...), c...), '\n')
	}
	if hasID {
		b = append(append(append(b, "id: "...), ev.ID...), '\n')
	}
	if ev.Name != "" {
		b = append(append(append(b, "event: "...), ev.Name...), '\n')
	}
	if hasRetry {
		b = strconv.AppendInt(append(b, "retry: "...), ev.Retry.Milliseconds(), 10)
		b = append(b, '\n')
	}
	return b
}

// appendData appends data to b as data lines, one per line of data (a
// line break is LF, CRLF or CR). A line longer than 32 KiB is written to
// sw.w at once, after b, rather than copied into b, unless the data has
// markers to expand (expand): then everything goes through b.
func (sw *Writer) appendData(b, data []byte, expand bool) ([]byte, error) {
	for {
		i := lineEnd(data)
		line := data
		if i >= 0 {
			line = data[:i]
		}
		// "data:" even when empty: some readers refuse a bare field name.
		b = append(b, "data:"...)
		if len(line) > 0 {
			b = append(b, ' ')
			// A long line goes out as it is, not through a second copy.
			if len(line) > 32<<10 && !expand {
				if _, err := sw.w.Write(b); err != nil {
					return b, err
				}
				if _, err := sw.w.Write(line); err != nil {
					return b, err
				}
				b = b[:0]
			} else {
				b = append(b, line...)
			}
		}
		b = append(b, '\n')
		if i < 0 {
			return b, nil
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// WriteRaw writes b, then flushes: b is whole events as a Reader read
// them (Reader.Raw), passed on as they came, without being parsed and
// encoded again. It is not checked: the caller vouches that b ends with
// its last event's blank line, so that it cannot run into what follows.
func (sw *Writer) WriteRaw(b []byte) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if _, err := sw.w.Write(b); err != nil {
		return err
	}
	return sw.flushLocked()
}

// prefixed writes p before the first write to w, so that nothing is
// written when there is no first write.
type prefixed struct {
	w io.Writer
	p []byte
}

func (x *prefixed) Write(b []byte) (int, error) {
	if len(x.p) > 0 {
		if _, err := x.w.Write(x.p); err != nil {
			return 0, err
		}
		x.p = nil
	}
	return x.w.Write(b)
}
