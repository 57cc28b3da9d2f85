package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/stall"
)

// relayResponse relays resp by its type: an event stream event by event;
// a JSON body the relay must read (an answer it rewrites, a session's, an
// id to respell) rewritten; anything else as it came.
func (rl *Relay) relayResponse(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, out *stallWriter,
	resp *http.Response, rw *rewriter, ex *exchange) {
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		rl.relaySSE(ctx, cancel, w, out, resp, rw)
	case strings.HasPrefix(ct, "application/json") && (ex.owns || rw.sess != nil || len(rw.echo) > 0):
		rl.relayJSON(w, out, resp, rw, ex.body)
	default:
		w.WriteHeader(resp.StatusCode)
		io.Copy(out, resp.Body)
	}
}

// relayLate writes the upstream's answer to a stream that opened before
// it (roundTrip): events as they come, a JSON body as events, and for
// anything else a JSON-RPC error for each request still owed (the HTTP
// status is spent).
func (rl *Relay) relayLate(ctx context.Context, st *stream, resp *http.Response, err error, rw *rewriter, pending [][]byte) {
	why := "upstream MCP server unreachable"
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return
		}
		rl.logUnreachable(err)
		why = unreachable(err)
	case resp.StatusCode < 300 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		defer resp.Body.Close()
		rl.relayEvents(ctx, st, resp, rw)
		return
	case refusesSpillway(resp):
		resp.Body.Close()
		rl.logRefused(resp)
		why = errRefused
	default:
		defer resp.Body.Close()
		why = fmt.Sprintf("upstream MCP server answered HTTP %d", resp.StatusCode)
		guard := stall.Message(resp.Body, rl.o.StallTimeout, resp.ContentLength)
		defer guard.Stop()
		body, err := httpx.ReadMessage(guard, resp.ContentLength, rl.o.MaxMessage, rw.spool)
		if s := guard.Why("answer"); s != "" {
			why = s
		}
		msgs, _, derr := jsonrpc.Decode(body)
		if err != nil || derr != nil {
			break
		}
		for _, m := range msgs {
			if st.write(sse.Event{HasData: true, Data: rw.rewrite(m).Raw}) != nil {
				return
			}
		}
	}
	for _, id := range pending {
		if _, owed := rw.open[jsonrpc.Key(id)]; !owed {
			continue // answered above
		}
		if st.write(sse.Event{HasData: true, Data: jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, why).Raw}) != nil {
			return
		}
	}
}

// cutIfStalled cancels upstream the requests of a client cut for not
// reading (its upstream request ends with ServeHTTP; in a session the
// upstream is also told, see cancelUpstream).
func (rl *Relay) cutIfStalled(out *stallWriter, sid string, r *http.Request, pending [][]byte) {
	if !out.stalled() {
		return
	}
	rl.log.Warn("a client stopped reading its response; cut, and its requests cancelled upstream", "unanswered", len(pending))
	if sid != "" {
		go rl.cancelUpstream(sid, r.Header.Get("Mcp-Protocol-Version"), pending)
	}
}

// tellEnded tells Methods of the sessions the relay forgot.
func (rl *Relay) tellEnded() {
	for _, sid := range rl.endedSessions() {
		rl.o.Methods.Ended(sid)
	}
}

// rewriter rewrites the responses of one relayed HTTP exchange.
type rewriter struct {
	rl   *Relay
	ctx  context.Context
	open map[string]owed // the exchange's requests not yet answered, by jsonrpc.Key
	sess *session
	echo map[string][]byte // jsonrpc.Key → the client's bytes, for ids an upstream may respell
	// spool reads the exchange's upstream messages, for its tenant (nil: none).
	spool sse.Spooler
	// bound is the session the exchange's initialize created: its answer
	// settles the session's revision.
	bound string
}

