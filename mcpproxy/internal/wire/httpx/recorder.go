package httpx

import (
	"io"
	"mime"
	"net/http"
	"sync"
	"time"
)

// Recorder is the ResponseWriter an extension runs a face into when it
// must read the face's answer back as it is written (resumable streams,
// binary transfer): the body goes through a pipe to Body. It is never
// slow and never fails until Stop, so the face serves its request to the
// end whatever the client does; the controls http.ResponseController
// asks for (Flush, deadlines, full duplex) are no-ops because the
// extension writes the client itself, under its own rules.
//
// Create it with NewRecorder. The face writes (Header, WriteHeader,
// Write) from one goroutine; the extension reads Body from another, and
// Status and Sent once Started is closed.
type Recorder struct {
	h       http.Header
	once    sync.Once
	started chan struct{}
	status  int
	sent    http.Header
	pr      *io.PipeReader
	pw      *io.PipeWriter
}

var (
	_ http.ResponseWriter = (*Recorder)(nil)
	_ http.Flusher        = (*Recorder)(nil)
)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	pr, pw := io.Pipe()
	return &Recorder{h: http.Header{}, started: make(chan struct{}), pr: pr, pw: pw}
}

// Header is the header the face is building.
func (c *Recorder) Header() http.Header { return c.h }

// WriteHeader records the status and the header as they are now.
// Informational statuses are not the answer and are dropped.
func (c *Recorder) WriteHeader(code int) {
	if code < 200 {
		return
	}
	c.once.Do(func() {
		c.status, c.sent = code, c.h.Clone()
		close(c.started)
	})
}

// Write passes p to Body, blocking until it is read or Stop is called.
func (c *Recorder) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.pw.Write(p)
}

func (c *Recorder) Flush()                           {}
func (c *Recorder) FlushError() error                { return nil }
func (c *Recorder) SetWriteDeadline(time.Time) error { return nil }
func (c *Recorder) SetReadDeadline(time.Time) error  { return nil }
func (c *Recorder) EnableFullDuplex() error          { return nil }

// Started is closed once the status is known: WriteHeader, Write or
// Close was called.
func (c *Recorder) Started() <-chan struct{} { return c.started }

// Status is the face's status; valid once Started is closed.
func (c *Recorder) Status() int { return c.status }

// Sent is the header as it was when the status was written; valid once
// Started is closed. The caller must not change it.
func (c *Recorder) Sent() http.Header { return c.sent }

// MediaType is Sent's Content-Type without parameters, or "" when it has
// none or it does not parse.
func (c *Recorder) MediaType() string {
	t, _, err := mime.ParseMediaType(c.sent.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return t
}

// Body reads what the face wrote, then io.EOF after Close.
func (c *Recorder) Body() io.Reader { return c.pr }

// Close says the face is done: a face that wrote nothing answered 200
// with an empty body.
func (c *Recorder) Close() {
	c.WriteHeader(http.StatusOK)
	c.pw.Close()
}

// Stop ends the reading side: the face's pending and later writes fail
// with err at once.
func (c *Recorder) Stop(err error) { c.pr.CloseWithError(err) }
