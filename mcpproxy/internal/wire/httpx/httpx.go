// Package httpx holds what both HTTP faces of the proxy (the relay and the
// terminating face) do the same way: reading and decoding a client's POST
// under the size cap, the protocol revision a request speaks, and the one
// mapping of JSON-RPC errors to HTTP statuses; and, for the side that
// faces the upstream, the one HTTP client policy (UpstreamClient) and the
// redaction of upstream URLs in logs and errors (RedactURL, RedactError);
// and the Recorder the opt-in extensions run a face into to read its
// answer back.
// Everything here is safe for concurrent use.
package httpx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// Protocol revisions the proxy knows by name.
const (
	Version20250326 = "2025-03-26"
	Version20250618 = "2025-06-18"
	Version20251125 = "2025-11-25"
)

// RequestVersion is the revision a POST speaks: the header, else the _meta
// of its first request that has one.
func RequestVersion(r *http.Request, msgs []*jsonrpc.Message) string {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v
	}
	for _, m := range msgs {
		if v := jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion); v != "" {
			return v
		}
	}
	return ""
}

// ReadBody reads a POST body under max; on failure it has answered (413
// over the cap, 400 otherwise) and ok is false.
func ReadBody(w http.ResponseWriter, r *http.Request, max int64) (body []byte, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "reading the request body failed", http.StatusBadRequest)
		}
		return nil, false
	}
	return body, true
}

// DecodePOST decodes a client's POST body. What may not pass on is
// answered with HTTP 400 and a JSON-RPC error with id null, and ok is
// false: a body that is not JSON gets -32700 (parse error); one that is
// JSON but not messages (an id that is an object, an array or a boolean),
// a request whose id is null (MCP: an id must be a string or a number),
// and a batch in a revision that has none (2025-06-18 and later) get
// -32600 (invalid request). Nothing of such a body reaches an upstream.
// A notification or a response (the client answering a server request)
// passes. negotiated is the revision the POST's session negotiated (""
// without one, or before its initialize was answered): what a batch
// without the version header is judged by.
func DecodePOST(w http.ResponseWriter, r *http.Request, body []byte, negotiated string) (msgs []*jsonrpc.Message, batch, ok bool) {
	msgs, batch, err := jsonrpc.Decode(body)
	if err != nil {
		code, text := jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error()
		if errors.Is(err, jsonrpc.ErrMalformed) {
			code, text = jsonrpc.CodeParseError, "Parse error: the body is not JSON"
		}
		WriteError(w, http.StatusBadRequest, nil, code, text)
		return nil, false, false
	}
	for _, m := range msgs {
		if m.IsRequest() && string(m.ID) == "null" {
			WriteError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, jsonrpc.NullIDText)
			return nil, false, false
		}
	}
	if v := batchVersion(r, msgs, negotiated); batch && v >= Version20250618 {
		WriteError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest,
			"Invalid Request: JSON-RPC batches are not part of protocol revision "+v+"; send one message per POST")
		return nil, false, false
	}
	if spill.HasMarkers(body) {
		// Whatever the proxy echoes of a request (its id) is expanded on
		// the way back: a client must not name a spilled string.
		WriteError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, ErrReserved.Error())
		return nil, false, false
	}
	return msgs, batch, true
}

// batchVersion is the revision that decides whether a POST may be a
// batch: the one the request speaks (RequestVersion: its header, else a
// stateless request's _meta), else the one its session negotiated, else
// the one an initialize in it asks for (the revision being negotiated).
// "" when none says: the spec has a server assume 2025-03-26 then, which
// has batches.
func batchVersion(r *http.Request, msgs []*jsonrpc.Message, negotiated string) string {
	if v := RequestVersion(r, msgs); v != "" {
		return v
	}
	if negotiated != "" {
		return negotiated
	}
	for _, m := range msgs {
		if m.Method == "initialize" {
			if v := jsonrpc.StringMember(m.Params, "protocolVersion"); v != "" {
				return v
			}
		}
	}
	return ""
}

