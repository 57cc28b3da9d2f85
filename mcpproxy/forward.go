package mcpproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/sse"
	"io"
	"net/http"
	"strings"
	"sync"
)

// HTTPUpstream is a Streamable HTTP tool server. The zero Client is a
// client without timeouts (streams may last as long as a tool runs).
type HTTPUpstream struct {
	URL    string
	Client *http.Client
	// Header is added to every upstream request, e.g. the upstream's own
	// Authorization; the client's Authorization is never forwarded.
	Header http.Header
	// MaxMessage caps one message read from the upstream; default 1 GiB.
	MaxMessage int64
	// Transport is "streamable", "sse" (the legacy HTTP+SSE transport of
	// 2024-11-05) or "" to find out on first use.
	Transport string

	probe struct {
		sync.Mutex
		done, legacy bool
	}
}

func (*HTTPUpstream) upstream() {}

func (u *HTTPUpstream) client() *http.Client {
	if u.Client != nil {
		return u.Client
	}
	return http.DefaultClient
}

func (u *HTTPUpstream) maxMessage() int64 {
	if u.MaxMessage > 0 {
		return u.MaxMessage
	}
	return 1 << 30
}

// Headers that describe one hop, not the message, and headers the proxy
// owns on each side.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Proxy-Connection": true,
	"Content-Length": true, "Host": true, "Authorization": true, "Origin": true, "Referer": true,
	"Cookie": true, "Accept-Encoding": true, "Content-Encoding": true,
}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		if hopHeaders[http.CanonicalHeaderKey(k)] {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

// forward relays one HTTP request to an HTTP upstream. Everything passes,
// headers (unknown Mcp-* ones included), status codes and SSE event ids;
// only responses to calls the proxy owns are rewritten on the way back.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, up *HTTPUpstream, tenant string) {
	ctx := r.Context()
	session := r.Header.Get("Mcp-Session-Id")
	var body []byte
	var calls map[string]*Call
	pending := map[string][]byte{} // request ids of this POST not answered yet
	if r.Method == http.MethodPost {
		var ok bool
		if body, ok = p.readBody(w, r); !ok {
			return
		}
		msgs, batch, ok := decodePOST(w, body, r.Header.Get("Mcp-Protocol-Version"))
		if !ok {
			return
		}
		rq := request(r, tenant, requestVersion(r, msgs))
		if !batch && msgs[0].Method == "resources/stream" {
			if p.owned.ServeStream(w, r, rq, msgs[0], p.owned.StreamCaps(rq, msgs[0])) {
				return
			}
		}
		if !batch && msgs[0].IsRequest() {
			if reply, _ := p.owned.Before(ctx, rq, msgs[0]); reply != nil {
				writeReply(w, r, reply)
				return
			}
		}
		for _, m := range msgs {
			if m.Method == "initialize" {
				defer func() {
					if sid := w.Header().Get("Mcp-Session-Id"); sid != "" {
						p.owned.Initialized(sid, m)
					}
				}()
			}
		}
		calls = map[string]*Call{}
		for _, m := range msgs {
			if m.IsRequest() {
				pending[jsonrpc.Key(m.ID)] = m.ID
			}
			if _, c := p.owned.Before(ctx, rq, m); c != nil {
				calls[jsonrpc.Key(m.ID)] = c
			}
		}
		p.track(session, calls)
		defer p.untrack(session, calls)
	}

	if r.Method == http.MethodDelete && session != "" {
		p.owned.Ended(session)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, up.URL, bytes.NewReader(body))
	if err != nil {
		http.Error(w, "bad upstream URL", http.StatusInternalServerError)
		return
	}
	copyHeaders(req.Header, r.Header)
	for k, vs := range up.Header {
		req.Header[k] = vs
	}
	if r.URL.RawQuery != "" {
		req.URL.RawQuery = r.URL.RawQuery
	}
	resp, err := up.client().Do(req)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("upstream unreachable", "err", err)
			p.upstreamDown(w, body)
		}
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)

	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		p.relaySSE(ctx, w, resp, up.maxMessage(), session, pending)
	case strings.HasPrefix(ct, "application/json") && len(calls) > 0:
		p.relayJSON(ctx, w, resp, up, session, calls)
	default:
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}
}

