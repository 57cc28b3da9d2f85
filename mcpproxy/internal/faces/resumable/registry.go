// Package resumable implements resumable streams (the draft "Streams"
// proposal: notifications/stream/create and /end, stream/resume,
// stream/poll, stream/poll/all, abandonment) in front of every face, so
// that they work alike whichever upstream a request goes to.
//
// It is opt-in: a client declares capabilities.streams (in initialize,
// or in a 2026-07-28 request's _meta capabilities) and Spillway declares
// streams.resumeInterval back (Registry.Declare). A client that declares
// nothing reaches the face untouched.
//
// For an opted-in client, each tools/call, prompts/get, resources/read
// and completion/complete it sends over HTTP runs apart from the client's
// connection: the face serves it under a context of its own, its output
// is read back message by message (long strings through the spill
// Spooler, so they wait on disk) into the request's Stream, and the
// client's connection is only the Stream's current reader. When the
// connection drops the request goes on, and its messages wait, within a
// per-stream and a process-wide bound, until stream/resume takes them or
// the stream is abandoned. Over stdio the pipe never drops: streams there
// only frame a request's messages and answer poll and resume.
//
// The wire contract (ids, ordering, errors, what "received" means) is in
// the package README.
package resumable

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// CodeUnknownStream answers stream/resume and stream/poll for an id that
// is unknown, abandoned, freed after its end was delivered, or another
// caller's: the same answer in every case, so an id says nothing to
// whoever does not own it.
const CodeUnknownStream = -32011

// Defaults of Options.
const (
	DefaultResumeMin  = time.Second
	DefaultResumeMax  = 5 * time.Minute
	DefaultStreamMax  = 1 << 20
	DefaultTotalMax   = 64 << 20
	DefaultMaxStreams = 10_000
)

