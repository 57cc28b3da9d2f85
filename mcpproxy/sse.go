package mcpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
)

// Event is one server-sent event.
type Event struct {
	ID    string
	Name  string // the "event:" field; "" means "message"
	Data  []byte
	Retry int // milliseconds; 0 when absent
}

// SSEReader reads server-sent events. It has no limit on line or event
// size: a 100 MB JSON-RPC message is one data line, and cutting it would
// break the message.
type SSEReader struct {
	r       *bufio.Reader
	pending [][]byte // lines already read, split at a lone \r
	retry   int      // the last retry hint seen, in milliseconds
}

// NewSSEReader returns a reader of the event stream r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next event that carries data or an id. It returns
// io.EOF at a clean end of stream and io.ErrUnexpectedEOF when the stream
// ends inside an event.
func (s *SSEReader) Next() (Event, error) {
	var ev Event
	// The common event has one data line: it is used as read, without a
	// second copy of a possibly huge message.
	var data []byte
	ndata := 0
	seen := false
	for {
		line, err := s.line()
		if err != nil {
			if err == io.EOF && seen {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		if len(line) == 0 { // dispatch
			if ndata > 0 || ev.ID != "" {
				ev.Data = data
				return ev, nil
			}
			ev, seen = Event{}, false
			continue
		}
		seen = true
		if line[0] == ':' {
			continue // comment
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if ndata == 0 {
				data = value
			} else {
				data = append(append(data, '\n'), value...)
			}
			ndata++
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.ID = string(value)
			}
		case "event":
			ev.Name = string(value)
		case "retry":
			if n, err := strconv.Atoi(string(value)); err == nil {
				ev.Retry, s.retry = n, n
			}
		}
	}
}

// line reads one line without its terminator (\n, \r\n or a lone \r).
func (s *SSEReader) line() ([]byte, error) {
	if len(s.pending) > 0 {
		l := s.pending[0]
		s.pending = s.pending[1:]
		return l, nil
	}
	chunk, err := readLine(s.r)
	if err != nil && (err != io.EOF || len(chunk) == 0) {
		return nil, err
	}
	chunk = bytes.TrimSuffix(chunk, []byte("\r"))
	if bytes.IndexByte(chunk, '\r') < 0 {
		return chunk, nil
	}
	lines := bytes.Split(chunk, []byte("\r"))
	s.pending = lines[1:]
	return lines[0], nil
}

// SSEWriter writes server-sent events and flushes each one.
type SSEWriter struct {
	w http.ResponseWriter
	c *http.ResponseController
}

// NewSSEWriter sets the event-stream headers on w. The caller writes the
// status line (by the first event or WriteHeader).
func NewSSEWriter(w http.ResponseWriter) *SSEWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	// Reverse proxies such as nginx buffer responses by default, which
	// would hold every event back until the stream ends.
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	return &SSEWriter{w: w, c: http.NewResponseController(w)}
}

// Write sends one event. Data may contain newlines: each line becomes its
// own data field.
func (s *SSEWriter) Write(ev Event) error {
	var b bytes.Buffer
	if ev.ID != "" {
		b.WriteString("id: " + ev.ID + "\n")
	}
	if ev.Name != "" {
		b.WriteString("event: " + ev.Name + "\n")
	}
	if ev.Retry > 0 {
		b.WriteString("retry: " + strconv.Itoa(ev.Retry) + "\n")
	}
	if _, err := s.w.Write(b.Bytes()); err != nil {
		return err
	}
	data := ev.Data
	for {
		line, rest, more := bytes.Cut(data, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if _, err := io.WriteString(s.w, "data: "); err != nil {
			return err
		}
		if _, err := s.w.Write(line); err != nil {
			return err
		}
		if _, err := io.WriteString(s.w, "\n"); err != nil {
			return err
		}
		if !more {
			break
		}
		data = rest
	}
	if _, err := io.WriteString(s.w, "\n"); err != nil {
		return err
	}
	return s.Flush()
}

// Flush sends what is buffered; errors when the client is gone.
func (s *SSEWriter) Flush() error {
	if err := s.c.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
