package metrics

import (
	"net/http"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Exchange measures the requests of one POST to an HTTP face: Peek reads
// them from the body, Writer sees what the face answers, Done records
// one observation per request. A nil *Exchange measures nothing (its
// Writer is the writer it is given). It is used by the request's own
// goroutine, and by the face's goroutines through Writer (each write is
// serialized by the face, as an http.ResponseWriter's must be).
type Exchange struct {
	s     *Set
	start time.Time
	reqs  []pending
	w     *observedWriter
}

// pending is one request in flight: its method, id (jsonrpc.Key) and
// route.
type pending struct {
	method, id string
	route      Route
}

// Peek reads the requests of r's body (at most max bytes, the face's own
// cap; a larger body is left for the face to refuse) and puts the body
// back for the face to read. route says where each request goes. It
// returns nil when s is nil, r is not a POST, or the body holds no
// request.
func (s *Set) Peek(r *http.Request, max int64, route func(*jsonrpc.Message) Route) *Exchange {
	if s == nil || r.Method != http.MethodPost || r.Body == nil {
		return nil
	}
	b, err := httpx.PeekBody(r, max)
	if err != nil {
		return nil
	}
	msgs, _, err := jsonrpc.Decode(b)
	if err != nil {
		return nil
	}
	e := &Exchange{s: s, start: time.Now()}
	for _, m := range msgs {
		if m.IsRequest() {
			e.reqs = append(e.reqs, pending{method: m.Method, route: route(m), id: jsonrpc.Key(m.ID)})
		}
	}
	if len(e.reqs) == 0 {
		return nil
	}
	return e
}

// Writer returns w as the face should write to it: what passes is
// scanned for the responses. A nil e returns w.
func (e *Exchange) Writer(w http.ResponseWriter) http.ResponseWriter {
	if e == nil {
		return w
	}
	e.w = &observedWriter{ResponseWriter: w}
	return e.w
}

// Done records one observation per request of the POST: the outcome of
// its response, found in what the face wrote; cancelled, when the client
// went away (gone) before it; or the outcome of the HTTP status of a
// body with no response (a 5xx is an upstream failure). A request whose
// answer the face wrote elsewhere (a session stream resumed, a poll) is
// not observed here.
func (e *Exchange) Done(gone bool) {
	if e == nil {
		return
	}
	w := e.w
	if w == nil {
		w = &observedWriter{}
	}
	w.scan.end()
	d := time.Since(e.start)
	for i, rq := range e.reqs {
		a, found := w.answerFor(rq.id, i, len(e.reqs))
		var outcome, kind string
		switch {
		case found:
			outcome, kind = Outcome(a.isErr, a.code, a.message)
			if w.status >= 500 && outcome == Error {
				outcome, kind = UpstreamError, KindStatus
			}
		case gone:
			outcome = Cancelled
		case w.status >= 300 || w.status != 0 && !w.scanned:
			outcome, kind = StatusOutcome(w.status, w.text.String())
		default:
			continue // answered elsewhere
		}
		e.s.Request(rq.method, rq.route, outcome, kind, d)
	}
}

// observedWriter is the face's http.ResponseWriter, scanned.
type observedWriter struct {
	http.ResponseWriter
	status  int
	scanned bool // the body is JSON or an event stream: scan holds its responses
	scan    scanner
	text    strings.Builder // the start of another body, for StatusOutcome
}

func (w *observedWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
		ct := w.Header().Get("Content-Type")
		w.scan.sse = strings.HasPrefix(ct, "text/event-stream")
		w.scanned = w.scan.sse || strings.HasPrefix(ct, "application/json")
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *observedWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	switch {
	case w.scanned:
		w.scan.write(p)
	case w.text.Len() < 512:
		w.text.Write(p[:min(len(p), 512)])
	}
	return w.ResponseWriter.Write(p)
}

// Flush and FlushError flush the face's writer (sse.Writer and
// http.ResponseController ask for them); Unwrap gives
// http.ResponseController the rest (deadlines).
func (w *observedWriter) Flush() { _ = w.FlushError() }

func (w *observedWriter) FlushError() error {
	switch f := w.ResponseWriter.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *observedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// answerFor returns the response to the i-th of n requests, whose id is
// id: the one that names it, or, for the only request of a POST, the only
// response that names no id (its prefix was cut before the id).
func (w *observedWriter) answerFor(id string, i, n int) (answer, bool) {
	if w == nil {
		return answer{}, false
	}
	for _, a := range w.scan.answers {
		if a.id == id {
			return a, true
		}
	}
	if n == 1 && i == 0 && len(w.scan.answers) == 1 && w.scan.answers[0].id == "" {
		return w.scan.answers[0], true
	}
	return answer{}, false
}
