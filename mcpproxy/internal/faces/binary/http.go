package binary

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/artifact/httpsafe"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/binframe"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// Inner serves one authenticated /mcp request: a face, or an extension in
// front of one.
type Inner interface {
	ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request)
}

// Methods is what the extension asks of the proxy's own methods
// (*ownmethods.Methods is one): the capabilities a request's client
// declared, and the proxy's artifacts.
type Methods interface {
	Artifacts
	StreamCaps(rq ownmethods.Request, m *jsonrpc.Message) ownmethods.StreamCaps
}

var _ Methods = (*ownmethods.Methods)(nil)

// Options configure the extension. Methods and Spool are required.
type Options struct {
	Methods Methods
	// Spool reads what the inner face answers a binary client, so that a
	// long base64 string waits on disk, never in memory.
	Spool *spill.Spooler
	// MaxBody caps the client's POST body the extension reads to learn
	// its request (default 4 MiB); a larger one passes on untouched.
	MaxBody int64
	// MaxMessage caps what stays in memory of one message the inner face
	// answers (its long strings on disk); default 1 GiB.
	MaxMessage int64
	// MaxSize is the largest item sent as binary (DefaultMaxSize when ≤ 0):
	// the maxBinarySize Spillway declares.
	MaxSize int64
	// WriteStall cuts a multipart response whose client reads nothing for
	// this long; default 30 s, negative: never.
	WriteStall time.Duration
	Logger     *slog.Logger
}

// Extension is the binary transfer extension: an HTTP wrapper of the face
// (Wrap) and of a stdio client (Client), sharing the stream ids that
// resources/stream resolves. Safe for concurrent use.
type Extension struct {
	o    Options
	refs *refs
	log  *slog.Logger
}

// New returns the extension.
func New(o Options) *Extension {
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 20
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = 1 << 30
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	if o.WriteStall == 0 {
		o.WriteStall = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Extension{o: o, refs: newRefs(), log: o.Logger}
}

// Declare is the capability the extension declares to a client that
// declared client (ownmethods.Options.Declare's shape).
func (e *Extension) Declare(client []byte) (string, []byte) { return Declare(client, e.o.MaxSize) }

// Wrap returns next behind the extension: a binary client's POST that
// accepts multipart/mixed is answered multipart; every other request
// reaches next as it came.
func (e *Extension) Wrap(next Inner) Inner { return &handler{e: e, next: next} }

type handler struct {
	e    *Extension
	next Inner
}

// ServeHTTP serves one request (see Wrap). A binary client that prefers
// stream mode (stdio's), or whose Accept does not allow multipart/mixed,
// gets base64 as any client: binary transfer on HTTP is multipart alone.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request) {
	if r.Method != http.MethodPost || !acceptsMultipart(r.Header) {
		h.next.ServeHTTP(w, r, rq)
		return
	}
	m, ok := h.peek(r)
	if !ok || !m.IsRequest() {
		h.next.ServeHTTP(w, r, rq)
		return
	}
	crq := rq
	crq.Session = r.Header.Get("Mcp-Session-Id")
	caps, ok := ParseClient(h.e.o.Methods.StreamCaps(crq, m).Raw)
	if !ok || (caps.Mode != "" && caps.Mode != ModeMultipart) {
		h.next.ServeHTTP(w, r, rq)
		return
	}
	crq.Version = requestVersion(r, m)
	c := &converter{rq: crq, arts: h.e.o.Methods, max: caps.limit(h.e.o.MaxSize), refs: h.e.refs}
	switch m.Method {
	case "resources/stream":
		if h.streamByID(w, r, rq, m) {
			return
		}
	case "resources/read":
		if jsonrpc.StringMember(m.Params, "transferMode") == "binary" && h.readArtifact(w, r, c, m) {
			return
		}
	}
	h.capture(w, r, rq, c)
}

// peek reads the POST's body (up to MaxBody) and puts it back for the
// next handler; the message is nil when the body is larger, not one
// message, or unreadable.
func (h *handler) peek(r *http.Request) (*jsonrpc.Message, bool) {
	body, err := httpx.PeekBody(r, h.e.o.MaxBody)
	if err != nil {
		return nil, false
	}
	m, err := jsonrpc.DecodeMessage(body)
	return m, err == nil
}