// spoolFor returns the Spooler of tenant's messages, nil without one.
func (rl *Relay) spoolFor(tenant string) sse.Spooler {
	if rl.o.Spool == nil {
		return nil // not a nil *spill.Spooler in the interface
	}
	return rl.o.Spool.For(tenant)
}

// owed is a request of the exchange not yet answered: its id as the
// client sent it, and the proxy's own call when it rewrites the answer
// (nil: passed as it comes).
type owed struct {
	id   []byte
	call *ownmethods.Call
}

// respellable maps the ids among ids that an upstream may write with other
// bytes (1.0 as 1) to the bytes the client sent; nil when there are none.
func respellable(ids [][]byte) map[string][]byte {
	var out map[string][]byte
	for _, id := range ids {
		if jsonrpc.Respellable(id) {
			if out == nil {
				out = map[string][]byte{}
			}
			out[jsonrpc.Key(id)] = id
		}
	}
	return out
}

// rewrite returns m as the client gets it. A response is also struck
// from the requests not yet answered.
func (rw *rewriter) rewrite(m *jsonrpc.Message) *jsonrpc.Message {
	if !m.IsResponse() {
		return m
	}
	k := jsonrpc.Key(m.ID) // once per response: every table below is by key
	c := rw.open[k].call
	delete(rw.open, k)
	if id, ok := rw.echo[k]; ok && !bytes.Equal(id, m.ID) {
		m = m.WithID(id) // the client gets the id it sent, not the upstream's spelling
	}
	// This POST's own call first: the session's table (under the relay's
	// lock) is asked only when the POST has none for the response.
	if c == nil && rw.sess != nil {
		c = rw.rl.call(rw.sess, k) // wherever it arrives
	}
	if c == nil {
		return m
	}
	if v := httpx.Negotiated(m); c.Method == "initialize" && rw.bound != "" && v != "" {
		rw.rl.settle(rw.bound, v)
	}
	return rw.rl.o.Methods.After(rw.ctx, c, m)
}

