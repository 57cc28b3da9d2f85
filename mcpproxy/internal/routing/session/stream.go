// Package session holds what the proxy keeps for a session-era client when
// it terminates Streamable HTTP itself (stdio and legacy upstreams): the
// table of sessions, each bound to the tenant that created it, and each
// session's streams. It is the half of the proxy's routing (with package
// mux) that leads a request's session id to its upstream connection
// (Session.Value) and holds the answers on their way back to the client.
//
// A stream is one SSE stream of a session (a POST's, or the standalone GET
// stream) and is its own event log: every message for the client is
// appended to the stream it belongs to, with the id "<stream>_<seq>", and
// kept for a window. A writer (an HTTP response) attaches to a stream and
// writes the events after its cursor. A later attachment (a GET with
// Last-Event-ID) takes the stream over, pending and future events
// included, and the earlier writer stops. Appending never blocks, so a
// client that stops reading costs its own stream's memory (bounded by the
// session's byte budget), never the upstream's progress. The budget bounds
// what waits, not one message: a message larger than the whole budget
// still reaches a client that reads it. When the budget or the window
// forces events out, a response is replaced by a small error response for
// the same id and the writer reports the gap, so nothing is skipped
// silently.
//
// Table, Session and Stream are safe for concurrent use.
package session

import (
	"crypto/rand"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Stream is one SSE stream of a session and the log of its events. Get one
// from Session.NewStream, Session.GET or Session.Stream; the zero value is
// not usable.
type Stream struct {
	id   string
	sess *Session

	mu      sync.Mutex
	events  []event
	next    int // seq of the last event appended
	sentSeq int // seq of the last event a writer sent
	lost    int // seq of the last event dropped before a writer read it
	gen     uint64
	wake    chan struct{} // closed on every change; then replaced
	want    map[string]bool
	gone    map[string]bool // ids the client cancelled while awaited; their late responses are dropped
	done    bool
	touched time.Time
}

type event struct {
	seq  int
	data []byte
	at   time.Time
	resp []byte // the id, when the event is a response
	shed bool   // a response already replaced by its error response, which cannot shrink further
}

// Event is one SSE event a writer sends: its id ("<stream>_<seq>") and
// the JSON-RPC message.
type Event struct {
	ID   string
	Data []byte
}

// ID returns the stream's id, the first half of its event ids.
func (st *Stream) ID() string { return st.id }

// Append adds a message for the client to the stream. A response settles
// the request it answers; a POST stream whose awaited requests are all
// answered ends, and its writer stops once it has sent everything. Append
// returns false when the stream has ended, and the caller then routes the
// message elsewhere. A response to a request the client cancelled (see
// Cancel) is dropped, and Append returns true because the message needs no
// other home.
func (st *Stream) Append(m *jsonrpc.Message) bool {
	now := time.Now()
	st.mu.Lock()
	if m.IsResponse() && st.gone[jsonrpc.Key(m.ID)] {
		// The client cancelled this request, so nobody waits for the
		// response.
		delete(st.gone, jsonrpc.Key(m.ID))
		st.mu.Unlock()
		spill.Release(m.Raw) // free the long strings it spilled to disk
		return true
	}
	if st.done {
		st.mu.Unlock()
		return false
	}
	st.next++
	ev := event{seq: st.next, data: m.Raw, at: now}
	if m.IsResponse() {
		ev.resp = m.ID
		delete(st.want, jsonrpc.Key(m.ID))
		if st.want != nil && len(st.want) == 0 {
			st.done = true
		}
	}
	st.events = append(st.events, ev)
	st.touched = now
	st.broadcastLocked()
	st.mu.Unlock()
	// The budget bounds what waits, not one message: the event just
	// appended is never what makes room, so one larger than the whole
	// budget still reaches a client that reads it.
	st.sess.grew(len(m.Raw), st, ev.seq)
	return true
}

// Await records the ids of the requests this POST stream must answer
// before it ends.
func (st *Stream) Await(ids [][]byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.want == nil {
		st.want = map[string]bool{}
	}
	for _, id := range ids {
		st.want[jsonrpc.Key(id)] = true
	}
}

// Cancel settles an awaited request the client cancelled: no response
// will come (the spec has the server send none), so a POST stream left
// with nothing to await ends, and a response arriving later is dropped.
// It reports whether the stream awaited id.
func (st *Stream) Cancel(id []byte) bool {
	k := jsonrpc.Key(id)
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.want[k] {
		return false
	}
	delete(st.want, k)
	if st.gone == nil {
		st.gone = map[string]bool{}
	}
	st.gone[k] = true
	if len(st.want) == 0 {
		st.done = true
		st.broadcastLocked()
	}
	return true
}

// Unanswered returns how many awaited requests have no response yet.
func (st *Stream) Unanswered() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.want)
}

// Finish ends the stream: no more events are appended, and its writer
// stops once it has sent what is there. It is safe to call more than once.
func (st *Stream) Finish() {
	st.mu.Lock()
	st.done = true
	st.broadcastLocked()
	st.mu.Unlock()
}

func (st *Stream) broadcastLocked() {
	close(st.wake)
	st.wake = make(chan struct{})
}

// Attach makes the caller the stream's writer and returns the generation
// to pass to Next. An earlier writer's Next then reports that it is no
// longer the owner, so it stops. Where the new writer starts is the cursor
// it passes to Next.
func (st *Stream) Attach() (gen uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.gen++
	st.touched = time.Now()
	st.broadcastLocked()
	return st.gen
}

