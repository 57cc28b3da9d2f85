package resumable

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Stream is one request's messages on their way to the client. Its
// entries are numbered from 1 in the order they came; those written to a
// connection (sent) are a prefix of them, as delivery goes in order.
// Sent entries stay (so that a resume naming the last id a client
// processed gets what was in flight) until acknowledged by such a resume,
// pushed out by the bound, or the stream is freed; unsent ones are never
// dropped: past a bound the stream fails instead, visibly.
type Stream struct {
	id        string
	reg       *Registry
	owner     owner
	requestID []byte
	// cancelCall ends the request's run on the face; cancelUp tells the
	// upstream first, where the era needs it. Set once, before the
	// stream is visible to other goroutines' pushes.
	cancelCall context.CancelFunc
	cancelUp   func()

	// counted: the stream counts toward its tenant's share (under
	// reg.mu); a delivered one lingers uncounted.
	counted bool
	// lingerAt is the stream's place among the registry's lingering
	// ones (under reg.mu), nil when it does not linger.
	lingerAt *list.Element

	mu       sync.Mutex
	entries  []entry
	next     uint64 // the number of the next entry
	bytes    int64
	done     bool // the end notification is the last entry
	answered bool // the request's response is among the entries
	stopped  bool // cancelled, failed or abandoned: no further push
	failed   bool
	freed    bool
	gen      uint64 // bumped by every attach: the connection reading
	attached bool
	wake     chan struct{} // closed when entries or state change
	timer    *time.Timer   // abandonment, while detached
}

type entry struct {
	seq     uint64
	raw     []byte
	sent    bool
	request bool // a server-to-client request
	isError bool // an error response
}

// errTakenOver ends a connection whose stream a later resume took.
var errTakenOver = errors.New("resumable: the stream was taken over by a later resume")

// push appends a message the face wrote for the request. Past a bound,
// sent entries make room first; if unsent ones alone pass it, the stream
// fails.
func (s *Stream) push(m *jsonrpc.Message) {
	s.reg.reclaim(int64(len(m.Raw)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.done {
		spill.Release(m.Raw)
		return
	}
	size := int64(len(m.Raw))
	for len(s.entries) > 0 && s.entries[0].sent && s.over(size) {
		s.dropFirst()
	}
	// The bounds are on what waits: one message larger than they are
	// passes to a client reading with nothing else pending (it is held
	// only as long as the face would hold it anyway).
	if s.over(size) && !(s.attached && len(s.entries) == 0) {
		spill.Release(m.Raw)
		s.failLocked(fmt.Sprintf("the stream passed its bound of %d bytes (or all streams theirs of %d): its request was cancelled",
			s.reg.o.StreamMax, s.reg.o.TotalMax))
		return
	}
	if m.IsResponse() && jsonrpc.Key(m.ID) == jsonrpc.Key(s.requestID) {
		s.answered = true
	}
	s.appendLocked(m.Raw, m.IsRequest(), m.IsResponse() && m.Error != nil)
}

// over reports whether size more bytes pass the stream's or the
// registry's bound.
func (s *Stream) over(size int64) bool {
	return s.bytes+size > s.reg.o.StreamMax || s.reg.total.Load()+size > s.reg.o.TotalMax
}

func (s *Stream) appendLocked(raw []byte, request, isError bool) {
	if s.freed { // abandoned: what its run still writes is lost with it
		spill.Release(raw)
		return
	}
	s.entries = append(s.entries, entry{seq: s.next, raw: raw, request: request, isError: isError})
	s.next++
	s.bytes += int64(len(raw))
	s.reg.total.Add(int64(len(raw)))
	s.signalLocked()
}

func (s *Stream) signalLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Stream) dropFirst() {
	e := s.entries[0]
	s.entries[0] = entry{}
	s.entries = s.entries[1:]
	s.bytes -= int64(len(e.raw))
	s.reg.total.Add(-int64(len(e.raw)))
	spill.Release(e.raw)
}

// failLocked ends the stream with an error response for its request, and
// cancels the request.
func (s *Stream) failLocked(why string) {
	s.failed = true
	if !s.answered {
		s.answered = true
		s.appendLocked(jsonrpc.ErrorResponse(s.requestID, jsonrpc.CodeUpstream, why).Raw, false, true)
	}
	s.endLocked()
	s.stopLocked()
}

// stopLocked cancels the request's run (telling the upstream) once.
func (s *Stream) stopLocked() {
	if stop := s.stopperLocked(); stop != nil {
		go stop()
	}
}

// stopperLocked marks the stream stopped and returns what cancels its
// run (nil when already stopped or there is none).
func (s *Stream) stopperLocked() func() {
	if s.stopped {
		return nil
	}
	s.stopped = true
	cu, cc := s.cancelUp, s.cancelCall
	if cc == nil {
		return nil
	}
	return func() {
		if cu != nil {
			cu()
		}
		cc()
	}
}

// finish is called when the face's output ended: the stream ends, with an
// error response first when the request got no answer and was not
// cancelled.
func (s *Stream) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	if !s.answered && !s.stopped {
		s.answered = true
		s.appendLocked(jsonrpc.ErrorResponse(s.requestID, jsonrpc.CodeUpstream, "the request ended without an answer").Raw, false, true)
	}
	s.endLocked()
}

func (s *Stream) endLocked() {
	if s.done {
		return
	}
	s.done = true
	s.appendLocked(endNotification(s.id), false, false)
}

// cancel stops the request at the client's word (notifications/cancelled
// it sent, which the face passes on): its stream then ends.
func (s *Stream) cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.done {
		return
	}
	s.stopped = true
	s.answered = true // a cancelled request is not answered
	if s.cancelCall != nil {
		go s.cancelCall()
	}
}