// relayJSON rewrites a JSON response body. Headers go to w, the body to
// out. A body that cannot be read answers each request of req (the
// client's POST) with a JSON-RPC error saying why, as an event would be.
func (rl *Relay) relayJSON(w http.ResponseWriter, out io.Writer, resp *http.Response, rw *rewriter, req []byte) {
	guard := stall.Message(resp.Body, rl.o.StallTimeout, resp.ContentLength)
	defer guard.Stop()
	body, err := httpx.ReadMessage(guard, resp.ContentLength, rl.o.MaxMessage, rw.spool)
	if err != nil {
		rl.log.Warn("reading the upstream response failed", "err", err)
		why := "upstream response unreadable"
		switch {
		case guard.Why("answer") != "":
			why = guard.Why("answer")
		case errors.Is(err, spill.ErrFull):
			why = "no room to hold the upstream's answer now; try again later"
		case errors.Is(err, spill.ErrTooLarge) || errors.Is(err, httpx.ErrTooLarge):
			why = fmt.Sprintf("upstream message exceeds the %d byte limit", rl.o.MaxMessage)
		}
		httpx.UpstreamError(w, req, why)
		return
	}
	msgs, batch, err := jsonrpc.Decode(body)
	if err != nil {
		w.WriteHeader(resp.StatusCode) // not JSON-RPC: not ours to judge
		out.Write(body)
		return
	}
	status := resp.StatusCode
	msgsOut := make([][]byte, 0, len(msgs))
	for _, m := range msgs {
		n := rw.rewrite(m)
		if n != m && m.Error != nil && n.Error == nil && status >= 400 {
			status = http.StatusOK // the proxy answered what the upstream could not
		}
		msgsOut = append(msgsOut, n.Raw)
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	httpx.WriteMessages(out, msgsOut, batch)
}

// relaySSE relays an event stream event by event, as it came: ids, names,
// retry hints, comments, id-only events; only responses to owned calls
// are rewritten. An event over the message cap is replaced by an error
// response for the request it answered, when its id can be found.
//
// If the stream breaks, or ends without an event id to resume from, while
// requests of this POST are unanswered (open), each of them gets an
// error: no client waits for ever (the stdio face does the same).
//
// Headers go to w at once; events go to out. A stream with nothing to
// send for Options.KeepAlive gets a comment; a client that cannot take
// one is cut (cancel).
func (rl *Relay) relaySSE(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, out *stallWriter,
	resp *http.Response, rw *rewriter) {
	sw := sse.NewWriter(out).Final() // the upstream replays a stream, never this process
	w.WriteHeader(resp.StatusCode)
	// The headers go out with the first event, in one write, as a reverse
	// proxy sends them; an upstream slow to send one has its headers
	// relayed after headerWait (a client may wait for them before it sends
	// its next message).
	st := rl.newStream(ctx, cancel, sw, headerWait)
	defer st.stop()
	rl.relayEvents(ctx, st, resp, rw)
}

// headerWait is how long a response's headers wait for its first event.
const headerWait = 2 * time.Millisecond

// stream is a client's event stream with its keep-alive. One timer per
// stream serves both the headers' wait and the keep-alive (most streams
// end long before either is due, and a timer is cheaper than a goroutine).
type stream struct {
	sw     *sse.Writer
	busy   atomic.Bool // an event went out since the last tick
	ctx    context.Context
	cancel context.CancelFunc
	every  time.Duration // the keep-alive; <= 0: none

	mu      sync.Mutex // held by a tick while it writes: stop waits for it
	t       *time.Timer
	waiting bool // the first tick flushes the headers instead (see newStream)
	stopped bool
}

// write writes ev to the client.
func (st *stream) write(ev sse.Event) error {
	st.busy.Store(true)
	return st.sw.Write(ev)
}

// writeRaw writes events as an sse.Reader read them (sse.Reader.Raw).
func (st *stream) writeRaw(b []byte) error {
	st.busy.Store(true)
	return st.sw.WriteRaw(b)
}

// newStream returns sw as a stream that gets an SSE comment every
// Options.KeepAlive in which nothing else went out; a client that cannot
// take one is cut (cancel). When headers > 0, the response's headers
// (written, not yet sent) are flushed after that long unless an event
// took them first.
func (rl *Relay) newStream(ctx context.Context, cancel context.CancelFunc, sw *sse.Writer, headers time.Duration) *stream {
	st := &stream{sw: sw, ctx: ctx, cancel: cancel, every: rl.o.KeepAlive, waiting: headers > 0}
	first := headers
	if first <= 0 {
		first = st.every
	}
	if first <= 0 {
		return st
	}
	st.mu.Lock() // a tick waits until t is set
	defer st.mu.Unlock()
	st.t = time.AfterFunc(first, st.tick)
	return st
}

func (st *stream) tick() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stopped || st.ctx.Err() != nil {
		return
	}
	busy := st.busy.Swap(false)
	switch {
	case st.waiting:
		st.waiting = false
		if !busy {
			st.sw.Flush() // the headers; a client gone ends ctx
		}
	case !busy && st.sw.Write(sse.Event{Comments: []string{"keep-alive"}}) != nil:
		st.cancel()
		return
	}
	if st.every > 0 {
		st.t.Reset(st.every)
	}
}

// stop ends the stream's timer, waiting for a tick under way: nothing
// touches the response once the handler returned.
func (st *stream) stop() {
	if st.t == nil {
		return
	}
	st.mu.Lock()
	st.stopped = true
	st.t.Stop()
	st.mu.Unlock()
}

