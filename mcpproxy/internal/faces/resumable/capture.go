package resumable

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// recorder is the ResponseWriter a face writes a stream's request to:
// what it writes goes through a pipe to capture, which reads it back
// message by message. It is never slow and never fails (until capture
// stops), so the face serves the request to its end whatever the client
// does. The controls http.ResponseController asks for are no-ops.
type recorder struct {
	h      http.Header
	once   sync.Once
	headed chan struct{} // closed once the status is known
	status int
	header http.Header // h as it was when the status was written
	pr     *io.PipeReader
	pw     *io.PipeWriter
}

func newRecorder() *recorder {
	pr, pw := io.Pipe()
	return &recorder{h: http.Header{}, headed: make(chan struct{}), pr: pr, pw: pw}
}

func (c *recorder) Header() http.Header { return c.h }

func (c *recorder) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return
	}
	c.once.Do(func() {
		c.status, c.header = code, c.h.Clone()
		close(c.headed)
	})
}

func (c *recorder) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.pw.Write(p)
}

func (c *recorder) Flush()                           {}
func (c *recorder) FlushError() error                { return nil }
func (c *recorder) SetWriteDeadline(time.Time) error { return nil }
func (c *recorder) SetReadDeadline(time.Time) error  { return nil }
func (c *recorder) EnableFullDuplex() error          { return nil }
func (c *recorder) done()                            { c.WriteHeader(http.StatusOK); c.pw.Close() }
func (c *recorder) stop(err error)                   { c.pr.CloseWithError(err) }
func (c *recorder) contentType() (string, bool)      { return mediaType(c.header.Get("Content-Type")) }
func mediaType(v string) (string, bool)              { t, _, err := mime.ParseMediaType(v); return t, err == nil }
func (c *recorder) streams() bool {
	t, _ := c.contentType()
	return c.status == http.StatusOK && (t == "text/event-stream" || t == "application/json")
}
func (c *recorder) isEventStream() bool { t, _ := c.contentType(); return t == "text/event-stream" }

var errStopped = errors.New("resumable: the stream stopped taking messages")

// capture reads what the face wrote for s's request into s, then ends s.
func (reg *Registry) capture(s *Stream, c *recorder) {
	defer s.finish()
	defer c.stop(errStopped) // a face still writing stops at once
	<-c.headed
	if !c.streams() {
		s.push(refusal(s.requestID, c))
		return
	}
	if !c.isEventStream() {
		body, err := httpx.ReadMessage(c.pr, -1, reg.o.MaxMessage, reg.spooler(s.owner.tenant))
		if err != nil {
			reg.log.Warn("a streamed request's answer was unreadable", "err", err)
			return
		}
		msgs, _, err := jsonrpc.Decode(body)
		if err != nil {
			return
		}
		for _, m := range msgs {
			s.push(m)
		}
		return
	}
	rd := sse.NewReader(c.pr, reg.o.MaxMessage)
	defer rd.Release()
	if sp := reg.spooler(s.owner.tenant); sp != nil {
		rd.Spool(sp)
	}
	for {
		ev, err := rd.Next()
		var tooLarge *sse.TooLargeError
		if errors.As(err, &tooLarge) {
			continue // the face's own events are bounded: not reached
		}
		if err != nil {
			return
		}
		if !ev.HasData {
			continue
		}
		m, err := jsonrpc.DecodeMessage(bytes.Clone(ev.Data))
		if err != nil {
			continue
		}
		s.push(m)
	}
}

// refusal is the error response for a request the face refused with an
// HTTP status after its stream was announced: the JSON-RPC error it
// wrote, or one saying what the status was.
func refusal(id []byte, c *recorder) *jsonrpc.Message {
	body, _ := io.ReadAll(io.LimitReader(c.pr, 64<<10))
	if m, err := jsonrpc.DecodeMessage(body); err == nil && m.IsResponse() {
		return m.WithID(id)
	}
	return jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, fmt.Sprintf("the request was refused: HTTP %d %s",
		c.status, strings.TrimSpace(string(body[:min(len(body), 200)]))))
}
