package ownmethods

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// resources/stream (draft SEP-2532): raw bytes of a resource over HTTP,
// no base64, no JSON-RPC envelope, for clients that declared
// resourceStreaming. Spillway serves it for its own artifacts; for an
// upstream resource it passes the request on when the upstream streams
// resources itself, and answers -32003 otherwise.

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

// StreamCaps is what a client and its upstream declared about
// resources/stream.
type StreamCaps struct {
	Client   bool  // the client declared resourceStreaming
	Max      int64 // its maxStreamSize; 0 = no limit
	Upstream bool  // the upstream declared resources.stream
}

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

// Initialized records what a session's initialize request declared; the
// face calls it once the session exists (for an HTTP upstream, when its
// response named the session). Safe for concurrent use.
func (o *Methods) Initialized(session string, initialize *jsonrpc.Message) {
	c := clientCaps(jsonrpc.RawMember(initialize.Params, "capabilities"))
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

// StreamCaps returns what applies to request m: in the stateless era (or
// without a session) the client capabilities in its _meta, else what the
// session's initialize declared; Upstream is what the upstream declared
// last. A face whose upstream cannot stream over HTTP (a stdio child)
// clears Upstream.
func (o *Methods) StreamCaps(rq Request, m *jsonrpc.Message) StreamCaps {
	if rq.Version == "" {
		rq.Version = jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion)
	}
	var c StreamCaps
	if rq.stateless() || rq.Session == "" {
		c = clientCaps(jsonrpc.Meta(m, jsonrpc.MetaClientCapabilities))
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
	ctx := r.Context()
	svc := o.o.Artifacts
	mode := o.o.StreamMode
	if mode == StreamRedirect {
		if ps, ok := svc.Store.(artifact.Presigner); ok {
			a, _, err := o.authorize(ctx, rq, id, artifact.ViaRedirect)
			var denied *artifact.DeniedError
			switch {
			case errors.As(err, &denied):
				// The policy may allow the read but not a storage URL.
			case err != nil:
				writeJSON(w, o.accessError(m.ID, id, err))
				return true
			case o.tooLarge(w, m, a, caps):
				return true
			default:
				u, err := ps.PresignGet(ctx, id, 10*time.Second, a.MimeType, "attachment")
				if err == nil {
					w.Header().Set("MCP-Resource-Uri", uri)
					// 302, not 307: the client must GET the storage URL,
					// not post its JSON-RPC request there.
					http.Redirect(w, r, u.String(), http.StatusFound)
					return true
				}
				o.log.Warn("presigning failed; streaming directly", "err", err)
			}
		}
		mode = StreamDirect
	}
	a, _, err := o.authorize(ctx, rq, id, artifact.ViaStream)
	if err != nil {
		writeJSON(w, o.accessError(m.ID, id, err))
		return true
	}
	if o.tooLarge(w, m, a, caps) {
		return true
	}
	ttl := time.Minute
	if mode == StreamDirect {
		ttl = 10 * time.Second // used at once, below
	}
	l, err := svc.Link(ctx, a, artifact.LinkOptions{TTL: ttl, Tenant: rq.Tenant, Source: "stream"})
	if err != nil {
		writeJSON(w, o.accessError(m.ID, id, err))
		return true
	}
	if mode == StreamDownload || o.o.Fetch == nil {
		writeJSON(w, jsonrpc.Response(m.ID, result(rq, false, map[string]any{
			"uri": uri, "mimeType": a.MimeType, "size": a.Size, "downloadUrl": l.URL,
		})))
		return true
	}
	// Direct: the fetch endpoint serves the bytes (Range, ETag, safe
	// headers, the fetch policy) as the POST's response.
	req := r.Clone(ctx)
	req.Method = http.MethodGet
	req.Body = http.NoBody
	req.ContentLength = 0
	req.Header.Del("Authorization") // the token below is the only credential
	req.Header.Del("Content-Type")
	u, err := req.URL.Parse(l.URL)
	if err != nil {
		writeJSON(w, o.accessError(m.ID, id, err))
		return true
	}
	req.URL.Path, req.URL.RawQuery = u.Path, u.RawQuery
	w.Header().Set("MCP-Resource-Uri", uri)
	o.o.Fetch.ServeHTTP(w, req)
	return true
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
