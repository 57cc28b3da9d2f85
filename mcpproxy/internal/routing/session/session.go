package session

import (
	"crypto/rand"
	"sync"
	"time"
)

// Limits bound what one session holds. A zero field takes its default.
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
// its streams and whatever the face keeps with it (Value). Get one from
// Table.Create; the zero value is not usable.
type Session struct {
	ID     string // random, set at creation
	Tenant string // the tenant that created it; only it may use the session
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

// NewStream opens a new stream for a POST. On a closed session it returns
// a stream that has already ended, so its writer stops at once instead of
// waiting for messages that will never come.
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

// GET returns the session's standalone stream, where server messages that
// belong to no open POST wait for the client's GET.
func (s *Session) GET() *Stream { return s.get }

// Stream returns the session's stream with the given id, for a client
// that resumes it, or nil when there is none.
func (s *Session) Stream(id string) *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

// Cancel tells the POST stream that awaits request id that the client
// cancelled it (see Stream.Cancel). It does nothing when no stream awaits
// id.
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

// Current returns the stream a server message should go to: of the POST
// streams still open, the one used most recently (opened, appended to or
// attached to), or the GET stream when none is open.
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

// Touch marks the session used now, which postpones its idle expiry.
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

// OnClose registers f to run once when the session closes; Close runs the
// functions in the order they were registered. On a session already
// closed, f runs at once in a goroutine of its own.
func (s *Session) OnClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go f()
		return
	}
	s.onClose = append(s.onClose, f)
}

// Close ends every stream of the session and runs the OnClose functions.
// It is safe to call more than once; only the first call does anything.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	fs := s.onClose
	// Finish the streams from a copy taken under the lock: a request
	// opening a stream meanwhile has either added it before the copy, or
	// finds the session closed and gets a finished stream.
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

// grew adds n bytes, appended to st as event seq, to the session's count,
// and sheds the session's oldest events while it is over budget. It never
// sheds event seq itself, so a message larger than the budget still
// reaches its client.
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

// oldestStream returns the stream holding the session's oldest event that
// can still be shed, not counting event seq of keep; nil when there is
// none.
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

// prune forgets events older than the window (a response's error response
// stays until tombLife) and the POST streams that ended and have been idle
// longer than the window.
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

// Held returns how many bytes the session's streams hold.
func (s *Session) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// idleFor returns how long the session has had no writer attached and no
// use (0 while a writer is attached).
func (s *Session) idleFor(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders > 0 {
		return 0
	}
	return now.Sub(s.lastUsed)
}