// upstreamDown answers every request of a POST that could not be
// forwarded with a JSON-RPC error, so no client waits for an answer that
// will not come.
func (p *Proxy) upstreamDown(w http.ResponseWriter, body []byte) {
	msgs, batch, _ := jsonrpc.Decode(body)
	var out [][]byte
	for _, m := range msgs {
		if m.IsRequest() {
			out = append(out, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, "upstream MCP server unreachable").Raw)
		}
	}
	if len(out) == 0 {
		http.Error(w, "upstream MCP server unreachable", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	if batch {
		w.Write([]byte("["))
		w.Write(bytes.Join(out, []byte(",")))
		w.Write([]byte("]"))
		return
	}
	w.Write(out[0])
}

func (p *Proxy) track(session string, calls map[string]*Call) {
	if len(calls) == 0 {
		return
	}
	p.mu.Lock()
	for id, c := range calls {
		p.calls[session+"\x00"+id] = *c
	}
	p.mu.Unlock()
}

func (p *Proxy) untrack(session string, calls map[string]*Call) {
	if len(calls) == 0 {
		return
	}
	p.mu.Lock()
	for id := range calls {
		delete(p.calls, session+"\x00"+id)
	}
	p.mu.Unlock()
}

// tracked finds the call a response answers, on any stream of session:
// after a reconnection a response can arrive on the GET stream.
func (p *Proxy) tracked(session string, m *jsonrpc.Message) *Call {
	if !m.IsResponse() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.calls[session+"\x00"+jsonrpc.Key(m.ID)]
	if !ok {
		return nil
	}
	return &c
}

// relayJSON rewrites a JSON response body.
func (p *Proxy) relayJSON(ctx context.Context, w http.ResponseWriter, resp *http.Response, up *HTTPUpstream, session string, calls map[string]*Call) {
	body, err := readAllSized(resp.Body, resp.ContentLength, up.maxMessage())
	if err != nil {
		p.log.Warn("reading the upstream response failed", "err", err)
		http.Error(w, "upstream response unreadable", http.StatusBadGateway)
		return
	}
	msgs, batch, err := jsonrpc.Decode(body)
	if err != nil {
		w.WriteHeader(resp.StatusCode) // not JSON-RPC: not ours to judge
		w.Write(body)
		return
	}
	status := resp.StatusCode
	var out [][]byte
	for _, m := range msgs {
		n := p.owned.After(ctx, calls[jsonrpc.Key(m.ID)], m)
		if n != m && m.Error != nil && n.Error == nil && status >= 400 {
			status = http.StatusOK // the proxy answered what the upstream could not
		}
		out = append(out, n.Raw)
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	if batch {
		w.Write([]byte("["))
		w.Write(bytes.Join(out, []byte(",")))
		w.Write([]byte("]"))
		return
	}
	w.Write(out[0])
}

// relaySSE relays an event stream event by event, keeping ids, names and
// retry hints, and rewriting responses to owned calls.
//
// If the upstream's stream breaks, or ends without event ids (so the
// client cannot resume it) while requests of the POST are unanswered,
// each of them gets a JSON-RPC error: no client waits for ever.
func (p *Proxy) relaySSE(ctx context.Context, w http.ResponseWriter, resp *http.Response, max int64, session string, pending map[string][]byte) {
	sse.SetHeaders(w.Header())
	sw := sse.NewWriter(w)
	w.WriteHeader(resp.StatusCode)
	sw.Flush()
	sr := sse.NewReader(resp.Body, max)
	resumable := false
	for {
		ev, err := sr.Next()
		var big *sse.TooLargeError
		if errors.As(err, &big) {
			// Too large to relay: whoever waits for it gets an error.
			p.log.Warn("dropping an upstream event over the size limit", "err", err)
			if g := jsonrpc.Peek(big.Head, big.Tail); g.ID != nil && g.Response {
				delete(pending, jsonrpc.Key(g.ID))
				err = sw.Write(sse.Event{ID: big.ID, HasID: big.HasID, Data: jsonrpc.ErrorResponse(g.ID, jsonrpc.CodeUpstream, big.Error()).Raw})
			}
			if err == nil {
				continue
			}
		}
		if err != nil {
			if ctx.Err() != nil || len(pending) == 0 || (errors.Is(err, io.EOF) && resumable) {
				return
			}
			p.log.Warn("upstream event stream ended before answering", "err", err, "unanswered", len(pending))
			for _, id := range pending {
				if sw.Write(sse.Event{Data: jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, "upstream MCP server ended the stream without answering").Raw}) != nil {
					return
				}
			}
			return
		}
		resumable = resumable || ev.ID != ""
		if len(ev.Data) > 0 {
			if m, err := jsonrpc.DecodeMessage(ev.Data); err == nil {
				if m.IsResponse() {
					delete(pending, jsonrpc.Key(m.ID))
				}
				if c := p.tracked(session, m); c != nil {
					ev.Data = p.owned.After(ctx, c, m).Raw
				}
			}
		}
		if err := sw.Write(ev); err != nil {
			return // the client went away; closing resp.Body tells the upstream
		}
	}
}

// writeReply answers a request the proxy handled itself, as JSON.
func writeReply(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
	status := http.StatusOK
	if v := r.Header.Get("Mcp-Protocol-Version"); stateless(v) {
		status = errorStatus(m)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(m.Raw)
}

// errorStatus is the HTTP status of a stateless-era error response
// (SEP-2575): method not found is 404, bad params 400.
func errorStatus(m *jsonrpc.Message) int {
	switch m.ErrorCode() {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, -32022, -32021:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// readAllSized reads r whole, allocating once when the size is known.
func readAllSized(r io.Reader, size, max int64) ([]byte, error) {
	if size > max {
		return nil, fmt.Errorf("message of %d bytes exceeds the %d byte cap", size, max)
	}
	if size < 0 {
		size = 0
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	n, err := buf.ReadFrom(io.LimitReader(r, max+1))
	if n > max {
		return nil, fmt.Errorf("message exceeds the %d byte cap", max)
	}
	return buf.Bytes(), err
}
