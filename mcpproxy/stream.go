package mcpproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"net/http"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact"
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

// resources/stream error codes from the SEP.
const (
	CodeResourceNotFound = -32002
	CodeNotStreamable    = -32003
	CodeTooLarge         = -32004
)

// streamCaps is what one client and its upstream declared about
// resources/stream.
type streamCaps struct {
	client   bool  // the client declared resourceStreaming
	max      int64 // its maxStreamSize; 0 = no limit
	upstream bool  // the upstream declared resources.stream
}

// streamState remembers, per session, what initialize negotiated.
type streamState struct {
	mu sync.Mutex
	by map[string]streamCaps
}

func (s *streamState) get(session string) streamCaps {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[session]
}

func (s *streamState) set(session string, c streamCaps) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]streamCaps{}
	}
	if len(s.by) > 100_000 { // sessions that never said goodbye
		s.by = map[string]streamCaps{}
	}
	s.by[session] = c
}

func (s *streamState) drop(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, session)
}

// clientStreamCaps reads resourceStreaming from client capabilities.
func clientStreamCaps(caps json.RawMessage) (ok bool, max int64) {
	var c struct {
		RS *struct {
			Max int64 `json:"maxStreamSize"`
		} `json:"resourceStreaming"`
	}
	if json.Unmarshal(caps, &c) != nil || c.RS == nil {
		return false, 0
	}
	return true, c.RS.Max
}

// initCaps reads the client's capabilities from an initialize request.
func initCaps(m *jsonrpc.Message) json.RawMessage {
	var p struct {
		Caps json.RawMessage `json:"capabilities"`
	}
	json.Unmarshal(m.Params, &p)
	return p.Caps
}

// upstreamStreams reports whether an initialize result declares
// resources.stream.
func upstreamStreams(result []byte) bool {
	var r struct {
		Caps struct {
			Resources struct {
				Stream bool `json:"stream"`
			} `json:"resources"`
		} `json:"capabilities"`
	}
	json.Unmarshal(result, &r)
	return r.Caps.Resources.Stream
}

// requestStreamCaps is the stateless era's version: the capabilities
// travel in each request's _meta.
func requestStreamCaps(m *jsonrpc.Message) streamCaps {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(m.Params, &p)
	ok, max := clientStreamCaps(p.Meta["io.modelcontextprotocol/clientCapabilities"])
	return streamCaps{client: ok, max: max}
}

// serveStream answers a resources/stream request on the HTTP face. It
// returns false when the request must go to the upstream instead.
func (p *Proxy) serveStream(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message, tenant string, caps streamCaps) bool {
	var params struct {
		URI string `json:"uri"`
	}
	json.Unmarshal(m.Params, &params)
	id, ours := artifact.IDFromURI(params.URI)
	if !ours || p.o.Artifacts == nil {
		if caps.upstream {
			return false // the upstream streams its own resources, bytes unbuffered
		}
		writeJSONError(w, http.StatusOK, m.ID, CodeNotStreamable, "resource is not streamable: "+params.URI)
		return true
	}
	if !caps.client {
		writeJSONError(w, http.StatusOK, m.ID, jsonrpc.CodeInvalidRequest, "resources/stream needs the resourceStreaming client capability")
		return true
	}
	svc := p.o.Artifacts
	a, err := svc.Stat(r.Context(), id)
	if err == nil && a.Tenant != tenant {
		err = artifact.ErrNotFound
	}
	if err == nil && a.Expired(nowFunc()) {
		err = artifact.ErrExpired
	}
	if err != nil {
		e := artifactError(m.ID, id, err)
		w.Header().Set("Content-Type", "application/json")
		w.Write(e.Raw)
		return true
	}
	if caps.max > 0 && a.Size > caps.max {
		writeJSONError(w, http.StatusOK, m.ID, CodeTooLarge,
			fmt.Sprintf("resource is %d bytes, more than the client's maxStreamSize %d", a.Size, caps.max))
		return true
	}
	w.Header().Set("MCP-Resource-Uri", params.URI)
	mode := p.o.StreamMode
	if mode == StreamRedirect {
		if ps, ok := svc.Store.(artifact.Presigner); ok {
			u, err := ps.PresignGet(r.Context(), id, 10*time.Second, a.MimeType, "attachment")
			if err == nil {
				// 302, not 307: the client must GET the storage URL, not
				// post its JSON-RPC request there.
				http.Redirect(w, r, u.String(), http.StatusFound)
				return true
			}
			p.log.Warn("presigning failed; streaming directly", "err", err)
		}
		mode = StreamDirect
	}
	ttl := time.Minute
	if mode == StreamDirect {
		ttl = 10 * time.Second // used at once, below
	}
	l, err := svc.Link(r.Context(), a, artifact.LinkOptions{TTL: ttl, Tenant: tenant, Source: "stream"})
	if err != nil {
		var denied *artifact.DeniedError
		if errors.As(err, &denied) {
			writeJSONError(w, http.StatusOK, m.ID, CodeNotStreamable, "policy denies streaming this resource")
		} else {
			e := artifactError(m.ID, id, err)
			w.Header().Set("Content-Type", "application/json")
			w.Write(e.Raw)
		}
		return true
	}
	if mode == StreamDownload || p.o.Fetch == nil {
		w.Header().Del("MCP-Resource-Uri")
		b, _ := json.Marshal(map[string]any{"uri": params.URI, "mimeType": a.MimeType, "size": a.Size, "downloadUrl": l.URL})
		w.Header().Set("Content-Type", "application/json")
		w.Write(jsonrpc.Response(m.ID, b).Raw)
		return true
	}
	// Direct: the fetch endpoint serves the bytes (Range, ETag, safe
	// headers, the fetch policy) as the POST's response.
	req := r.Clone(r.Context())
	req.Method = http.MethodGet
	req.Body = http.NoBody
	req.ContentLength = 0
	req.Header.Del("Authorization") // the token below is the only credential
	req.Header.Del("Content-Type")
	u, _ := req.URL.Parse(l.URL)
	req.URL.Path, req.URL.RawQuery = u.Path, u.RawQuery
	p.o.Fetch.ServeHTTP(w, req)
	return true
}
