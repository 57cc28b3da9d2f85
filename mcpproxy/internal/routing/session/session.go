package session

import (
	"crypto/rand"
	"sync"
	"time"
)

// Limits bound what one session holds.
type Limits struct {
	// Window is how long events stay replayable; default 2 minutes.
	Window time.Duration
	// Budget caps the bytes a session's streams hold; default 64 MiB.
	Budget int
}

func (l Limits) withDefaults() Limits {
	if l.Window <= 0 {
		l.Window = 2 * time.Minute
	}
	if l.Budget <= 0 {
		l.Budget = 64 << 20
	}
	return l
}

// Session is one session-era client: its id, the tenant that created it,
// its streams and whatever the face keeps with it (Value).
type Session struct {
	ID     string
	Tenant string
	// Value is the face's own state (its upstream connection); set before
	// the session is shared, read-only after.
	Value any

	lim Limits

	mu       sync.Mutex
	streams  map[string]*Stream
	get      *Stream // the standalone GET stream
	bytes    int
	lastUsed time.Time
	holders  int // writers attached now
	closed   bool
	onClose  []func()
}

func newSession(tenant string, lim Limits) *Session {
	s := &Session{ID: rand.Text(), Tenant: tenant, lim: lim, streams: map[string]*Stream{}, lastUsed: time.Now()}
	s.get = s.NewStream()
	return s
}

// NewStream opens a stream (for a POST); on a closed session, one that
// is finished already.
func (s *Session) NewStream() *Stream {
	st := &Stream{id: newStreamID(), sess: s, wake: make(chan struct{}), touched: time.Now()}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.streams[st.id] = st
		s.lastUsed = time.Now()
	}
	s.mu.Unlock()
	if closed {
		st.Finish()
	}
	return st
}

// GET is the session's standalone stream: server messages that belong to
// no open POST wait there for the client's GET.
func (s *Session) GET() *Stream { return s.get }

// Stream finds a stream of the session by id, for a resumption.
func (s *Session) Stream(id string) *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

// Cancel settles the request id the client cancelled on the POST stream
// awaiting it (see Stream.Cancel).
func (s *Session) Cancel(id []byte) {
	s.mu.Lock()
	sts := make([]*Stream, 0, len(s.streams))
	for _, st := range s.streams {
		sts = append(sts, st)
	}
	s.mu.Unlock()
	for _, st := range sts {
		if st.Cancel(id) {
			return
		}
	}
}

// Current is where a server message goes: the newest POST stream still
// open, else the GET stream.
func (s *Session) Current() *Stream {
	s.mu.Lock()
	var cands []*Stream
	for _, st := range s.streams {
		if st != s.get {
			cands = append(cands, st)
		}
	}
	s.mu.Unlock()
	var best *Stream
	var bestAt time.Time
	for _, st := range cands {
		st.mu.Lock()
		open, at := !st.done, st.touched
		st.mu.Unlock()
		if open && (best == nil || at.After(bestAt)) {
			best, bestAt = st, at
		}
	}
	if best == nil {
		return s.get
	}
	return best
}

// Touch marks the session used now.
func (s *Session) Touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// Hold marks the session in use (a writer is attached) until release is
// called: a session with a connection open is never idle.
func (s *Session) Hold() (release func()) {
	s.mu.Lock()
	s.holders++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.holders--
			s.lastUsed = time.Now()
			s.mu.Unlock()
		})
	}
}

// OnClose registers f to run once when the session closes.
func (s *Session) OnClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go f()
		return
	}
	s.onClose = append(s.onClose, f)
}

// Close ends every stream and runs the OnClose functions. Idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	fs := s.onClose
	// A copy: a request still opening a stream on the session may be
	// adding to the map (it then finds the session closed, or is in it).
	streams := make([]*Stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	for _, st := range streams {
		st.Finish()
	}
	for _, f := range fs {
		f()
	}
}

// Closed reports whether Close ran.
func (s *Session) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// grew accounts for n more bytes, appended to st as event seq, and sheds
// the oldest events, never that one, while the session is over budget.
func (s *Session) grew(n int, st *Stream, seq int) {
	s.mu.Lock()
	s.bytes += n
	over := s.bytes > s.lim.Budget
	s.mu.Unlock()
	for over {
		victim := s.oldestStream(st, seq)
		if victim == nil {
			return
		}
		skip := 0
		if victim == st {
			skip = seq
		}
		freed, _, ok := victim.shed(skip)
		if !ok {
			return
		}
		s.mu.Lock()
		s.bytes -= freed
		over = s.bytes > s.lim.Budget
		s.mu.Unlock()
	}
}

// oldestStream is the stream holding the session's oldest sheddable
// event, event seq of keep aside.
func (s *Session) oldestStream(keep *Stream, seq int) *Stream {
	s.mu.Lock()
	streams := make([]*Stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	var best *Stream
	var bestAt time.Time
	for _, st := range streams {
		skip := 0
		if st == keep {
			skip = seq
		}
		if at, ok := st.oldest(skip); ok && (best == nil || at.Before(bestAt)) {
			best, bestAt = st, at
		}
	}
	return best
}

// prune forgets events past the window (a response's error response
// lives until tombLife) and streams that ended long ago.
func (s *Session) prune(now time.Time, tombLife time.Duration) {
	s.mu.Lock()
	streams := make([]*Stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	freed := 0
	for _, st := range streams {
		freed += st.prune(now, s.lim.Window, tombLife)
	}
	s.mu.Lock()
	s.bytes -= freed
	for id, st := range s.streams {
		if st != s.get && st.idle(now, s.lim.Window) {
			st.mu.Lock()
			done := st.done
			st.mu.Unlock()
			if done {
				delete(s.streams, id)
			}
		}
	}
	s.mu.Unlock()
}

// Held is how many bytes the session's streams hold.
func (s *Session) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// idleFor is how long the session has had no writer attached and no use.
func (s *Session) idleFor(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders > 0 {
		return 0
	}
	return now.Sub(s.lastUsed)
}
