package ownmethods

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// resources/stream (draft SEP-2532) sends the raw bytes of a resource
// over HTTP, without base64 or a JSON-RPC envelope, to clients that
// declared resourceStreaming. Spillway serves it for its own artifacts.
// For an upstream resource it passes the request on when the upstream
// streams resources itself, and answers -32003 otherwise.

// Stream modes.
const (
	StreamDirect   = "direct"   // the POST's response is the bytes
	StreamRedirect = "redirect" // 302 to a storage URL presigned for seconds (S3 stores)
	StreamDownload = "download" // a JSON result with a short-lived downloadUrl
)

// resources/stream error codes from the SEP (not found is
// CodeResourceNotFound).
const (
	CodeNotStreamable = -32003
	CodeTooLarge      = -32004
)

// StreamCaps holds what a client and its upstream declared about
// resources/stream.
type StreamCaps struct {
	Client   bool  // the client declared resourceStreaming
	Max      int64 // its maxStreamSize; 0 = no limit
	Upstream bool  // the upstream declared resources.stream
	// Raw is the client's capabilities object as it declared it (nil:
	// none, or one over maxRawCaps bytes), for the opt-in extensions
	// (resumable streams, binary transfer) that read their own member.
	Raw []byte
}

// maxRawCaps bounds the capabilities a session keeps whole: a client's
// capabilities are a few hundred bytes; more is not kept.
const maxRawCaps = 16 << 10

// maxSessions bounds the sessions whose capabilities are remembered; past
// it an arbitrary one is forgotten (its client is then treated as not
// streaming until it initializes again).
const maxSessions = 100_000

// streamCaps remembers, per session, what initialize declared.
type streamCaps struct {
	mu sync.Mutex
	by map[string]StreamCaps
}

func newStreamCaps() streamCaps { return streamCaps{by: map[string]StreamCaps{}} }

// clientCaps reads resourceStreaming from client capabilities.
func clientCaps(caps []byte) StreamCaps {
	rs := jsonrpc.RawMember(caps, "resourceStreaming")
	if !isObject(rs) {
		return StreamCaps{}
	}
	var c struct {
		Max int64 `json:"maxStreamSize"`
	}
	json.Unmarshal(rs, &c)
	return StreamCaps{Client: true, Max: max(c.Max, 0)}
}

// withRaw is clientCaps with Raw set (a copy: the message's bytes are
// not kept alive by a session).
func withRaw(caps []byte) StreamCaps {
	c := clientCaps(caps)
	if isObject(caps) && len(caps) <= maxRawCaps {
		c.Raw = bytes.Clone(caps)
	}
	return c
}

// Initialized records what a session's initialize request declared; the
// face calls it once the session exists (for an HTTP upstream, when its
// response named the session). Safe for concurrent use.
func (o *Methods) Initialized(session string, initialize *jsonrpc.Message) {
	c := withRaw(jsonrpc.RawMember(initialize.Params, "capabilities"))
	s := &o.caps
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.by[session]; !known && len(s.by) >= maxSessions {
		for k := range s.by {
			delete(s.by, k)
			break
		}
	}
	s.by[session] = c
}

// Ended forgets a session. Safe for concurrent use.
func (o *Methods) Ended(session string) {
	o.caps.mu.Lock()
	defer o.caps.mu.Unlock()
	delete(o.caps.by, session)
}

// StreamCaps returns the stream capabilities that apply to request m:
// in the stateless era (or without a session) the client capabilities in
// its _meta, else what the session's initialize declared. Upstream is
// what the upstream declared last. A face whose upstream cannot stream over HTTP (a stdio child)
// clears Upstream.
func (o *Methods) StreamCaps(rq Request, m *jsonrpc.Message) StreamCaps {
	if rq.Version == "" {
		rq.Version = jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion)
	}
	var c StreamCaps
	if rq.stateless() || rq.Session == "" {
		c = withRaw(jsonrpc.Meta(m, jsonrpc.MetaClientCapabilities))
	} else {
		o.caps.mu.Lock()
		c = o.caps.by[rq.Session]
		o.caps.mu.Unlock()
	}
	c.Upstream = o.upstreamStream.Load()
	return c
}

// ServeStream answers a resources/stream request m on an HTTP face, with
// the bytes, a redirect or a JSON-RPC message. It returns false, having
// written nothing, when the request must go to the upstream instead (an
// upstream resource, and an upstream that streams).
//
// Every mode asks the access rule before anything leaves: redirect mode
// presigns only after a decision that allows redirect (and streams
// directly when the policy allows the read but not the redirect).
func (o *Methods) ServeStream(w http.ResponseWriter, r *http.Request, rq Request, m *jsonrpc.Message, caps StreamCaps) (handled bool) {
	defer func() {
		if p := recover(); p != nil {
			o.log.Error("resources/stream panicked", "panic", p)
			writeJSON(w, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInternalError, "internal error"))
			handled = true
		}
	}()
	if rq.Version == "" {
		rq.Version = jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion)
	}
	uri := jsonrpc.StringMember(m.Params, "uri")
	id, ours := o.ours(uri)
	if !ours {
		if caps.Upstream {
			return false // the upstream streams its own resources, bytes unbuffered
		}
		writeJSON(w, jsonrpc.ErrorResponse(m.ID, CodeNotStreamable, "resource is not streamable: "+uri))
		return true
	}
	if !caps.Client {
		writeJSON(w, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest, "resources/stream needs the resourceStreaming client capability"))
		return true
	}
	s := &streamCall{w: w, r: r, rq: rq, m: m, caps: caps, uri: uri, id: id}
	mode := o.o.StreamMode
	if mode == StreamRedirect {
		if o.redirect(s) {
			return true
		}
		mode = StreamDirect
	}
	o.stream(s, mode)
	return true
}

