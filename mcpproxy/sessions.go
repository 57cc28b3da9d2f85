package mcpproxy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/sse"
	"net/http"
	"strings"
	"sync"
	"time"
)

// sessions terminates Streamable HTTP for a stdio upstream. A stdio
// server serves one client, so each session-era session gets its own
// child process: server requests, notifications and logging levels then
// reach exactly the client they belong to. Stateless-era requests carry
// everything they need, so they share one supervised child.
type sessions struct {
	p      *Proxy
	dial   func() (conn, error)
	shared *supervisor

	mu   sync.Mutex
	byID map[string]*session
	stop chan struct{}
}

// idleSession is how long a session without open streams lives.
const idleSession = 10 * time.Minute

// newSessions terminates HTTP for upstream connections made by dial.
func newSessions(p *Proxy, dial func() (conn, error)) *sessions {
	ss := &sessions{p: p, dial: dial, byID: map[string]*session{}, stop: make(chan struct{})}
	ss.shared = newSupervisor(dial, p, ss.statelessServerMsg)
	go ss.reap()
	return ss
}

func (ss *sessions) close() {
	close(ss.stop)
	ss.mu.Lock()
	all := ss.byID
	ss.byID = map[string]*session{}
	ss.mu.Unlock()
	for _, s := range all {
		s.pe.conn.Close()
	}
	ss.shared.close()
}

func (ss *sessions) reap() {
	t := time.NewTicker(min(time.Minute, ss.p.o.StreamWindow/2))
	defer t.Stop()
	for {
		select {
		case <-ss.stop:
			return
		case <-t.C:
		}
		ss.mu.Lock()
		for id, s := range ss.byID {
			s.log.prune()
			s.mu.Lock()
			if s.get == nil && time.Since(s.lastUsed) > ss.p.o.StreamWindow {
				s.backlog = nil // nobody came back for it within the window
			}
			s.mu.Unlock()
			if s.idleSince(time.Now()) > idleSession || !s.pe.alive() {
				delete(ss.byID, id)
				ss.p.owned.Ended(id)
				go s.pe.conn.Close()
			}
		}
		ss.mu.Unlock()
	}
}

// session is one session-era client and its child process.
type session struct {
	id     string
	tenant string
	pe     *peer

	log *eventLog // replay for Last-Event-ID

	mu       sync.Mutex
	posts    []*stream // open POST streams, oldest first
	get      *stream   // the GET stream, when open
	backlog  []delivery
	lastUsed time.Time
}

func (s *session) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.posts) > 0 || s.get != nil {
		return 0
	}
	return now.Sub(s.lastUsed)
}

// serverMsg routes what the child sends on its own: to an open POST
// stream, else the GET stream, else a bounded backlog the next GET
// stream drains.
func (s *session) serverMsg(m *jsonrpc.Message) { s.park(delivery{m: m}) }

func (s *session) park(d delivery) {
	s.mu.Lock()
	var target *stream
	switch {
	case len(s.posts) > 0:
		target = s.posts[len(s.posts)-1]
	case s.get != nil:
		target = s.get
	default:
		if len(s.backlog) >= 1024 {
			s.backlog = s.backlog[1:]
		}
		s.backlog = append(s.backlog, d)
	}
	s.mu.Unlock()
	if target != nil {
		target.deliver(d.m, d.c)
	}
}