// attach makes the caller's connection the stream's reader and returns
// its generation and the number after which it starts. With lastID set,
// entries up to it are acknowledged (dropped) and the connection gets
// every later one; without, every unsent one.
func (s *Stream) attach(lastID uint64, hasLast bool) (gen, after uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.gen++
	s.attached = true
	s.signalLocked() // a connection that had it sees it taken
	if hasLast {
		for len(s.entries) > 0 && s.entries[0].seq <= lastID {
			s.dropFirst()
		}
		return s.gen, lastID
	}
	for _, e := range s.entries {
		if !e.sent {
			return s.gen, e.seq - 1
		}
	}
	return s.gen, s.next - 1
}

// detach records that connection gen no longer reads: the abandonment
// clock starts.
func (s *Stream) detach(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || !s.attached {
		return
	}
	s.attached = false
	s.armLocked()
}

// armLocked (re)starts the abandonment clock of a detached stream.
func (s *Stream) armLocked() {
	if s.freed || s.attached {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(s.reg.o.ResumeMax, s.abandon)
}

// abandon reclaims a stream nobody read, polled or resumed for
// ResumeMax: its request is cancelled if still running, its memory freed.
func (s *Stream) abandon() {
	s.mu.Lock()
	if s.attached && !s.reg.isClosed() {
		s.mu.Unlock()
		return
	}
	var stop func()
	if !s.done {
		stop = s.stopperLocked()
	}
	s.mu.Unlock()
	s.free() // unknown before its run learns it is cancelled
	if stop != nil {
		stop()
	}
}

// free forgets the stream and releases what it holds.
func (s *Stream) free() {
	s.reg.remove(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed {
		return
	}
	s.freed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	for len(s.entries) > 0 {
		s.dropFirst()
	}
	s.signalLocked()
}

// sink is a connection a stream is written to: write writes one entry
// (seq 0: without an id), ping keeps an idle connection open.
type sink interface {
	write(seq uint64, raw []byte) error
	ping() error
}

// setCancel sets how the request's run is cancelled (cancelUp may be
// nil), before anything can cancel it.
func (s *Stream) setCancel(cancelCall context.CancelFunc, cancelUp func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelCall, s.cancelUp = cancelCall, cancelUp
}

// serve writes the stream's entries after after to connection gen, in
// order, as they come, until the end is written (then the stream is
// freed: all was delivered), ctx ends, a write fails, or a later attach
// takes the stream (errTakenOver). An idle connection is pinged every
// KeepAlive.
func (s *Stream) serve(ctx context.Context, gen, after uint64, out sink) error {
	var idle <-chan time.Time
	if ka := s.reg.o.KeepAlive; ka > 0 {
		t := time.NewTicker(ka)
		defer t.Stop()
		idle = t.C
	}
	for {
		s.mu.Lock()
		if s.gen != gen || s.freed {
			s.mu.Unlock()
			return errTakenOver
		}
		var batch []entry
		for _, e := range s.entries {
			if e.seq > after {
				batch = append(batch, e)
			}
		}
		wake, delivered := s.wake, s.done && after >= s.next-1
		s.mu.Unlock()
		if delivered { // a resume of a stream whose end this client has
			return nil
		}
		if len(batch) == 0 {
			select {
			case <-wake:
				continue
			case <-idle:
				if err := out.ping(); err != nil {
					s.detach(gen)
					return err
				}
				continue
			case <-ctx.Done():
				s.detach(gen)
				return ctx.Err()
			}
		}
		for _, e := range batch {
			if err := out.write(e.seq, e.raw); err != nil {
				s.detach(gen)
				return err
			}
		}
		after = batch[len(batch)-1].seq
		if s.markSent(gen, after) {
			s.linger()
			return nil
		}
	}
}

// markSent marks the entries up to seq written (by whichever connection:
// a later resume without an id must not get them again), and reports
// whether connection gen, still the stream's reader, wrote the end.
func (s *Stream) markSent(gen, seq uint64) (ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.entries {
		if s.entries[i].seq <= seq {
			s.entries[i].sent = true
		}
	}
	return s.gen == gen && s.done && s.next-1 == seq
}

// linger keeps a stream whose end was written for a while (the draft's
// two minutes, within resumeInterval): a write that succeeded may not
// have reached a client whose connection was closing, and its resume
// from the last id it processed then gets the rest again. A lingering
// stream counts toward no bound but TotalMax, and gives way first.
func (s *Stream) linger() {
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return
	}
	s.attached = false
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(lingerFor(s.reg.o), s.free)
	s.mu.Unlock()
	s.reg.linger(s)
}

func lingerFor(o Options) time.Duration { return max(o.ResumeMin, min(o.ResumeMax, 2*time.Minute)) }

// PollResult is stream/poll's answer.
type PollResult struct {
	StreamID        string `json:"streamId"`
	Status          string `json:"status"` // "live" or "completed"
	PendingMessages bool   `json:"pendingMessages"`
	HasRequest      bool   `json:"hasRequest"`
	HasError        bool   `json:"hasError"`
}

// poll answers stream/poll; a detached stream's abandonment clock
// restarts.
func (s *Stream) poll() PollResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := PollResult{StreamID: s.id, Status: "live"}
	if s.done {
		r.Status = "completed"
	}
	for _, e := range s.entries {
		if !e.sent {
			r.PendingMessages = true
			r.HasRequest = r.HasRequest || e.request
			r.HasError = r.HasError || e.isError
		}
	}
	s.armLocked()
	return r
}

func (reg *Registry) isClosed() bool {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.closed
}

func endNotification(id string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"notifications/stream/end","params":{"streamId":"` + id + `"}}`)
}

func jsonNumber(n int64) string { return strconv.FormatInt(n, 10) }