// streamCall is one resources/stream request for an artifact of the
// proxy's, and where its answer goes.
type streamCall struct {
	w    http.ResponseWriter
	r    *http.Request
	rq   Request
	m    *jsonrpc.Message
	caps StreamCaps
	uri  string
	id   string // the artifact's
}

// answer writes the JSON-RPC message m as the POST's response.
func (s *streamCall) answer(m *jsonrpc.Message) { writeJSON(s.w, m) }

// redirect answers s with a 302 to a storage URL presigned for seconds,
// when the store presigns and the access rule allows a redirect. It
// returns false, having written nothing, when the artifact is to be
// streamed directly instead: the store does not presign, the policy
// allows the read but not a storage URL, or presigning failed.
func (o *Methods) redirect(s *streamCall) (answered bool) {
	ps, ok := o.o.Artifacts.Store.(artifact.Presigner)
	if !ok {
		return false
	}
	ctx := s.r.Context()
	// A denial is not audited here: the read itself may still be
	// allowed, streamed directly (and audited) instead.
	actx, rec := o.recording(ctx)
	a, _, err := o.authorize(actx, s.rq, s.id, artifact.ViaRedirect)
	var denied *artifact.DeniedError
	switch {
	case errors.As(err, &denied):
		return false
	case err != nil:
		s.answer(o.accessError(s.m.ID, s.id, err))
		return true
	case o.tooLarge(s.w, s.m, a, s.caps):
		return true
	}
	u, err := ps.PresignGet(ctx, s.id, 10*time.Second, a.MimeType, "attachment")
	if err != nil {
		o.log.Warn("presigning failed; streaming directly", "err", err)
		return false
	}
	o.auditRedirect(ctx, s, a, rec)
	s.w.Header().Set("MCP-Resource-Uri", s.uri)
	// 302, not 307: the client must GET the storage URL, not post its
	// JSON-RPC request there.
	http.Redirect(s.w, s.r, u.String(), http.StatusFound)
	return true
}

// stream answers s, once the access rule allows the stream, with the
// artifact's bytes (direct mode, through the fetch endpoint) or a JSON
// result with a short-lived downloadUrl (download mode, or no fetch
// endpoint).
func (o *Methods) stream(s *streamCall, mode string) {
	ctx := s.r.Context()
	a, _, ra, err := o.authorizeRead(ctx, s.rq, s.id, artifact.ViaStream)
	if err != nil {
		s.answer(o.accessError(s.m.ID, s.id, err))
		return
	}
	if o.tooLarge(s.w, s.m, a, s.caps) {
		return
	}
	ttl := time.Minute
	if mode == StreamDirect {
		ttl = 10 * time.Second // used at once, by serveDirect
	}
	l, err := o.o.Artifacts.Link(ctx, a, artifact.LinkOptions{TTL: ttl, Tenant: s.rq.Tenant, Source: "stream"})
	if err != nil {
		ra.done(0, "", err)
		s.answer(o.accessError(s.m.ID, s.id, err))
		return
	}
	if mode == StreamDownload || o.o.Fetch == nil {
		// The bytes leave when the client fetches downloadUrl: that fetch
		// has its own line, joined to this one by the token's id.
		ra.done(0, l.TokenID, nil)
		s.answer(jsonrpc.Response(s.m.ID, result(s.rq, false, map[string]any{
			"uri": s.uri, "mimeType": a.MimeType, "size": a.Size, "downloadUrl": l.URL,
		})))
		return
	}
	o.serveDirect(s, l.URL)
}

// serveDirect has the fetch endpoint serve the artifact at link as the
// POST's response, so that a stream gets what a fetch gets: Range, ETag,
// the safe headers and the fetch policy. The request it passes on is a
// GET whose only credential is the link's token.
func (o *Methods) serveDirect(s *streamCall, link string) {
	// The fetch endpoint writes the read's audit line, naming it a stream.
	req := s.r.Clone(artifact.AuditAs(s.r.Context(), artifact.ViaStream))
	req.Method = http.MethodGet
	req.Body = http.NoBody
	req.ContentLength = 0
	req.Header.Del("Authorization")
	req.Header.Del("Content-Type")
	u, err := req.URL.Parse(link)
	if err != nil {
		s.answer(o.accessError(s.m.ID, s.id, err))
		return
	}
	req.URL.Path, req.URL.RawQuery = u.Path, u.RawQuery
	s.w.Header().Set("MCP-Resource-Uri", s.uri)
	o.o.Fetch.ServeHTTP(s.w, req)
}

// tooLarge answers -32004, before any byte, when a is over the client's
// maxStreamSize.
func (o *Methods) tooLarge(w http.ResponseWriter, m *jsonrpc.Message, a artifact.Artifact, caps StreamCaps) bool {
	if caps.Max <= 0 || a.Size <= caps.Max {
		return false
	}
	writeJSON(w, jsonrpc.ErrorResponse(m.ID, CodeTooLarge,
		fmt.Sprintf("resource is %d bytes, more than the client's maxStreamSize %d", a.Size, caps.Max)))
	return true
}

// writeJSON writes m as the POST's JSON response.
func writeJSON(w http.ResponseWriter, m *jsonrpc.Message) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(m.Raw)
}
