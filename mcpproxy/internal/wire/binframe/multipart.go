package binframe

import (
	"bufio"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"strconv"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Part headers of a multipart/mixed response.
const (
	// HeaderEventID carries, on a JSON part, the SSE event id the message
	// had on the event stream it replaces, so that a client resuming
	// (Last-Event-ID) knows where it stands.
	HeaderEventID = "Mcp-Event-Id"
	// HeaderContentID names a binary part by its stream id: "<uuid>".
	HeaderContentID = "Content-Id"
)

// MediaType is the media type of a multipart response.
const MediaType = "multipart/mixed"

// Multipart writes a multipart/mixed body: JSON-RPC messages and the
// binary parts that follow them, each part streamed as it is written. It
// is not safe for concurrent use.
type Multipart struct {
	bw *bufio.Writer
	mw *multipart.Writer
}

// NewMultipart returns a Multipart writing to w under a random boundary.
func NewMultipart(w io.Writer) *Multipart {
	bw := bufio.NewWriterSize(w, 32<<10)
	return &Multipart{bw: bw, mw: multipart.NewWriter(bw)}
}

// ContentType is the Content-Type of the body: multipart/mixed with its
// boundary.
func (m *Multipart) ContentType() string {
	return mime.FormatMediaType(MediaType, map[string]string{"boundary": m.mw.Boundary()})
}

// Message writes one JSON-RPC message as a part (Content-Type
// application/json), its spill markers expanded (spill.Expand: a marker
// that does not resolve fails with spill.ErrGone), with eventID as the
// part's Mcp-Event-Id when it is not "" (an id a header cannot carry is
// left out). The part is flushed to the underlying writer.
func (m *Multipart) Message(raw []byte, eventID string) error {
	h := textproto.MIMEHeader{"Content-Type": {"application/json"}}
	if eventID != "" && headerSafe(eventID) {
		h.Set(HeaderEventID, eventID)
	}
	p, err := m.mw.CreatePart(h)
	if err != nil {
		return err
	}
	if err := spill.Expand(p, raw); err != nil {
		return err
	}
	return m.bw.Flush()
}

// Binary writes one binary part: Content-ID <id>, Content-Type
// mimeType (application/octet-stream when it is not a valid media type),
// Content-Length size, then exactly size bytes of r, streamed (fewer
// fail with ErrShort: the body is then cut, and the caller must end the
// response).
func (m *Multipart) Binary(id StreamID, mimeType string, size int64, r io.Reader) error {
	h := textproto.MIMEHeader{
		"Content-Type":   {safeMediaType(mimeType)},
		HeaderContentID:  {"<" + id.String() + ">"},
		"Content-Length": {strconv.FormatInt(size, 10)},
	}
	p, err := m.mw.CreatePart(h)
	if err != nil {
		return err
	}
	if err := copyExactly(p, r, size); err != nil {
		return err
	}
	return m.bw.Flush()
}

// Close writes the closing boundary and flushes.
func (m *Multipart) Close() error {
	if err := m.mw.Close(); err != nil {
		return err
	}
	return m.bw.Flush()
}

// safeMediaType is t formatted again when it parses as a media type, so
// that no byte of an upstream's mimeType reaches a header unchecked.
func safeMediaType(t string) string {
	mt, params, err := mime.ParseMediaType(t)
	if err != nil {
		return "application/octet-stream"
	}
	if s := mime.FormatMediaType(mt, params); s != "" {
		return s
	}
	return "application/octet-stream"
}

// headerSafe reports whether s may be a header value as it is: visible
// ASCII without spaces, at most 256 bytes (SSE ids are short numbers).
func headerSafe(s string) bool {
	if len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// NewReader returns a reader of the parts of a multipart/mixed body with
// the given Content-Type; an error when it is another type or names no
// boundary. Each part's Content-Id, trimmed of its angle brackets, is a
// binary part's stream id (ContentID).
func NewReader(body io.Reader, contentType string) (*multipart.Reader, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("binframe: Content-Type %q: %w", contentType, err)
	}
	if mt != MediaType || params["boundary"] == "" {
		return nil, fmt.Errorf("binframe: Content-Type %q is not multipart/mixed with a boundary", contentType)
	}
	return multipart.NewReader(body, params["boundary"]), nil
}

// ContentID is the stream id a part's Content-ID names; ok is false when
// it names none.
func ContentID(h textproto.MIMEHeader) (StreamID, bool) {
	v := h.Get(HeaderContentID)
	if len(v) < 2 || v[0] != '<' || v[len(v)-1] != '>' {
		return StreamID{}, false
	}
	return ParseStreamID(v[1 : len(v)-1])
}