// Batch is what a writer reads from its stream in one call of Next.
type Batch struct {
	Events []Event
	// Gap reports that events after the writer's cursor were dropped
	// before anyone read them (responses among them were replaced by error
	// responses, which are in Events).
	Gap bool
	// Done reports that the stream has ended and Events is the last of it.
	Done bool
	// Owner is false when another writer took the stream over.
	Owner bool
	// Wake is closed when there is more to read.
	Wake <-chan struct{}
}

// Next returns the events after cursor (a seq) for the writer of gen, the
// generation Attach returned. When another writer has attached since,
// Owner is false and the batch holds no events.
func (st *Stream) Next(gen uint64, cursor int) Batch {
	st.mu.Lock()
	defer st.mu.Unlock()
	b := Batch{Owner: gen == st.gen, Wake: st.wake}
	if !b.Owner {
		return b
	}
	first := st.next + 1 // the oldest seq still held
	if len(st.events) > 0 {
		first = st.events[0].seq
	}
	b.Gap = cursor < st.lost || cursor+1 < first
	// Events are in seq order: start at the first one after the cursor.
	i := sort.Search(len(st.events), func(i int) bool { return st.events[i].seq > cursor })
	for _, ev := range st.events[i:] {
		b.Events = append(b.Events, Event{ID: st.id + "_" + strconv.Itoa(ev.seq), Data: ev.data})
	}
	b.Done = st.done
	return b
}

// Sent records that a writer sent the events up to seq; a writer that
// attaches without a Last-Event-ID starts after the last one sent.
func (st *Stream) Sent(seq int) {
	st.mu.Lock()
	st.sentSeq = max(st.sentSeq, seq)
	st.mu.Unlock()
}

// Resume returns the cursor of a writer that attaches without a
// Last-Event-ID: the seq of the last event a writer sent.
func (st *Stream) Resume() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sentSeq
}

// Seq splits an event id "<stream>_<seq>" into the stream's id and the
// sequence number. ok is false when eventID does not have that form or
// seq is negative.
func Seq(eventID string) (stream string, seq int, ok bool) {
	stream, n, found := strings.Cut(eventID, "_")
	seq, err := strconv.Atoi(n)
	if !found || err != nil || seq < 0 {
		return "", 0, false
	}
	return stream, seq, true
}

// prune forgets events older than the window and returns the bytes freed.
// A response is not forgotten but replaced by an error response for its
// id, kept until tombLife, so that a client that slept through the window
// learns its request failed when it resumes instead of waiting for ever.
func (st *Stream) prune(now time.Time, window, tombLife time.Duration) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	freed := 0
	kept := st.events[:0]
	for _, ev := range st.events {
		age := now.Sub(ev.at)
		switch {
		case age <= window:
		case ev.resp != nil && !ev.shed:
			tomb := lostResponse(ev.resp, "the client did not read it within the proxy's replay window ("+window.String()+")")
			freed += len(ev.data) - len(tomb)
			spill.Release(ev.data) // free the long strings it spilled to disk
			ev.data, ev.shed = tomb, true
			st.lost = max(st.lost, ev.seq)
		case ev.resp != nil && age <= tombLife:
		default:
			freed += len(ev.data)
			spill.Release(ev.data)
			st.lost = max(st.lost, ev.seq)
			continue
		}
		kept = append(kept, ev)
	}
	clear(st.events[len(kept):])
	st.events = kept
	return freed
}

// lostResponse is the error response that replaces a response dropped
// before a client read it.
func lostResponse(id []byte, why string) []byte {
	return jsonrpc.ErrorResponse(id, jsonrpc.CodeInternalError, "the response was dropped: "+why).Raw
}

// shed drops the stream's oldest event, except event skip (a seq; 0 skips
// none), to bring the session under its budget. A response is replaced by
// an error response for the same id, so that the client learns it is lost;
// any other event is removed. It returns the bytes freed and the time the
// event was appended; ok is false when there was nothing to shed.
func (st *Stream) shed(skip int) (freed int, at time.Time, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, ev := range st.events {
		if ev.shed || ev.seq == skip {
			continue
		}
		spill.Release(ev.data) // free the long strings it spilled to disk
		if ev.resp != nil {
			tomb := lostResponse(ev.resp, "the client did not read it within the proxy's buffer")
			st.events[i].data, st.events[i].shed = tomb, true
			st.lost = max(st.lost, ev.seq)
			return len(ev.data) - len(tomb), ev.at, true
		}
		// Remove it in place. The oldest event is most often the first,
		// and removing the first costs nothing, which matters because a
		// flooded stream sheds once per append.
		if i == 0 {
			st.events[0] = event{}
			st.events = st.events[1:]
		} else {
			copy(st.events[i:], st.events[i+1:])
			st.events[len(st.events)-1] = event{}
			st.events = st.events[:len(st.events)-1]
		}
		st.lost = max(st.lost, ev.seq)
		return len(ev.data), ev.at, true
	}
	return 0, time.Time{}, false
}

// oldest returns the time of the stream's oldest event that can still be
// shed, not counting event skip; ok is false when there is none.
func (st *Stream) oldest(skip int) (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, ev := range st.events {
		if !ev.shed && ev.seq != skip {
			return ev.at, true
		}
	}
	return time.Time{}, false
}

// idle reports whether the stream holds no events and has not been used
// for longer than window.
func (st *Stream) idle(now time.Time, window time.Duration) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.events) == 0 && now.Sub(st.touched) > window
}

func newStreamID() string { return rand.Text()[:12] }