// relayEvents relays resp's events to st (see relaySSE).
func (rl *Relay) relayEvents(ctx context.Context, st *stream, resp *http.Response, rw *rewriter) {
	guard := stall.Events(resp.Body, rl.o.StallTimeout)
	defer guard.Stop()
	sr := sse.NewReader(guard, rl.o.MaxMessage)
	defer sr.Release()
	if rw.spool != nil {
		sr.Spool(rw.spool)
	}
	resumable := false
	for {
		ev, err := sr.Next()
		if tooLarge := tooLargeOf(err); tooLarge != nil {
			if rl.dropTooLarge(st, rw.open, tooLarge) != nil {
				return
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil || len(rw.open) == 0 || (errors.Is(err, io.EOF) && resumable) {
				return
			}
			rl.failUnanswered(st, rw.open, err, guard.Why("stream"))
			return
		}
		resumable = resumable || (ev.HasID && ev.ID != "")
		if relayEvent(st, sr, ev, rw) != nil {
			return // the client went away or stalled; closing resp.Body tells the upstream
		}
	}
}

// relayEvent writes ev, the event sr read last, to the client: as it
// came, unless its data is a response the proxy rewrites or a line of it
// ends with CR. Those are written again, with LF, which every client
// splits lines on (TestRelayIsExact).
func relayEvent(st *stream, sr *sse.Reader, ev sse.Event, rw *rewriter) error {
	raw := sr.Raw()
	if bytes.IndexByte(raw, '\r') >= 0 {
		raw = nil
	}
	if ev.HasData && len(ev.Data) > 0 {
		if m, err := jsonrpc.DecodeMessage(ev.Data); err == nil {
			if n := rw.rewrite(m); n != m {
				ev.Data, raw = n.Raw, nil
			}
		}
	}
	if raw != nil {
		return st.writeRaw(raw)
	}
	return st.write(ev)
}

// dropTooLarge drops an upstream event over the message cap (logged).
// When it holds a response, the client gets in its place an error saying
// why, under the id the client spelt when the request is the exchange's,
// which is then answered.
func (rl *Relay) dropTooLarge(st *stream, open map[string]owed, tooLarge *sse.TooLargeError) error {
	g := jsonrpc.Peek(tooLarge.Head, tooLarge.Tail)
	id := g.ID
	rl.log.Warn("upstream event dropped", "limit", tooLarge.Limit, "bytes", tooLarge.Size, "id", string(id), "err", tooLarge.Err)
	if id == nil || !g.Response {
		return nil
	}
	if o, ok := open[jsonrpc.Key(id)]; ok {
		id = o.id // as the client spelt it
	}
	delete(open, jsonrpc.Key(id))
	why := fmt.Sprintf("upstream message exceeds the %d byte limit", tooLarge.Limit)
	if tooLarge.Err != nil {
		why = fmt.Sprintf("upstream message of %d bytes dropped: it is not one JSON value, or there is no room to hold it", tooLarge.Size)
	}
	return st.write(sse.Event{ID: tooLarge.ID, HasID: tooLarge.HasID, HasData: true,
		Data: jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, why).Raw})
}

// failUnanswered answers each request of open with an error: the
// upstream's stream broke (err), or stalled (stalled says how), before
// their responses came, and no client may wait for ever.
func (rl *Relay) failUnanswered(st *stream, open map[string]owed, err error, stalled string) {
	why := "upstream MCP server ended the stream without answering"
	if stalled != "" {
		why = stalled
	}
	rl.log.Warn("upstream event stream ended before answering", "err", err, "unanswered", len(open), "why", why)
	for _, o := range open {
		if st.write(sse.Event{HasData: true, Data: jsonrpc.ErrorResponse(o.id, jsonrpc.CodeUpstream, why).Raw}) != nil {
			return
		}
	}
}

// tooLargeOf returns the *sse.TooLargeError err is or wraps, or nil. The
// common ends of a stream (none, io.EOF) and a bare *TooLargeError are
// told without errors.As, whose target escapes: an allocation per event.
func tooLargeOf(err error) *sse.TooLargeError {
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	if tl, ok := errors.AsType[*sse.TooLargeError](err); ok {
		return tl
	}
	var tl *sse.TooLargeError
	if errors.As(err, &tl) {
		return tl
	}
	return nil
}