// acceptsMultipart reports whether an Accept header allows
// multipart/mixed (or multipart/*), explicitly: */* does not count, so a
// client that sends that alone keeps today's answers.
func acceptsMultipart(h http.Header) bool {
	for _, v := range h.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && (mt == binframe.MediaType || mt == "multipart/*") && params["q"] != "0" {
				return true
			}
		}
	}
	return false
}

// requestVersion is the revision a request speaks: its _meta's, else the
// header's.
func requestVersion(r *http.Request, m *jsonrpc.Message) string {
	if v := jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion); v != "" {
		return v
	}
	return r.Header.Get("Mcp-Protocol-Version")
}

// streamByID serves resources/stream {streamId}: the stream id of a
// binary item read from the store names its artifact, for the caller's
// tenant alone, and the request goes on to the face as a resources/stream
// of the artifact's URI (the access rule, the client's resourceStreaming,
// the stream mode: as for the URI). An unknown id, or another tenant's,
// is resource not found. false: no streamId, the request goes on as it
// came.
func (h *handler) streamByID(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, m *jsonrpc.Message) bool {
	sid := jsonrpc.StringMember(m.Params, "streamId")
	if sid == "" || jsonrpc.RawMember(m.Params, "uri") != nil {
		return false
	}
	id, ok := binframe.ParseStreamID(sid)
	uri, known := h.e.refs.lookup(rq.Tenant, id)
	if !ok || !known {
		httpx.WriteReply(w, requestVersion(r, m), jsonrpc.ErrorResponse(m.ID, ownmethods.CodeResourceNotFound, "resource not found: no binary stream "+sid))
		return true
	}
	params, ok := jsonrpc.SetPath(m.Params, mustJSON(uri), "uri")
	if !ok {
		return false
	}
	body := m.WithParams(params).Raw
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	h.next.ServeHTTP(w, r, rq)
	return true
}

// readArtifact answers resources/read with transferMode "binary" of one
// of the proxy's artifacts: contents holds one item with a binaryRef, and
// the artifact's bytes follow from the store as a part. false: not one of
// the proxy's artifacts, the request goes on.
func (h *handler) readArtifact(w http.ResponseWriter, r *http.Request, c *converter, m *jsonrpc.Message) bool {
	uri := jsonrpc.StringMember(m.Params, "uri")
	a, rc, fail, ours := c.arts.OpenArtifact(r.Context(), c.rq, m.ID, uri)
	if !ours {
		return false
	}
	if fail != nil {
		httpx.WriteReply(w, c.rq.Version, fail)
		return true
	}
	defer rc.Close()
	if a.Size > c.max {
		httpx.WriteReply(w, c.rq.Version, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams,
			"the artifact is larger than the binary transfer limit; use resources/stream or its httpUrl"))
		return true
	}
	it := item{id: binframe.NewStreamID(), mime: a.MimeType, size: a.Size, open: func() io.Reader { return rc }}
	h.e.refs.add(c.rq.Tenant, it.id, uri, a.Expires)
	content := map[string]any{"uri": uri, "mimeType": a.MimeType, "transferMode": "binary",
		"binaryRef": map[string]any{"streamId": it.id.String(), "size": a.Size, "checksum": a.SHA256}}
	resp := jsonrpc.Response(m.ID, ownmethods.ReadResult(c.rq, []any{content}))
	out := h.e.newOut(w)
	defer out.end()
	if out.emit(resp, "", []item{it}) == nil {
		out.close()
	}
	return true
}

// out is one multipart response under way.
type out struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	mp *binframe.Multipart
	// stall applies the write-stall rule to every write to the client.
	stall time.Duration
}

// newOut starts a multipart response on w.
func (e *Extension) newOut(w http.ResponseWriter) *out {
	o := &out{w: w, rc: http.NewResponseController(w), stall: e.o.WriteStall}
	o.mp = binframe.NewMultipart(o)
	w.Header().Set("Content-Type", o.mp.ContentType())
	w.Header().Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	return o
}

