package binary

import (
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/binframe"
)

// maxRefs bounds the stream ids remembered for resources/stream: past it
// the oldest is forgotten (its bytes stay at the item's httpUrl).
const maxRefs = 100_000

// refTTL is how long a stream id of an artifact with no expiry resolves.
const refTTL = time.Hour

// refs maps the stream ids of binary items read from the store to their
// artifact's URI, for resources/stream, each bound to the tenant it was
// minted for and resolving until the artifact expires. Only Spillway
// mints the ids (128 random bits): a client can look one up, never add
// one. Safe for concurrent use; the zero value is not usable (newRefs).
type refs struct {
	mu    sync.Mutex
	by    map[binframe.StreamID]ref
	order []binframe.StreamID // oldest first
}

type ref struct {
	tenant, uri string
	expires     time.Time
}

func newRefs() *refs { return &refs{by: map[binframe.StreamID]ref{}} }

// add remembers id as tenant's name for the artifact at uri.
func (t *refs) add(tenant string, id binframe.StreamID, uri string, expires time.Time) {
	if expires.IsZero() {
		expires = time.Now().Add(refTTL)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.order) >= maxRefs {
		delete(t.by, t.order[0])
		t.order = t.order[1:]
	}
	t.by[id] = ref{tenant: tenant, uri: uri, expires: expires}
	t.order = append(t.order, id)
}

// lookup returns the artifact URI id names for tenant; ok is false for an
// unknown, expired or another tenant's id alike.
func (t *refs) lookup(tenant string, id binframe.StreamID) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.by[id]
	if !ok || r.tenant != tenant || !time.Now().Before(r.expires) {
		return "", false
	}
	return r.uri, true
}
