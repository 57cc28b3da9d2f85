package resumable

import (
	"context"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Client is the client's side of stdio as the stdio face sees it (the
// same shape as stdio.Client): Recv delivers the client's messages,
// closed at the end of its input; Send writes one to it.
type Client interface {
	Send(ctx context.Context, m *jsonrpc.Message) error
	Recv() <-chan *jsonrpc.Message
}

// Stdio returns c as the face sees it behind the registry. Over stdio the
// pipe does not drop, so a stream only frames its request's messages:
// notifications/stream/create before the request reaches the face, the
// progress notifications of its progressToken, its response, then
// notifications/stream/end. Other notifications and server requests
// cannot be told apart by request on a pipe, and go out as they are.
// stream/poll and stream/resume answer at once (nothing is ever pending);
// a completed stream is forgotten ResumeMax after its end.
//
// The client's messages are passed on until ctx ends.
func (reg *Registry) Stdio(ctx context.Context, c Client) Client {
	sc := &stdioClient{reg: reg, inner: c, in: make(chan *jsonrpc.Message), ctx: ctx,
		owner: owner{session: "stdio:" + newID()}, byReq: map[string]*Stream{}, byToken: map[string]*Stream{}}
	go sc.read()
	return sc
}

type stdioClient struct {
	reg   *Registry
	inner Client
	in    chan *jsonrpc.Message
	ctx   context.Context
	owner owner

	mu       sync.Mutex
	declared bool               // the client's initialize declared streams
	byReq    map[string]*Stream // open streams by request id key
	byToken  map[string]*Stream // and by progress token key
}

func (sc *stdioClient) Recv() <-chan *jsonrpc.Message { return sc.in }

// read passes the client's messages on, opening a stream before a stream
// request and answering the stream methods itself.
func (sc *stdioClient) read() {
	defer close(sc.in)
	defer func() { // the client is gone: so are its streams
		for _, s := range sc.reg.list(sc.owner) {
			s.free()
		}
	}()
	for m := range sc.inner.Recv() {
		if !sc.optedIn(m) {
			if !sc.pass(m) {
				return
			}
			continue
		}
		switch {
		case m.IsRequest() && ours[m.Method]:
			sc.answer(m)
			continue
		case m.IsRequest() && streamed[m.Method]:
			sc.open(m)
		case m.IsNotification() && m.Method == "notifications/cancelled":
			sc.cancelled(jsonrpc.RawMember(m.Params, "requestId"))
		}
		if !sc.pass(m) {
			return
		}
	}
}

// pass hands m to the face; false once the face is gone.
func (sc *stdioClient) pass(m *jsonrpc.Message) bool {
	select {
	case sc.in <- m:
		return true
	case <-sc.ctx.Done():
		return false
	}
}

// optedIn reports whether m's client declared streams: in its initialize
// (remembered), or in m's own _meta (2026-07-28).
func (sc *stdioClient) optedIn(m *jsonrpc.Message) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if m.IsRequest() && m.Method == "initialize" {
		sc.declared = declares(jsonrpc.RawMember(m.Params, "capabilities"))
	}
	return sc.declared || declares(jsonrpc.Meta(m, jsonrpc.MetaClientCapabilities))
}

func (sc *stdioClient) open(m *jsonrpc.Message) {
	s := sc.reg.open(sc.owner, m.ID)
	if s == nil {
		return // past MaxStreams the request goes without a stream
	}
	sc.mu.Lock()
	sc.byReq[jsonrpc.Key(m.ID)] = s
	if tok := jsonrpc.Path(m.Params, "_meta", "progressToken"); tok != nil {
		sc.byToken[jsonrpc.Key(tok)] = s
	}
	sc.mu.Unlock()
	s.mu.Lock()
	s.attached = true // the pipe reads it, for as long as it lives
	s.mu.Unlock()
	sc.inner.Send(context.Background(), jsonrpc.MustDecode(string(createNotification(s, sc.reg.o, m.ID))))
}

func (sc *stdioClient) cancelled(id []byte) {
	sc.mu.Lock()
	s := sc.byReq[jsonrpc.Key(id)]
	sc.mu.Unlock()
	if s != nil {
		s.cancel()
	}
}

// Send writes m to the client; a stream's response is followed by the
// stream's end.
func (sc *stdioClient) Send(ctx context.Context, m *jsonrpc.Message) error {
	s := sc.streamOf(m)
	if err := sc.inner.Send(ctx, m); err != nil || s == nil || !m.IsResponse() {
		return err
	}
	s.mu.Lock()
	s.answered = true
	s.endLocked()
	s.entries = nil // the pipe delivered everything
	s.mu.Unlock()
	sc.forget(m.ID, s)
	return sc.inner.Send(ctx, jsonrpc.MustDecode(string(endNotification(s.id))))
}

// streamOf returns the stream m belongs to: a response to, or progress
// of, a stream's request.
func (sc *stdioClient) streamOf(m *jsonrpc.Message) *Stream {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	switch {
	case m.IsResponse():
		return sc.byReq[jsonrpc.Key(m.ID)]
	case m.Method == "notifications/progress":
		if tok := jsonrpc.RawMember(m.Params, "progressToken"); tok != nil {
			return sc.byToken[jsonrpc.Key(tok)]
		}
	}
	return nil
}

// forget drops a completed stream's routes, and the stream itself
// ResumeMax later (poll and resume of it answer until then).
func (sc *stdioClient) forget(id []byte, s *Stream) {
	sc.mu.Lock()
	delete(sc.byReq, jsonrpc.Key(id))
	for k, t := range sc.byToken {
		if t == s {
			delete(sc.byToken, k)
		}
	}
	sc.mu.Unlock()
	time.AfterFunc(sc.reg.o.ResumeMax, s.free)
}

// answer serves stream/poll, stream/poll/all and stream/resume at once.
func (sc *stdioClient) answer(m *jsonrpc.Message) {
	send := func(r *jsonrpc.Message) { sc.inner.Send(context.Background(), r) }
	p, err := parseParams(m.Method, m.Params)
	if err != nil {
		send(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, err.Error()))
		return
	}
	if m.Method == "stream/poll/all" {
		streams := []PollResult{}
		for _, s := range sc.reg.list(sc.owner) {
			streams = append(streams, s.poll())
		}
		send(jsonrpc.Response(m.ID, mustJSON(map[string]any{"streams": streams})))
		return
	}
	s := sc.reg.get(p.StreamID, sc.owner)
	if s == nil {
		send(unknown(m.ID))
		return
	}
	r := s.poll()
	if m.Method == "stream/poll" {
		send(jsonrpc.Response(m.ID, mustJSON(r)))
		return
	}
	if r.Status == "completed" {
		send(jsonrpc.MustDecode(string(endNotification(s.id))))
	}
	send(jsonrpc.Response(m.ID, mustJSON(map[string]any{"streamId": s.id, "status": r.Status})))
}
