package offload

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/shrink"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Schemas holds the outputSchema of each tool of one upstream as one
// tenant was shown it (see Present): one table of Learned. The zero
// value is ready; it is safe for concurrent use. It holds at most
// maxTools tools and maxTableBytes bytes of schemas; a tool past them
// stays unknown (Lookup returns ErrUnknown).
type Schemas struct {
	mu     sync.Mutex
	byTool map[string]*toolSchema
	bytes  int // the raw schemas held, with their names
}

// toolSchema is one tool's outputSchema as presented, compiled on first
// use.
type toolSchema struct {
	raw  []byte
	once sync.Once
	s    *shrink.Schema
	err  error
}

// maxTools and maxTableBytes bound what the listings of one upstream to
// one tenant make the proxy hold.
const (
	maxTools      = 10000
	maxTableBytes = 16 << 20
)

// Present returns a tools/list result as the proxy shows it to clients,
// and learns each tool's outputSchema from it. Where an outputSchema
// refuses members it does not name (additionalProperties or
// unevaluatedProperties), at its top or behind the $ref and allOf Zod
// and pydantic put there (see shrink.AddProperty), it gets an optional
// NoteMember string property, so that a shrunk structuredContent
// carrying the note stays valid; every other byte is kept. A result it
// cannot read is returned as it is.
func (s *Schemas) Present(result []byte) []byte {
	out, tools, ok := withNoteProperty(result)
	if !ok {
		return result
	}
	s.learn(tools)
	return out
}

// listedTool is one tool of a tools/list result: its name, and its
// outputSchema as presented (nil: none).
type listedTool struct {
	name   string
	schema []byte
}

// withNoteProperty returns result with NoteMember added to each outputSchema
// that refuses it, and the tools the result lists; false when it has no
// tools array.
func withNoteProperty(result []byte) ([]byte, []listedTool, bool) {
	span, ok := jsonrpc.Member(result, "tools")
	if !ok || result[span[0]] != '[' {
		return nil, nil, false
	}
	var tools []listedTool
	var out []byte // nil until a schema is edited
	last := 0      // result[:last] is in out
	for _, el := range jsonrpc.Elements(result, span) {
		t := result[el[0]:el[1]]
		name := jsonrpc.StringMember(t, "name")
		if name == "" {
			continue
		}
		os, ok := jsonrpc.Member(t, "outputSchema")
		if !ok || t[os[0]] != '{' {
			tools = append(tools, listedTool{name, nil})
			continue
		}
		schema := t[os[0]:os[1]]
		if ns, changed := shrink.AddProperty(schema, NoteMember, noteProperty); changed {
			out = append(append(out, result[last:el[0]+os[0]]...), ns...)
			last, schema = el[0]+os[1], ns
		}
		tools = append(tools, listedTool{name, schema})
	}
	if out == nil {
		return result, tools, true
	}
	return append(out, result[last:]...), tools, true
}

// learn keeps the schemas of tools, a name listed twice the last, within
// maxTools and maxTableBytes.
func (s *Schemas) learn(tools []listedTool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byTool == nil {
		s.byTool = map[string]*toolSchema{}
	}
	for _, t := range tools {
		if old, known := s.byTool[t.name]; known {
			delete(s.byTool, t.name)
			s.bytes -= len(t.name) + len(old.raw)
		}
		n := len(t.name) + len(t.schema)
		if len(s.byTool) >= maxTools || s.bytes+n > maxTableBytes {
			continue // unknown: its large results are not cut
		}
		s.byTool[t.name] = &toolSchema{raw: t.schema}
		s.bytes += n
	}
}

// size is the bytes of schemas s holds.
func (s *Schemas) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// noteProperty is the NoteMember property Present adds to an
// outputSchema that refuses members it does not name.
var noteProperty = []byte(`{"type":"string","description":"Set by Spillway when the value is a shortened preview: what was moved out, and links to the full values."}`)

// Listed reports whether a tools/list result of the upstream named tool
// (among the first maxTools names learned).
func (s *Schemas) Listed(tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.byTool[tool]
	return ok
}

// Lookup returns the tool's schema as presented; nil when the tool has
// none. err is set when no shrunk value can be shown to pass the check a
// client may make: the tool is unknown (ErrUnknown: not listed, or past
// the bounds), or its schema does not compile (too large, too deep, a
// remote $ref).
func (s *Schemas) Lookup(tool string) (sch *shrink.Schema, err error) {
	s.mu.Lock()
	t, known := s.byTool[tool]
	s.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("tool %q: %w", tool, ErrUnknown)
	}
	if t.raw == nil {
		return nil, nil
	}
	t.once.Do(func() { t.s, t.err = shrink.Compile(t.raw) })
	return t.s, t.err
}

// ErrUnknown is returned by Lookup for a tool whose outputSchema the proxy
// does not know: no listing it saw named the tool, or the tool is past
// the bounds. A client may hold a schema for it all the same (a list
// cached from before a restart, or from another replica), so a large
// structuredContent of such a tool is never cut: its result becomes a
// tool error carrying the links, as for a schema that does not compile.
var ErrUnknown = errors.New("offload: the tool's outputSchema is unknown")

// ListFunc lists one page of an upstream's tools for one caller: it
// returns the result of tools/list for cursor ("" for the first page).
type ListFunc func(ctx context.Context, cursor string) (result []byte, err error)

