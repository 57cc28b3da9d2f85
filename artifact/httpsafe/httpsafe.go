// Package httpsafe holds what every Spillway HTTP route does the same way
// to serve safely: the headers that keep a browser from sniffing or running
// what it is sent, error answers that tell a client only a message written
// for it (the cause goes to the log), and writes that a client who stops
// reading cannot hold for ever.
//
// The write-stall rule is this: a response body is written in chunks of at
// most StallChunk bytes, each under a write deadline set afresh just before
// it. A client that stops reading fails the write once the deadline passes,
// while one that reads slowly but steadily is never cut, however long the
// body. A global http.Server.WriteTimeout cannot tell the two apart on a
// long download or a long-lived stream. The fetch endpoint (artifact), the
// proxy's HTTP faces (relay, terminating) and the S3 store's connections
// (s3store, whose peer is the storage service) all follow it.
//
// The package imports only the standard library, so that both the artifact
// packages and mcpproxy can use it.
package httpsafe

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
)

// safetyHeaders are set on every response, errors included. The value
// slices are shared by all responses: the server only reads them, and a
// later Set or Add replaces a slice (of capacity 1) rather than writing
// into it.
var safetyHeaders = []struct {
	name  string // canonical
	value []string
}{
	{"X-Content-Type-Options", []string{"nosniff"}},
	{"Content-Security-Policy", []string{"sandbox; default-src 'none'"}},
	{"Referrer-Policy", []string{"no-referrer"}},
	{"Cache-Control", []string{"private, no-store"}},
	{"Cross-Origin-Resource-Policy", []string{"same-origin"}},
}

// SetSafetyHeaders sets the headers every response of the artifact service
// carries, errors included: nosniff, a CSP sandbox, no referrer, no
// caching, and same-origin resources. It allocates nothing: the values are
// shared, read-only slices.
func SetSafetyHeaders(h http.Header) {
	for _, sh := range safetyHeaders {
		h[sh.name] = sh.value[:1:1]
	}
}

// Error is an HTTP answer whose code and message are safe for any client
// to read. A handler returns one (or an error wrapping one) in place of the
// cause, which it logs. Values are read-only once made, so one may be
// shared (a package-level variable) by concurrent requests.
type Error struct {
	// Status is the HTTP status, e.g. http.StatusNotFound.
	Status int
	// Code is a short stable word a program can test, e.g. "not_found".
	Code string
	// Message is one sentence for a person, e.g. "no such artifact".
	Message string
}

// NewError returns an Error with status, code and message.
func NewError(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// WriteError answers with e: its status and a small JSON body
// {"code","message"}, and returns the status. It sets the safety headers
// and removes the headers a handler may have set for the content it meant
// to send (Content-Disposition, Etag, Accept-Ranges, Expires, and
// Content-Range unless the status is 416). A 503 carries Retry-After: 5.
func WriteError(w http.ResponseWriter, e *Error) int {
	h := w.Header()
	SetSafetyHeaders(h)
	for _, k := range []string{"Content-Disposition", "Etag", "Accept-Ranges", "Expires"} {
		h.Del(k)
	}
	if e.Status != http.StatusRequestedRangeNotSatisfiable {
		h.Del("Content-Range")
	}
	if e.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "5")
	}
	h.Set("Content-Type", "application/json")
	body, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{e.Code, e.Message})
	body = append(body, '\n')
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	w.Write(body)
	return e.Status
}

// StallChunk is the most one write deadline covers (64 KiB): at a stall
// timeout of 30 s, a client reading slower than about 2 KiB/s is cut.
const StallChunk = 64 << 10

// WriteWithin writes p to w by the write-stall rule: in chunks of at most
// StallChunk bytes, calling setDeadline with now+timeout before each. So a
// peer that stops reading fails the write after timeout, while a slow one
// that keeps reading never does. It returns the bytes written and the
// first error of setDeadline or w. setDeadline is typically a
// connection's or an http.ResponseController's SetWriteDeadline.
func WriteWithin(w io.Writer, p []byte, timeout time.Duration, setDeadline func(time.Time) error) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := setDeadline(time.Now().Add(timeout)); err != nil {
			return n, err
		}
		m, err := w.Write(p[:min(len(p), StallChunk)])
		n += m
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}
