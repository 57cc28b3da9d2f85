package resumable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// Handler serves one authenticated /mcp request: a face, or an extension
// in front of one.
type Handler interface {
	ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request)
}

// HTTP returns next behind the registry: an opted-in client's stream
// requests and stream methods are served here, everything else by next
// as it is.
func (reg *Registry) HTTP(next Handler) Handler { return &front{reg: reg, next: next} }

type front struct {
	reg  *Registry
	next Handler
}

// streamed are the methods whose requests open a stream.
var streamed = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true, "completion/complete": true}

// ours are the methods the registry answers (for an opted-in client).
var ours = map[string]bool{"stream/poll": true, "stream/poll/all": true, "stream/resume": true}

// mayConcern tells from the headers alone whether a POST may concern the
// registry, so that no other request has its body read twice: in the
// stateless era its Mcp-Method names the method, in the session era its
// session must have declared streams.
func (f *front) mayConcern(r *http.Request, rq ownmethods.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	if mcpheader.Stateless(r.Header.Get("Mcp-Protocol-Version")) {
		m := r.Header.Get(mcpheader.Method)
		return streamed[m] || ours[m] || m == "notifications/cancelled"
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" || f.reg.o.Methods == nil {
		return false
	}
	rq.Session = sid
	return declares(f.reg.o.Methods.StreamCaps(rq, &jsonrpc.Message{}).Raw)
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request) {
	if !f.mayConcern(r, rq) {
		f.next.ServeHTTP(w, r, rq)
		return
	}
	body, err := httpx.PeekBody(r, f.reg.o.MaxBody) // the face reads it again, and judges it
	if err != nil {
		f.next.ServeHTTP(w, r, rq)
		return
	}
	m, err := jsonrpc.DecodeMessage(body)
	if err != nil || spill.MayHoldMarker(body) {
		f.next.ServeHTTP(w, r, rq)
		return
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	o := owner{tenant: rq.Tenant}
	if mcpheader.Stateless(version) {
		// A notification need not repeat the capabilities: a
		// cancellation finds its stream, if any, by its request id.
		if m.Method != "notifications/cancelled" && !declares(jsonrpc.Meta(m, jsonrpc.MetaClientCapabilities)) {
			f.next.ServeHTTP(w, r, rq)
			return
		}
	} else {
		o.session = r.Header.Get("Mcp-Session-Id")
	}
	switch {
	case m.IsRequest() && ours[m.Method]:
		f.answer(w, r, version, o, m)
	case m.IsNotification() && m.Method == "notifications/cancelled":
		if s := f.reg.ofRequest(o, jsonrpc.RawMember(m.Params, "requestId")); s != nil {
			s.cancel()
		}
		f.next.ServeHTTP(w, r, rq) // the face tells the upstream
	case m.IsRequest() && streamed[m.Method]:
		f.stream(w, r, rq, version, o, m, body)
	default:
		f.next.ServeHTTP(w, r, rq)
	}
}

// stream serves a request that opens a stream: the face serves it under
// a context of its own, into a recorder; the client's connection reads
// the stream. A face that does not answer 200 with JSON or an event
// stream (an error status, a redirect) is relayed as it answered, and no
// stream is announced.
func (f *front) stream(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, version string, o owner, m *jsonrpc.Message, body []byte) {
	s := f.reg.open(o, m.ID)
	if s == nil {
		httpx.WriteReply(w, version, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, "too many open streams; try again later"))
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	var up func()
	if !mcpheader.Stateless(version) {
		// A session-era upstream takes a closed connection for a
		// dropped one, not a cancellation: it must be told.
		up = func() { f.cancelUpstream(r, rq, m.ID) }
	}
	s.setCancel(cancel, up)
	rec := f.run(ctx, r, rq, body)
	// A face's answer that is not a stream's (an error status) comes at
	// once; one that is slow to start is announced anyway, so that a
	// client dropping early can resume (capture turns a late refusal
	// into an error response).
	select {
	case <-rec.Started():
		if !streams(rec) {
			f.reg.remove(s)
			relay(w, r, rec, cancel)
			return
		}
	case <-time.After(headerWait):
	case <-r.Context().Done():
		f.reg.remove(s)
		cancel()
		rec.Stop(errStopped)
		return
	}
	gen, after := s.attach(0, false) // before the first message: this client reads
	go f.reg.capture(s, rec)
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	out := f.writer(w)
	if out.write(0, createNotification(s, f.reg.o, m.ID)) != nil {
		s.detach(gen)
		return
	}
	if s.serve(r.Context(), gen, after, out) == nil {
		out.clear()
	}
}

// run has the face serve the request of body under ctx, into a recorder.
func (f *front) run(ctx context.Context, r *http.Request, rq ownmethods.Request, body []byte) *httpx.Recorder {
	rec := httpx.NewRecorder()
	inner := r.Clone(ctx)
	inner.Body, inner.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	go func() {
		defer rec.Close()
		defer func() {
			if p := recover(); p != nil {
				f.reg.log.Error("serving a streamed request panicked", "panic", p)
			}
		}()
		f.next.ServeHTTP(rec, inner, rq)
	}()
	return rec
}

// headerWait is how long a stream waits for the face's status before it
// is announced.
const headerWait = 500 * time.Millisecond

// relay copies the face's answer to the client as it came; a client that
// leaves ends the face's run.
func relay(w http.ResponseWriter, r *http.Request, rec *httpx.Recorder, cancel context.CancelFunc) {
	defer cancel()
	for k, vs := range rec.Sent() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Status())
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := rec.Body().Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				rec.Stop(errStopped)
				return
			}
		}
		if err != nil || r.Context().Err() != nil {
			rec.Stop(errStopped)
			return
		}
	}
}

