package mcpproxy

import (
	"crypto/rand"
	"github.com/spillway-dev/spillway/mcpproxy/internal/sse"
	"strconv"
	"strings"
	"sync"
	"time"
)

// eventLog keeps what a session-era session sent on its SSE streams, so
// a client that lost a stream replays what it missed by reconnecting
// with Last-Event-ID. It is bounded by age (the window) and by bytes;
// a client that never comes back costs nothing once the window passed.
// Safe for concurrent use.
type eventLog struct {
	window   time.Duration
	maxBytes int

	mu      sync.Mutex
	streams map[string]*streamLog
	bytes   int
}

type streamLog struct {
	next   int
	events []loggedEvent
}

type loggedEvent struct {
	seq  int
	data []byte
	at   time.Time
}

func newEventLog(window time.Duration, maxBytes int) *eventLog {
	return &eventLog{window: window, maxBytes: maxBytes, streams: map[string]*streamLog{}}
}

// newStreamID names a stream; ids are "<stream>_<seq>".
func newStreamID() string { return rand.Text()[:12] }

// add records data as the next event of stream and returns its id.
func (l *eventLog) add(stream string, data []byte) string {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneLocked(now)
	s := l.streams[stream]
	if s == nil {
		s = &streamLog{}
		l.streams[stream] = s
	}
	s.next++
	s.events = append(s.events, loggedEvent{seq: s.next, data: data, at: now})
	l.bytes += len(data)
	for l.bytes > l.maxBytes && l.dropOldestLocked() {
	}
	return stream + "_" + strconv.Itoa(s.next)
}

// after returns the events of id's stream that came after it. ok is
// false when the stream is unknown or already forgotten.
func (l *eventLog) after(id string) (events []sse.Event, ok bool) {
	stream, n, found := strings.Cut(id, "_")
	seq, err := strconv.Atoi(n)
	if !found || err != nil {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneLocked(time.Now())
	s := l.streams[stream]
	if s == nil {
		return nil, false
	}
	for _, e := range s.events {
		if e.seq > seq {
			events = append(events, sse.Event{ID: stream + "_" + strconv.Itoa(e.seq), Data: e.data})
		}
	}
	return events, true
}

func (l *eventLog) pruneLocked(now time.Time) {
	for id, s := range l.streams {
		i := 0
		for i < len(s.events) && now.Sub(s.events[i].at) > l.window {
			l.bytes -= len(s.events[i].data)
			i++
		}
		s.events = s.events[i:]
		if len(s.events) == 0 {
			delete(l.streams, id)
		}
	}
}

// dropOldestLocked forgets the oldest event of all streams.
func (l *eventLog) dropOldestLocked() bool {
	var oldest *streamLog
	var oldestID string
	for id, s := range l.streams {
		if len(s.events) > 0 && (oldest == nil || s.events[0].at.Before(oldest.events[0].at)) {
			oldest, oldestID = s, id
		}
	}
	if oldest == nil {
		return false
	}
	l.bytes -= len(oldest.events[0].data)
	oldest.events = oldest.events[1:]
	if len(oldest.events) == 0 {
		delete(l.streams, oldestID)
	}
	return true
}

// prune forgets what is older than the window.
func (l *eventLog) prune() {
	l.mu.Lock()
	l.pruneLocked(time.Now())
	l.mu.Unlock()
}

// held is how many bytes the log holds.
func (l *eventLog) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}