// Key names one table of Learned: what one tenant was shown by one
// upstream.
type Key struct {
	Tenant string // the caller's tenant ("" when inbound auth is off)
	// Upstream names the upstream once the proxy serves several (the
	// gateway); "" while there is one.
	Upstream string
}

// The bounds of Learned: tables are dropped when unused for tableIdle,
// and the least recently used one goes when there are more than
// maxTables or their schemas hold more than maxLearnedBytes. A listing
// reads at most maxPages pages within listWait, and an unknown tool is
// listed for at most once per relistAfter per table.
const (
	maxTables       = 1024
	maxLearnedBytes = 64 << 20
	tableIdle       = time.Hour
	maxPages        = 20
	listWait        = 10 * time.Second
	relistAfter     = time.Second
)

// Learned holds what each tenant was shown of each upstream's tools, a
// Schemas per Key, so that one tenant's listing never decides how
// another's results are shrunk, and learns a tool it lacks by listing the
// upstream's tools as the caller (Ensure). Its tables are bounded (see
// maxTables, maxLearnedBytes, tableIdle); a dropped one is learned again
// when needed. The zero value is ready; it is safe for concurrent use.
type Learned struct {
	mu     sync.Mutex
	tables map[Key]*table
	lru    list.List // of *table, most recently used first
	now    func() time.Time
}

// table is one Key's Schemas, with its place in the LRU and its listing.
type table struct {
	key     Key
	s       Schemas
	used    time.Time
	at      *list.Element
	listing chan struct{} // closed when the listing in flight ends; nil if none
	listed  time.Time     // when the last listing ended
}

func (l *Learned) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// get returns k's table, made if create, and marks it used; it drops the
// tables past the bounds first. l.mu is held.
func (l *Learned) get(k Key, create bool) *table {
	now := l.clock()
	for e := l.lru.Back(); e != nil; e = l.lru.Back() {
		if t := e.Value.(*table); now.Sub(t.used) < tableIdle {
			break
		}
		l.drop(e.Value.(*table))
	}
	t := l.tables[k]
	switch {
	case t != nil:
		l.lru.MoveToFront(t.at)
	case !create:
		return nil
	default:
		if l.tables == nil {
			l.tables = map[Key]*table{}
		}
		t = &table{key: k}
		t.at = l.lru.PushFront(t)
		l.tables[k] = t
		for l.lru.Len() > maxTables {
			l.drop(l.lru.Back().Value.(*table))
		}
	}
	t.used = now
	return t
}

func (l *Learned) drop(t *table) {
	l.lru.Remove(t.at)
	delete(l.tables, t.key)
}

// Present is Schemas.Present on k's table; past maxLearnedBytes, the
// least recently used other tables are dropped.
func (l *Learned) Present(k Key, result []byte) []byte {
	l.mu.Lock()
	t := l.get(k, true)
	l.mu.Unlock()
	out := t.s.Present(result)
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	for e := l.lru.Front(); e != nil; e = e.Next() {
		total += e.Value.(*table).s.size()
	}
	for e := l.lru.Back(); total > maxLearnedBytes && e != nil; {
		prev := e.Prev()
		if o := e.Value.(*table); o != t {
			total -= o.s.size()
			l.drop(o)
		}
		e = prev
	}
	return out
}

// Listed is Schemas.Listed on k's table.
func (l *Learned) Listed(k Key, tool string) bool {
	l.mu.Lock()
	t := l.get(k, false)
	l.mu.Unlock()
	return t != nil && t.s.Listed(tool)
}

// Lookup is Schemas.Lookup on k's table: ErrUnknown when k has none.
func (l *Learned) Lookup(k Key, tool string) (*shrink.Schema, error) {
	l.mu.Lock()
	t := l.get(k, false)
	l.mu.Unlock()
	if t == nil {
		return nil, fmt.Errorf("tool %q: %w", tool, ErrUnknown)
	}
	return t.s.Lookup(tool)
}

// Ensure makes sure k's table knows tool before its result is shrunk or
// its call checked: when it does not, it lists the upstream's tools with
// list (every page, up to maxPages, within listWait), presenting each
// page to k's table and handing it to also (nil: none; the x-mcp-header
// bindings learn from the same listing), unless k's last listing ended
// less than relistAfter ago. Concurrent callers for k share one listing
// and each waits for it, until its ctx ends. A failed listing leaves what
// it did not reach unknown; so does a tool the listing does not name.
func (l *Learned) Ensure(ctx context.Context, k Key, tool string, list ListFunc, also func(result []byte)) {
	l.mu.Lock()
	t := l.get(k, true)
	if t.s.Listed(tool) {
		l.mu.Unlock()
		return
	}
	if wait := t.listing; wait != nil {
		l.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
		}
		return
	}
	if l.clock().Sub(t.listed) < relistAfter {
		l.mu.Unlock()
		return
	}
	done := make(chan struct{})
	t.listing = done
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		t.listing, t.listed = nil, l.clock()
		l.mu.Unlock()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(ctx, listWait)
	defer cancel()
	cursor := ""
	for range maxPages {
		result, err := list(ctx, cursor)
		if err != nil {
			return
		}
		if also != nil {
			also(result)
		}
		l.Present(k, result)
		if cursor = jsonrpc.StringMember(result, "nextCursor"); cursor == "" {
			return
		}
	}
}