func (s *session) addPost(st *stream) {
	s.mu.Lock()
	s.posts = append(s.posts, st)
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

func (s *session) removePost(st *stream) {
	s.mu.Lock()
	for i, x := range s.posts {
		if x == st {
			s.posts = append(s.posts[:i], s.posts[i+1:]...)
			break
		}
	}
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

func (ss *sessions) newSession(tenant string) (*session, error) {
	ss.mu.Lock()
	if len(ss.byID) >= ss.p.o.MaxSessions {
		var oldest *session
		for _, s := range ss.byID {
			if s.idleSince(time.Now()) > 0 && (oldest == nil || s.lastUsed.Before(oldest.lastUsed)) {
				oldest = s
			}
		}
		if oldest == nil {
			ss.mu.Unlock()
			return nil, errors.New("too many sessions")
		}
		delete(ss.byID, oldest.id)
		go oldest.pe.conn.Close()
	}
	ss.mu.Unlock()
	c, err := ss.dial()
	if err != nil {
		return nil, err
	}
	s := &session{id: rand.Text(), tenant: tenant, lastUsed: time.Now(),
		log: newEventLog(ss.p.o.StreamWindow, 64<<20)}
	s.pe = newPeer(c, s.serverMsg, ss.p.log)
	ss.mu.Lock()
	ss.byID[s.id] = s
	ss.mu.Unlock()
	return s, nil
}

func (ss *sessions) lookup(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s != nil && !s.pe.alive() {
		delete(ss.byID, id)
		return nil
	}
	return s
}

// statelessServerMsg handles what the shared child sends unasked. The
// stateless era has no server-to-client requests (input-required results
// replace them), so a request gets an error; other notifications have no
// session to go to.
func (ss *sessions) statelessServerMsg(m *jsonrpc.Message) {
	if m.IsRequest() {
		if pe, err := ss.shared.get(); err == nil {
			pe.send(context.Background(), jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound, "no client session to send this request to"))
		}
		return
	}
	ss.p.log.Debug("dropping a notification with no session", "method", m.Method)
}

func (ss *sessions) serveHTTP(w http.ResponseWriter, r *http.Request, tenant string) {
	sid := r.Header.Get("Mcp-Session-Id")
	version := r.Header.Get("Mcp-Protocol-Version")
	switch r.Method {
	case http.MethodPost:
		ss.post(w, r, tenant)
	case http.MethodGet, http.MethodDelete:
		if sid == "" {
			if stateless(version) {
				w.Header().Set("Allow", "POST")
				http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			} else {
				http.Error(w, "Bad Request: Mcp-Session-Id header required", http.StatusBadRequest)
			}
			return
		}
		s := ss.lookup(sid)
		if s == nil {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if s.tenant != tenant {
			http.Error(w, "session belongs to another caller", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodDelete {
			ss.mu.Lock()
			delete(ss.byID, sid)
			ss.mu.Unlock()
			s.pe.conn.Close()
			ss.p.owned.Ended(sid)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		ss.serveGET(w, r, s)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

func (ss *sessions) serveGET(w http.ResponseWriter, r *http.Request, s *session) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		http.Error(w, "Accept must contain text/event-stream", http.StatusNotAcceptable)
		return
	}
	st := newStream(s.park)
	s.mu.Lock()
	old := s.get // a reconnecting client replaces a stream the server has not seen die yet
	s.get = st
	backlog := s.backlog
	s.backlog = nil
	s.mu.Unlock()
	if old != nil {
		old.close() // what it held moves to the new stream
	}
	defer func() {
		s.mu.Lock()
		if s.get == st {
			s.get = nil
		}
		s.lastUsed = time.Now()
		s.mu.Unlock()
		st.close()
	}()
	var replay []sse.Event
	if lid := r.Header.Get("Last-Event-ID"); lid != "" {
		replay, _ = s.log.after(lid) // unknown or expired: nothing to replay
	}
	sse.SetHeaders(w.Header())
	sw := sse.NewWriter(w)
	w.WriteHeader(http.StatusOK)
	sw.Flush()
	ctx := r.Context()
	for _, ev := range replay {
		if sw.Write(ev) != nil {
			return
		}
	}
	sid := newStreamID()
	send := func(d delivery) error {
		data := ss.p.owned.After(ctx, d.c, d.m).Raw
		return sw.Write(sse.Event{ID: s.log.add(sid, data), Data: data})
	}
	for _, d := range backlog {
		if send(d) != nil {
			return
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.pe.dead:
			return
		case <-st.done:
			return // replaced by a newer GET stream
		case d := <-st.ch:
			if send(d) != nil {
				return
			}
		}
	}
}

func (ss *sessions) post(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, ok := ss.p.readBody(w, r)
	if !ok {
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	msgs, _, ok := decodePOST(w, body, r.Header.Get("Mcp-Protocol-Version"))
	if !ok {
		return
	}
	version := requestVersion(r, msgs)

	var pe *peer
	var s *session
	switch {
	case sid != "":
		if s = ss.lookup(sid); s == nil {
			writeJSONError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found")
			return
		}
		if s.tenant != tenant {
			http.Error(w, "session belongs to another caller", http.StatusForbidden)
			return
		}
		pe = s.pe
	case hasMethod(msgs, "initialize") && !stateless(version):
		var err error
		if s, err = ss.newSession(tenant); err != nil {
			ss.p.log.Warn("starting a session failed", "err", err)
			ss.p.upstreamDown(w, body)
			return
		}
		w.Header().Set("Mcp-Session-Id", s.id)
		pe = s.pe
	case stateless(version) || hasMethod(msgs, "server/discover"):
		if err := mcpheader.Check(r.Header, msgs); err != nil {
			e := err.(*mcpheader.Error)
			writeJSONError(w, http.StatusBadRequest, msgs[0].ID, e.Code, e.Message)
			return
		}
		var err error
		if pe, err = ss.shared.get(); err != nil {
			ss.p.log.Warn("upstream unavailable", "err", err)
			ss.p.upstreamDown(w, body)
			return
		}
		if m := msgs[0]; len(msgs) == 1 && m.Method == "tools/call" {
			name, _ := mcpheader.RoutingName(m)
			ss.p.tools.Ensure(r.Context(), name, listTools(pe, metaOf(m.Params)))
			bs, _ := ss.p.tools.Lookup(name)
			if err := mcpheader.CheckParams(r.Header, bs, m.Params); err != nil {
				e := err.(*mcpheader.Error)
				writeJSONError(w, http.StatusBadRequest, m.ID, e.Code, e.Message)
				return
			}
		}
	default:
		http.Error(w, "Bad Request: Mcp-Session-Id header required", http.StatusBadRequest)
		return
	}

	rq := request(r, tenant, version)
	if s != nil {
		rq.Session = s.id // a new session's id is not in the request
	}
	if len(msgs) == 1 && msgs[0].Method == "resources/stream" {
		caps := ss.p.owned.StreamCaps(rq, msgs[0])
		caps.Upstream = false // a stdio or legacy upstream cannot stream over HTTP
		ss.p.owned.ServeStream(w, r, rq, msgs[0], caps)
		return
	}
	if s != nil {
		for _, m := range msgs {
			if m.Method == "initialize" {
				ss.p.owned.Initialized(s.id, m)
			}
		}
	}
	var fallback func(delivery)
	if s != nil {
		fallback = s.park
	}
	st := newStream(fallback)
	defer st.close()
	if s != nil {
		s.addPost(st)
		defer s.removePost(st)
	}
	want := map[string]bool{}
	var waiters []*waiter
	for _, m := range msgs {
		if !m.IsRequest() {
			if err := pe.send(ctx, m); err != nil {
				ss.p.upstreamDown(w, body)
				return
			}
			continue
		}
		want[jsonrpc.Key(m.ID)] = true
		reply, c := ss.p.owned.Before(ctx, rq, m)
		if reply != nil {
			st.deliver(reply, nil)
			continue
		}
		wt, err := pe.call(ctx, m, c, st)
		if err != nil {
			st.deliver(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, "upstream MCP server unavailable"), nil)
			continue
		}
		waiters = append(waiters, wt)
	}
	if len(want) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	defer func() {
		// Stateless requests whose client left are cancelled upstream; a
		// session's keep running and reach the client on its GET stream.
		if s == nil {
			for _, wt := range waiters {
				pe.cancel(wt, "client disconnected")
			}
		}
	}()
	var log *eventLog
	if s != nil {
		log = s.log
	}
	ss.p.respond(ctx, w, r, st, want, stateless(version), log, version >= Version20251125)
}

// respond writes what arrives on st until every request in want is
// answered. When the first thing to arrive already completes the POST it
// is sent as plain JSON (so a stateless error can carry its HTTP status);
// otherwise the response becomes an event stream.
//
// On a session-era stream (log set) every event has an id and is kept
// in the log; from 2025-11-25 on (prime) the stream opens with a priming
// event, an id and a retry hint, so a client that loses the stream
// reconnects with GET and Last-Event-ID and gets what it missed (SEP-1699).
func (p *Proxy) respond(ctx context.Context, w http.ResponseWriter, r *http.Request, st *stream, want map[string]bool, statelessEra bool, log *eventLog, prime bool) {
	var sw *sse.Writer
	sid := newStreamID()
	last := sid + "_0" // the id the client saw last
	var poll <-chan time.Time
	if log != nil && prime && p.o.StreamPollAfter > 0 && strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		t := time.NewTimer(p.o.StreamPollAfter)
		defer t.Stop()
		poll = t.C
	}
	for len(want) > 0 {
		var d delivery
		select {
		case <-ctx.Done():
			return
		case <-poll:
			p.pollClose(w, sw, last)
			return // what comes next is parked for the client's GET
		case d = <-st.ch:
		}
		m := p.owned.After(ctx, d.c, d.m)
		if m.IsResponse() {
			delete(want, jsonrpc.Key(m.ID))
		}
		wantsSSE := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
		if sw == nil && len(want) == 0 && (!wantsSSE || (statelessEra && errorStatus(m) != http.StatusOK)) {
			// One answer, and a client that takes JSON or a stateless
			// error whose HTTP status must say what it is.
			status := http.StatusOK
			if statelessEra {
				status = errorStatus(m)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write(m.Raw)
			return
		}
		if sw == nil {
			if !wantsSSE {
				// A JSON-only client gets the responses alone.
				if m.IsResponse() {
					p.respondJSON(ctx, w, st, want, m)
				}
				continue
			}
			sse.SetHeaders(w.Header())
			sw = sse.NewWriter(w)
			w.WriteHeader(http.StatusOK)
			if log != nil && prime {
				// The priming event: an id and empty data (SEP-1699).
				if sw.Write(sse.Event{ID: sid + "_0", HasData: true, Retry: 1000 * time.Millisecond}) != nil {
					return
				}
			}
		}
		ev := sse.Event{Data: m.Raw}
		if log != nil {
			// Logged before it is written: if the write is what fails, the
			// replay still has it.
			ev.ID = log.add(sid, m.Raw)
			last = ev.ID
		}
		if sw.Write(ev) != nil {
			return
		}
	}
}

// pollClose ends a session-era stream on purpose (SEP-1699): the client
// has seen an event id and a retry hint, so it reconnects with GET and
// Last-Event-ID. A stream not yet open is opened just to carry them.
func (p *Proxy) pollClose(w http.ResponseWriter, sw *sse.Writer, last string) {
	if sw == nil {
		sse.SetHeaders(w.Header())
		sw = sse.NewWriter(w)
		w.WriteHeader(http.StatusOK)
	}
	sw.Write(sse.Event{ID: last, HasData: true, Retry: pollRetry * time.Millisecond})
}

// pollRetry is the retry hint, in milliseconds, of a stream closed for
// polling: soon enough that a result does not wait long.
const pollRetry = 500

// respondJSON answers a batch for a client that accepts only JSON.
func (p *Proxy) respondJSON(ctx context.Context, w http.ResponseWriter, st *stream, want map[string]bool, first *jsonrpc.Message) {
	out := []json.RawMessage{first.Raw}
	for len(want) > 0 {
		select {
		case <-ctx.Done():
			return
		case d := <-st.ch:
			m := p.owned.After(ctx, d.c, d.m)
			if m.IsResponse() {
				delete(want, jsonrpc.Key(m.ID))
				out = append(out, m.Raw)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(out)
	w.Write(b)
}

func hasMethod(msgs []*jsonrpc.Message, method string) bool {
	for _, m := range msgs {
		if m.Method == method {
			return true
		}
	}
	return false
}

// supervisor keeps one shared child running, restarting it with
// exponential backoff when it dies.
type supervisor struct {
	dial     func() (conn, error)
	p        *Proxy
	onServer func(*jsonrpc.Message)
	// onStart runs on each new child before it is used (the stdio face
	// replays the client's initialize there).
	onStart func(*peer) error

	mu      sync.Mutex
	pe      *peer
	started time.Time
	backoff time.Duration
	closed  bool
}

func newSupervisor(dial func() (conn, error), p *Proxy, onServer func(*jsonrpc.Message)) *supervisor {
	return &supervisor{dial: dial, p: p, onServer: onServer, backoff: 100 * time.Millisecond}
}

// get returns the live child, starting one when none runs and the
// backoff since the last start has passed.
func (s *supervisor) get() (*peer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("shutting down")
	}
	if s.pe != nil && s.pe.alive() {
		return s.pe, nil
	}
	if !s.started.IsZero() { // a child ran, or failed to start, before
		if s.pe != nil && time.Since(s.started) > time.Minute {
			s.backoff = 100 * time.Millisecond // it ran well; start over
		}
		if wait := time.Until(s.started.Add(s.backoff)); wait > 0 {
			return nil, errors.New("upstream restarting")
		}
		s.backoff = min(2*s.backoff, 30*time.Second)
		s.p.log.Warn("restarting the upstream", "backoff", s.backoff)
	}
	s.started = time.Now()
	c, err := s.dial()
	if err != nil {
		return nil, err
	}
	pe := newPeer(c, s.onServer, s.p.log)
	if s.onStart != nil {
		if err := s.onStart(pe); err != nil {
			c.Close()
			return nil, err
		}
	}
	s.pe = pe
	return pe, nil
}

func (s *supervisor) close() {
	s.mu.Lock()
	s.closed = true
	pe := s.pe
	s.mu.Unlock()
	if pe != nil {
		pe.conn.Close()
	}
}

// metaOf returns params._meta, raw.
func metaOf(params []byte) json.RawMessage {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(params, &p)
	return p.Meta
}
