package httpx

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// PeekBody reads r's body, up to max bytes, and puts it back: whoever
// reads r.Body next gets it whole, from its first byte. An extension
// uses it to look at a POST before the face reads it. A later PeekBody
// of the same request (another extension, behind the first) gets the
// bytes already read instead of reading them again.
//
// A body over max is an error wrapping ErrTooLarge; it is put back all
// the same, for the face to refuse as it refuses any body too large.
func PeekBody(r *http.Request, max int64) ([]byte, error) {
	if r.Body == nil {
		r.Body = http.NoBody
	}
	p, ok := r.Body.(*peeked)
	if !ok || p.started {
		p = &peeked{rest: r.Body, more: true}
		r.Body = p
	}
	if p.err == nil && p.more && int64(len(p.head)) <= max { // read up to this max
		more, err := io.ReadAll(io.LimitReader(p.rest, max+1-int64(len(p.head))))
		p.head, p.err = append(p.head, more...), err
		p.more = err == nil && int64(len(p.head)) > max
	}
	p.r = io.MultiReader(bytes.NewReader(p.head), p.rest)
	return p.within(max)
}

// peeked is a body PeekBody read the start of: those bytes, then the
// rest of the original body.
type peeked struct {
	head    []byte
	err     error // of reading head
	more    bool  // the body may go on past head (none read yet, or it passed a max)
	r       io.Reader
	rest    io.ReadCloser
	started bool // somebody read from it: head is no longer all ahead
}

func (p *peeked) Read(b []byte) (int, error) { p.started = true; return p.r.Read(b) }
func (p *peeked) Close() error               { return p.rest.Close() }

// within returns head, if it is the whole body and at most max bytes.
func (p *peeked) within(max int64) ([]byte, error) {
	switch {
	case p.err != nil:
		return nil, p.err
	case p.more || int64(len(p.head)) > max:
		return nil, fmt.Errorf("request body exceeds %d bytes: %w", max, ErrTooLarge)
	}
	return p.head, nil
}
