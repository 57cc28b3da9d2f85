package resumable

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// streams reports whether the face's answer is one a stream is made of:
// a 200 with JSON or an event stream.
func streams(c *httpx.Recorder) bool {
	t := c.MediaType()
	return c.Status() == http.StatusOK && (t == "text/event-stream" || t == "application/json")
}

var errStopped = errors.New("resumable: the stream stopped taking messages")

// capture reads what the face wrote for s's request into s, then ends s.
func (reg *Registry) capture(s *Stream, c *httpx.Recorder) {
	defer s.finish()
	defer c.Stop(errStopped) // a face still writing stops at once
	<-c.Started()
	if !streams(c) {
		s.push(refusal(s.requestID, c))
		return
	}
	if c.MediaType() != "text/event-stream" {
		body, err := httpx.ReadMessage(c.Body(), -1, reg.o.MaxMessage, reg.spooler(s.owner.tenant))
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
	rd := sse.NewReader(c.Body(), reg.o.MaxMessage)
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
func refusal(id []byte, c *httpx.Recorder) *jsonrpc.Message {
	body, _ := io.ReadAll(io.LimitReader(c.Body(), 64<<10))
	if m, err := jsonrpc.DecodeMessage(body); err == nil && m.IsResponse() {
		return m.WithID(id)
	}
	return jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, fmt.Sprintf("the request was refused: HTTP %d %s",
		c.Status(), strings.TrimSpace(string(body[:min(len(body), 200)]))))
}