// Options configure a Registry. Every field may be zero.
type Options struct {
	// ResumeMin and ResumeMax are the resumeInterval Spillway declares,
	// in whole seconds on the wire: a stream with no connection, poll or
	// resume for ResumeMax is abandoned.
	ResumeMin, ResumeMax time.Duration
	// StreamMax bounds the bytes one stream's waiting messages hold in
	// memory (long strings spilled to disk not counted); TotalMax those
	// of every stream together; MaxStreams the streams open at once (a
	// tenant may hold half of them; with inbound auth off, all).
	StreamMax, TotalMax int64
	MaxStreams          int
	// MaxBody caps a client's POST body as the faces do.
	MaxBody int64
	// MaxMessage caps one message read back from the face (its inline
	// part, with Spool).
	MaxMessage int64
	// Spool reads the face's output back: long strings wait on disk.
	// nil: messages are held in memory whole.
	Spool *spill.Spooler
	// Methods tells which clients declared streams (their session's
	// initialize). Required for HTTP.
	Methods *ownmethods.Methods
	// KeepAlive is how often a connection reading an idle stream gets
	// an SSE comment. Default 15 s; negative: never.
	KeepAlive time.Duration
	// WriteStall cuts a client that stops reading for this long (its
	// stream is then detached, as by a dropped connection). Default 30 s;
	// negative: never.
	WriteStall time.Duration
	Logger     *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.ResumeMin <= 0 {
		o.ResumeMin = DefaultResumeMin
	}
	if o.ResumeMax <= 0 {
		o.ResumeMax = DefaultResumeMax
	}
	o.ResumeMax = max(o.ResumeMax, o.ResumeMin)
	if o.StreamMax <= 0 {
		o.StreamMax = DefaultStreamMax
	}
	if o.TotalMax <= 0 {
		o.TotalMax = DefaultTotalMax
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 20
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.WriteStall == 0 {
		o.WriteStall = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// owner is who may see a stream: the tenant, and in the session era the
// session (on stdio, the connection).
type owner struct{ tenant, session string }

// Registry holds the open streams. Create it with New; it is safe for
// concurrent use. Close abandons every stream.
type Registry struct {
	o   Options
	log *slog.Logger

	total atomic.Int64 // bytes held by every stream

	mu        sync.Mutex
	streams   map[string]*Stream     // by id
	byRequest map[requestKey]*Stream // by owner and request id, for cancellation
	perTenant map[string]int         // streams open by tenant
	// lingering are delivered streams kept a while (Stream.linger),
	// oldest first; they count toward no bound but TotalMax.
	lingering *list.List // of *Stream
	closed    bool
}

// requestKey finds the stream of an owner's request by its id.
type requestKey struct {
	owner owner
	id    string // jsonrpc.Key of the request id
}

// New returns an empty Registry.
func New(o Options) *Registry {
	o = o.withDefaults()
	return &Registry{o: o, log: o.Logger, streams: map[string]*Stream{}, byRequest: map[requestKey]*Stream{}, perTenant: map[string]int{}, lingering: list.New()}
}

// Declare returns the capability Spillway declares to a client whose
// capabilities are client ("" and nil when it did not declare streams):
// for ownmethods.Options.Declare.
func (reg *Registry) Declare(client []byte) (string, []byte) {
	if !declares(client) {
		return "", nil
	}
	return "streams", []byte(`{"resumeInterval":{"min":` + seconds(reg.o.ResumeMin) + `,"max":` + seconds(reg.o.ResumeMax) + `}}`)
}

// declares reports whether capabilities declare streams (an object).
func declares(caps []byte) bool {
	s := jsonrpc.RawMember(caps, "streams")
	return len(s) > 0 && s[0] == '{'
}

// newID returns 128 random bits as 32 hex digits.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// open registers a new stream of o's request id; nil when MaxStreams
// are open or the registry is closed.
func (reg *Registry) open(o owner, requestID []byte) *Stream {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.closed || len(reg.streams)-reg.lingering.Len() >= reg.o.MaxStreams || reg.perTenant[o.tenant] >= reg.tenantMax(o.tenant) {
		return nil
	}
	reg.perTenant[o.tenant]++
	s := &Stream{id: newID(), reg: reg, owner: o, requestID: requestID, wake: make(chan struct{}), next: 1, counted: true}
	reg.streams[s.id] = s
	reg.byRequest[requestKey{o, jsonrpc.Key(requestID)}] = s
	return s
}

// tenantMax is how many streams one tenant may hold: half of MaxStreams,
// so that one tenant abandoning streams cannot refuse every other's; all
// of them for "", the one tenant when inbound auth is off.
func (reg *Registry) tenantMax(tenant string) int {
	if tenant == "" {
		return reg.o.MaxStreams
	}
	return max(reg.o.MaxStreams/2, 1)
}

// get returns o's stream id, or nil: unknown and foreign ids alike.
func (reg *Registry) get(id string, o owner) *Stream {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if s := reg.streams[id]; s != nil && s.owner == o {
		return s
	}
	return nil
}

// ofRequest returns o's stream of the request id, or nil.
func (reg *Registry) ofRequest(o owner, id []byte) *Stream {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.byRequest[requestKey{o, jsonrpc.Key(id)}]
}

// list returns o's streams.
func (reg *Registry) list(o owner) []*Stream {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	var out []*Stream
	for _, s := range reg.streams {
		if s.owner == o {
			out = append(out, s)
		}
	}
	return out
}

// remove forgets s; it reports whether s was still registered.
func (reg *Registry) remove(s *Stream) bool {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.streams[s.id] != s {
		return false
	}
	delete(reg.streams, s.id)
	reg.uncount(s)
	if s.lingerAt != nil {
		reg.lingering.Remove(s.lingerAt)
		s.lingerAt = nil
	}
	k := requestKey{s.owner, jsonrpc.Key(s.requestID)}
	if reg.byRequest[k] == s {
		delete(reg.byRequest, k)
	}
	return true
}

// uncount takes s out of its tenant's share (under reg.mu), once.
func (reg *Registry) uncount(s *Stream) {
	if !s.counted {
		return
	}
	s.counted = false
	if reg.perTenant[s.owner.tenant]--; reg.perTenant[s.owner.tenant] <= 0 {
		delete(reg.perTenant, s.owner.tenant)
	}
}

// linger keeps s, delivered, out of the count of open streams; past
// MaxStreams lingering ones the oldest is freed.
func (reg *Registry) linger(s *Stream) {
	reg.mu.Lock()
	var oldest *Stream
	if reg.streams[s.id] == s && s.lingerAt == nil {
		reg.uncount(s)
		s.lingerAt = reg.lingering.PushBack(s)
		if reg.lingering.Len() > reg.o.MaxStreams {
			oldest = reg.lingering.Front().Value.(*Stream)
		}
	}
	reg.mu.Unlock()
	if oldest != nil {
		oldest.free()
	}
}

// reclaim frees lingering streams, oldest first, until need more bytes
// fit TotalMax or none lingers: a delivered stream's copy gives way to
// messages that wait.
func (reg *Registry) reclaim(need int64) {
	for reg.total.Load()+need > reg.o.TotalMax {
		reg.mu.Lock()
		var oldest *Stream
		if f := reg.lingering.Front(); f != nil {
			oldest = f.Value.(*Stream)
		}
		reg.mu.Unlock()
		if oldest == nil {
			return
		}
		oldest.free()
	}
}

// Len returns the number of open streams.
func (reg *Registry) Len() int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return len(reg.streams)
}

// Held returns the bytes every stream holds in memory.
func (reg *Registry) Held() int64 { return reg.total.Load() }

// Close abandons every stream (their requests are cancelled) and refuses
// new ones.
func (reg *Registry) Close() {
	reg.mu.Lock()
	reg.closed = true
	all := make([]*Stream, 0, len(reg.streams))
	for _, s := range reg.streams {
		all = append(all, s)
	}
	reg.mu.Unlock()
	for _, s := range all {
		s.abandon()
	}
}

func seconds(d time.Duration) string {
	return jsonNumber(int64((d + time.Second - 1) / time.Second))
}