// Negotiated is the revision an initialize's response settles (its
// result's protocolVersion), "" when m is an error or names none.
func Negotiated(m *jsonrpc.Message) string {
	return jsonrpc.StringMember(m.Result, "protocolVersion")
}

// ErrReserved refuses a client message that holds a string spelt as a
// spill marker (see package spill).
var ErrReserved = errors.New("the message holds a string reserved by Spillway")

// WriteError answers with one JSON-RPC error.
func WriteError(w http.ResponseWriter, status int, id []byte, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(jsonrpc.ErrorResponse(id, code, msg).Raw)
}

// WriteReply answers a request with m as JSON, its spill markers expanded
// and then released; in the stateless era an error carries its HTTP
// status.
func WriteReply(w http.ResponseWriter, version string, m *jsonrpc.Message) {
	status := http.StatusOK
	if mcpheader.Stateless(version) {
		status = ErrorStatus(m)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	spill.Expand(w, m.Raw)
	spill.Release(m.Raw) // a JSON reply is never replayed
}

// ErrorStatus is the HTTP status of a stateless-era response (SEP-2575):
// method not found is 404, bad params and header mismatches 400, else 200.
func ErrorStatus(m *jsonrpc.Message) int {
	switch m.ErrorCode() {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcpheader.CodeHeaderMismatch, -32021, -32022:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// WriteMessages writes raw messages as one JSON value, an array when
// batch, their spill markers expanded and then released.
func WriteMessages(w io.Writer, out [][]byte, batch bool) {
	if !batch && len(out) == 1 {
		spill.Expand(w, out[0])
		spill.Release(out[0]) // a JSON reply is never replayed
		return
	}
	all := append(append([]byte("["), bytes.Join(out, []byte(","))...), ']')
	spill.Expand(w, all)
	spill.Release(all)
}

// UpstreamDown answers every request of a POST that could not be forwarded
// with a JSON-RPC error (502), so no client waits for an answer that will
// not come.
func UpstreamDown(w http.ResponseWriter, body []byte) {
	UpstreamError(w, body, "upstream MCP server unreachable")
}

// UpstreamError answers every request of a POST with a JSON-RPC error
// (CodeUpstream) saying msg, with status 502; a body without requests
// gets msg as text.
func UpstreamError(w http.ResponseWriter, body []byte, msg string) {
	msgs, batch, _ := jsonrpc.Decode(body)
	var out [][]byte
	for _, m := range msgs {
		if m.IsRequest() {
			out = append(out, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, msg).Raw)
		}
	}
	if len(out) == 0 {
		http.Error(w, msg, http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	WriteMessages(w, out, batch)
}

// ErrTooLarge is wrapped by ReadAllSized's error for a message over its
// limit.
var ErrTooLarge = errors.New("httpx: message over the limit")

// ReadAllSized reads r whole, at most limit bytes, allocating once when the
// size is known.
func ReadAllSized(r io.Reader, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("message of %d bytes exceeds the %d byte limit: %w", size, limit, ErrTooLarge)
	}
	size = max(size, 0)
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if n > limit {
		return nil, fmt.Errorf("message exceeds the %d byte limit: %w", limit, ErrTooLarge)
	}
	return buf.Bytes(), err
}

// ReadMessage reads an upstream's JSON body of size bytes (-1: unknown).
// With spool, a body that may pass sse.SpillAfter streams through it (its
// long strings go to disk) and limit bounds what stays in memory;
// without, the body is read whole up to limit (ReadAllSized).
func ReadMessage(r io.Reader, size, limit int64, spool sse.Spooler) ([]byte, error) {
	if spool == nil || (size >= 0 && size <= sse.SpillAfter) {
		return ReadAllSized(r, size, limit)
	}
	return spool.Read(r, limit)
}