// Write writes to the client under the write-stall rule.
func (o *out) Write(p []byte) (int, error) {
	if o.stall < 0 {
		return o.w.Write(p)
	}
	return httpsafe.WriteWithin(o.w, p, o.stall, func(t time.Time) error {
		if err := o.rc.SetWriteDeadline(t); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	})
}

// emit writes m as a part, then its items' bytes, and flushes; it
// releases m's spilled strings and the items whatever happens.
func (o *out) emit(m *jsonrpc.Message, eventID string, items []item) error {
	defer release(items)
	err := o.mp.Message(m.Raw, eventID)
	spill.Release(m.Raw)
	for _, it := range items {
		if err != nil {
			break
		}
		err = o.mp.Binary(it.id, it.mime, it.size, it.open())
	}
	if err == nil {
		if ferr := o.rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
			err = ferr
		}
	}
	return err
}

// close ends the body with the closing boundary.
func (o *out) close() error { return o.mp.Close() }

// end clears the write deadline the stall rule left.
func (o *out) end() { o.rc.SetWriteDeadline(time.Time{}) }

// capture runs the face with a ResponseWriter of the extension's, reads
// what it answers (a JSON body or an event stream, through the Spooler),
// and writes the client each message as a part followed by its items'
// bytes. What is neither a 200 JSON body nor an event stream (a 202, an
// error status) reaches the client as the face wrote it.
func (h *handler) capture(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, c *converter) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	cw := httpx.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cw.Close()
		h.next.ServeHTTP(cw, r.WithContext(ctx), rq)
	}()
	defer func() { cancel(); cw.Stop(errClientGone); <-done }()
	<-cw.Started()
	ct := cw.MediaType()
	copyHeader(w.Header(), cw.Sent())
	if cw.Status() != http.StatusOK || (ct != "application/json" && ct != "text/event-stream") {
		w.WriteHeader(cw.Status())
		io.Copy(w, cw.Body())
		return
	}
	w.Header().Del("Content-Type")
	o := h.e.newOut(w)
	defer o.end()
	var err error
	if ct == "application/json" {
		err = h.relayJSON(ctx, o, cw.Body(), c, rq.Tenant)
	} else {
		err = h.relaySSE(ctx, o, cw.Body(), c, rq.Tenant)
	}
	if err == nil {
		o.close()
	} else if !errors.Is(err, errClientGone) {
		h.e.log.Warn("binary transfer: a multipart response ended early", "err", err)
	}
}

// errClientGone ends the face's writes once the client's response ended.
var errClientGone = errors.New("binary: the client's response ended")

// relayJSON relays a JSON body: one message, or a batch's.
func (h *handler) relayJSON(ctx context.Context, o *out, body io.Reader, c *converter, tenant string) error {
	raw, err := httpx.ReadMessage(body, -1, h.e.o.MaxMessage, h.e.o.Spool.For(tenant))
	if err != nil {
		return err
	}
	msgs, _, err := jsonrpc.Decode(raw)
	if err != nil {
		spill.Release(raw)
		return err
	}
	for _, m := range msgs {
		nm, items := c.message(ctx, m)
		if err := o.emit(nm, "", items); err != nil {
			return err
		}
	}
	return nil
}

// relaySSE relays an event stream, event by event: each message a part
// carrying the event's id. Comments (keep-alives) and retry hints have no
// place in a multipart body and are left out.
func (h *handler) relaySSE(ctx context.Context, o *out, body io.Reader, c *converter, tenant string) error {
	rd := sse.NewReader(body, h.e.o.MaxMessage)
	rd.Spool(h.e.o.Spool.For(tenant))
	defer rd.Release()
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(ev.Data) == 0 {
			continue
		}
		m, derr := jsonrpc.DecodeMessage(ev.Data)
		if derr != nil {
			m = &jsonrpc.Message{Raw: ev.Data}
		}
		nm, items := c.message(ctx, m)
		if err := o.emit(nm, ev.ID, items); err != nil {
			return err
		}
	}
}

// copyHeader copies src's headers to dst, but a body's length.
func copyHeader(dst, src http.Header) {
	for k, v := range src {
		if k != "Content-Length" {
			dst[k] = v
		}
	}
}
