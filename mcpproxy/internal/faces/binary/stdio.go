package binary

import (
	"context"
	"io"
	"sync"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/binframe"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Conn is a stdio client's side as the stdio face uses it (the methods
// of stdio.Client; no package imports a face): Recv delivers the client's
// messages, Send writes one to it.
type Conn interface {
	Send(ctx context.Context, m *jsonrpc.Message) error
	Recv() <-chan *jsonrpc.Message
}

// FrameConn is a stdio client connection that can write raw bytes right
// after a line (*ndjson.Conn is one).
type FrameConn interface {
	Conn
	SendThen(ctx context.Context, m *jsonrpc.Message, after func(w io.Writer) error) error
}

// maxPending bounds the requests of a 2026-07-28 client remembered as
// asking for binary transfer while they run; past it the oldest ones
// get base64.
const maxPending = 4096

// Client returns c behind the extension: a client that declared
// binaryTransfer (in initialize, or in a 2026-07-28 request's _meta) and
// does not prefer another mode than stream gets each response's binary
// items as frames after its line (binframe.WriteFrame), and its
// resources/read with transferMode "binary" of one of the proxy's
// artifacts is answered by the extension, the bytes streamed from the
// store. c is returned as it is when it cannot write frames. Every other
// client's messages pass untouched both ways. The wrapper's goroutine
// ends with c's Recv, or with ctx.
func (e *Extension) Client(ctx context.Context, c Conn) Conn {
	fc, ok := c.(FrameConn)
	if !ok {
		return c
	}
	s := &stdioClient{e: e, c: fc, recv: make(chan *jsonrpc.Message), pending: map[string]ClientCaps{}}
	go s.read(ctx)
	return s
}

// stdioClient is one stdio client behind the extension.
type stdioClient struct {
	e    *Extension
	c    FrameConn
	recv chan *jsonrpc.Message

	mu      sync.Mutex
	session *ClientCaps           // what initialize declared; nil: nothing
	pending map[string]ClientCaps // 2026-07-28 requests that declared it, by id
	order   []string
}

func (s *stdioClient) Recv() <-chan *jsonrpc.Message { return s.recv }

// read passes the client's messages on, noting what they declare and
// answering binary reads of artifacts itself.
func (s *stdioClient) read(ctx context.Context) {
	defer close(s.recv)
	for {
		var m *jsonrpc.Message
		select {
		case m = <-s.c.Recv():
		case <-ctx.Done():
			return
		}
		if m == nil {
			return
		}
		if s.note(m) && m.Method == "resources/read" && jsonrpc.StringMember(m.Params, "transferMode") == "binary" && s.readArtifact(ctx, m) {
			continue
		}
		select {
		case s.recv <- m:
		case <-ctx.Done():
			return
		}
	}
}

// note records what m declares; true when m is a request of a client in
// stream mode.
func (s *stdioClient) note(m *jsonrpc.Message) bool {
	if !m.IsRequest() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Method == "initialize" {
		s.session = nil
		if c, ok := ParseClient(jsonrpc.RawMember(m.Params, "capabilities")); ok {
			s.session = &c
		}
	}
	if c, ok := ParseClient(jsonrpc.Meta(m, jsonrpc.MetaClientCapabilities)); ok {
		if len(s.order) >= maxPending {
			delete(s.pending, s.order[0])
			s.order = s.order[1:]
		}
		k := jsonrpc.Key(m.ID)
		s.pending[k] = c
		s.order = append(s.order, k)
	}
	_, ok := s.capsLocked(m.ID, false)
	return ok
}

// caps is what applies to the response with id: a 2026-07-28 request's
// own declaration (forgotten now, with done), else initialize's; ok is
// false unless the client is in stream mode.
func (s *stdioClient) caps(id []byte, done bool) (ClientCaps, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capsLocked(id, done)
}

func (s *stdioClient) capsLocked(id []byte, done bool) (ClientCaps, bool) {
	k := jsonrpc.Key(id)
	c, ok := s.pending[k]
	if ok && done {
		delete(s.pending, k) // its place in order goes when it comes up
	}
	if !ok && s.session != nil {
		c, ok = *s.session, true
	}
	return c, ok && (c.Mode == "" || c.Mode == ModeStream)
}

// Send writes m; a response to a client in stream mode has its binary
// items as frames after its line.
func (s *stdioClient) Send(ctx context.Context, m *jsonrpc.Message) error {
	if !m.IsResponse() || m.Result == nil {
		return s.c.Send(ctx, m)
	}
	caps, ok := s.caps(m.ID, true)
	if !ok {
		return s.c.Send(ctx, m)
	}
	conv := &converter{rq: ownmethods.Request{Stdio: true, Version: ""}, arts: s.e.o.Methods, max: caps.limit(s.e.o.MaxSize), refs: s.e.refs}
	nm, items := conv.message(ctx, m)
	if items == nil {
		return s.c.Send(ctx, m)
	}
	return s.sendFrames(ctx, nm, items)
}

// sendFrames writes m, then each item's frame; the items are released
// once written, or when the write never happens.
func (s *stdioClient) sendFrames(ctx context.Context, m *jsonrpc.Message, items []item) error {
	var once sync.Once
	free := func() { once.Do(func() { release(items) }) }
	err := s.c.SendThen(ctx, m, func(w io.Writer) error {
		defer free()
		for _, it := range items {
			if err := binframe.WriteFrame(w, it.id, it.size, it.open()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		free() // not after a context end: the frames may be written still
	}
	return err
}

// readArtifact answers a binary resources/read of one of the proxy's
// artifacts: a binaryRef in contents, the bytes in a frame. false: not
// one of the proxy's artifacts, the request goes on.
func (s *stdioClient) readArtifact(ctx context.Context, m *jsonrpc.Message) bool {
	caps, _ := s.caps(m.ID, true)
	rq := ownmethods.Request{Stdio: true, Version: jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion)}
	uri := jsonrpc.StringMember(m.Params, "uri")
	a, rc, fail, ours := s.e.o.Methods.OpenArtifact(ctx, rq, m.ID, uri)
	switch {
	case !ours:
		return false
	case fail != nil:
		s.c.Send(ctx, fail)
		return true
	case a.Size > caps.limit(s.e.o.MaxSize):
		rc.Close()
		s.c.Send(ctx, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, "the artifact is larger than the binary transfer limit; use its httpUrl"))
		return true
	}
	it := item{id: binframe.NewStreamID(), mime: a.MimeType, size: a.Size, open: func() io.Reader { return rc }, done: func() { rc.Close() }}
	content := map[string]any{"uri": uri, "mimeType": a.MimeType, "transferMode": "binary",
		"binaryRef": map[string]any{"streamId": it.id.String(), "size": a.Size, "checksum": a.SHA256}}
	s.sendFrames(ctx, jsonrpc.Response(m.ID, ownmethods.ReadResult(rq, []any{content})), []item{it})
	return true
}