// cancelUpstream sends the face, as the client, notifications/cancelled
// for request id: the face passes it upstream as it would the client's.
func (f *front) cancelUpstream(r *http.Request, rq ownmethods.Request, id []byte) {
	body := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(id) +
		`,"reason":"the stream was abandoned or passed its bound"}}`)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	io.Copy(io.Discard, f.run(ctx, r, rq, body).Body())
}

// eventWriter writes a stream's entries as server-sent events, each
// under a deadline: a client that stops reading is cut (and its stream
// detached) rather than holding the stream for ever.
type eventWriter struct {
	sw    *sse.Writer
	rc    *http.ResponseController
	stall time.Duration
}

func (f *front) writer(w http.ResponseWriter) *eventWriter {
	return &eventWriter{sw: sse.NewWriter(w), rc: http.NewResponseController(w), stall: f.reg.o.WriteStall}
}

// write writes one event; seq 0 is written without an id.
func (ew *eventWriter) write(seq uint64, raw []byte) error {
	if ew.stall > 0 {
		ew.rc.SetWriteDeadline(time.Now().Add(ew.stall))
	}
	ev := sse.Event{Data: raw, HasData: true}
	if seq > 0 {
		ev.ID, ev.HasID = strconv.FormatUint(seq, 10), true
	}
	return ew.sw.Write(ev)
}

// ping writes an SSE comment, so that no idle timeout on the way cuts a
// long, silent request.
func (ew *eventWriter) ping() error {
	if ew.stall > 0 {
		ew.rc.SetWriteDeadline(time.Now().Add(ew.stall))
	}
	return ew.sw.Write(sse.Event{Comments: []string{"keep-alive"}})
}

// clear lifts the deadline once the response is written whole: the
// connection may serve further requests.
func (ew *eventWriter) clear() {
	if ew.stall > 0 {
		ew.rc.SetWriteDeadline(time.Time{})
	}
}

func createNotification(s *Stream, o Options, requestID []byte) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"notifications/stream/create","params":{"stream":{"streamId":"` + s.id +
		`","resumeInterval":{"min":` + seconds(o.ResumeMin) + `,"max":` + seconds(o.ResumeMax) + `}},"requestId":` + string(requestID) + `}}`)
}

// answer serves stream/poll, stream/poll/all and stream/resume.
func (f *front) answer(w http.ResponseWriter, r *http.Request, version string, o owner, m *jsonrpc.Message) {
	p, err := parseParams(m.Method, m.Params)
	if err != nil {
		httpx.WriteReply(w, version, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, err.Error()))
		return
	}
	if m.Method == "stream/poll/all" {
		streams := []PollResult{}
		for _, s := range f.reg.list(o) {
			streams = append(streams, s.poll())
		}
		httpx.WriteReply(w, version, jsonrpc.Response(m.ID, mustJSON(map[string]any{"streams": streams})))
		return
	}
	s := f.reg.get(p.StreamID, o)
	if s == nil {
		httpx.WriteReply(w, version, unknown(m.ID))
		return
	}
	if m.Method == "stream/poll" {
		httpx.WriteReply(w, version, jsonrpc.Response(m.ID, mustJSON(s.poll())))
		return
	}
	if !p.HasLast {
		if h := r.Header.Get("Last-Event-ID"); h != "" {
			if p.LastEventID, err = strconv.ParseUint(h, 10, 64); err != nil {
				httpx.WriteReply(w, version, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, "Last-Event-ID is not an event id of a stream"))
				return
			}
			p.HasLast = true
		}
	}
	f.resume(w, r, s, p, m.ID)
}

// resume takes the stream over for this connection: what the client has
// not received, then what comes, then the end and the resume's own
// answer.
func (f *front) resume(w http.ResponseWriter, r *http.Request, s *Stream, p params, id []byte) {
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	gen, after := s.attach(p.LastEventID, p.HasLast)
	out := f.writer(w)
	err := s.serve(r.Context(), gen, after, out)
	result := map[string]any{"streamId": s.id, "status": "completed"}
	if errors.Is(err, errTakenOver) {
		result = map[string]any{"streamId": s.id, "status": "live", "takenOver": true}
	} else if err != nil {
		return // the connection is gone
	}
	if out.write(0, jsonrpc.Response(id, mustJSON(result)).Raw) == nil {
		out.clear()
	}
}

func unknown(id []byte) *jsonrpc.Message {
	return jsonrpc.ErrorResponse(id, CodeUnknownStream, "unknown stream")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// spooler returns the Spooler of tenant's share, or nil.
func (reg *Registry) spooler(tenant string) sse.Spooler {
	if reg.o.Spool == nil {
		return nil
	}
	return reg.o.Spool.For(tenant)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(w http.ResponseWriter, r *http.Request, rq ownmethods.Request)

// ServeHTTP calls h.
func (h HandlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request) {
	h(w, r, rq)
}
