package artifact

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache holds artifact metadata and, within a byte budget, the bytes of small
// hot artifacts. Artifacts are immutable, so a cached entry is never stale;
// it only may outlive a deletion made on another replica, for at most MetaTTL
// (blobs are served only after the metadata is found). A deletion on this
// replica leaves a tombstone, so that a fetch in flight during the delete
// cannot cache the artifact again. A nil *Cache caches nothing. Safe for
// concurrent use.
type Cache struct {
	metas *expirable.LRU[string, Artifact]

	// mu guards blobs and used, and makes every add and every burial
	// atomic with respect to each other (check the tombstone, then add).
	mu       sync.Mutex
	tombs    *simplelru.LRU[string, time.Time] // id → when it was buried
	blobs    *simplelru.LRU[string, []byte]
	used     int64
	budget   int64
	maxEntry int64
}

// CacheOptions size a Cache. Zero fields take the defaults in brackets.
type CacheOptions struct {
	MetaEntries int           // metadata entries [10000]
	MetaTTL     time.Duration // how long a deletion elsewhere may go unseen [2s]
	BlobBudget  int64         // bytes of artifact content held [64 MiB]; <0 holds none
	BlobMax     int64         // largest artifact held [1 MiB]
}

// DefaultMetaTTL is how long cached metadata lives unless CacheOptions
// says otherwise: the bound on a deletion made on another replica going
// unseen here (README.md, "Revocation"). A Stat per hot artifact every 2 s is
// nothing to a store.
const DefaultMetaTTL = 2 * time.Second

// Tombstones outlive any store call that can be in flight when the delete
// happens (store calls are bounded far below a minute), and are bounded in
// number: the oldest go first.
const (
	tombTTL     = time.Minute
	tombEntries = 10000
)

// NewCache returns a cache sized by o.
func NewCache(o CacheOptions) *Cache {
	if o.MetaEntries <= 0 {
		o.MetaEntries = 10000
	}
	if o.MetaTTL <= 0 {
		o.MetaTTL = DefaultMetaTTL
	}
	if o.BlobBudget == 0 {
		o.BlobBudget = 64 << 20
	}
	if o.BlobMax <= 0 {
		o.BlobMax = 1 << 20
	}
	c := &Cache{
		metas:    expirable.NewLRU[string, Artifact](o.MetaEntries, nil, o.MetaTTL),
		budget:   max(o.BlobBudget, 0),
		maxEntry: min(o.BlobMax, o.BlobBudget),
	}
	// A negative budget disables blobs: maxEntry < 0 refuses every size,
	// the empty artifact included.
	// Entry count is bounded by the byte budget, not by the LRU's size.
	c.blobs, _ = simplelru.NewLRU[string, []byte](1<<30, func(_ string, b []byte) { c.used -= int64(len(b)) })
	c.tombs, _ = simplelru.NewLRU[string, time.Time](tombEntries, nil)
	return c
}

// buried reports whether id was deleted here within tombTTL. c.mu is held.
func (c *Cache) buried(id string) bool {
	t, ok := c.tombs.Peek(id)
	return ok && time.Since(t) < tombTTL
}

func (c *Cache) meta(id string) (Artifact, bool) {
	if c == nil {
		return Artifact{}, false
	}
	return c.metas.Get(id)
}

func (c *Cache) addMeta(a Artifact) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.buried(a.ID) {
		c.metas.Add(a.ID, a)
	}
}

// wantsBlob reports whether an artifact of size bytes may be cached.
func (c *Cache) wantsBlob(size int64) bool {
	return c != nil && size >= 0 && size <= c.maxEntry
}

func (c *Cache) blob(id string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blobs.Get(id)
}

func (c *Cache) addBlob(id string, b []byte) {
	if !c.wantsBlob(int64(len(b))) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blobs.Contains(id) || c.buried(id) {
		return
	}
	c.blobs.Add(id, b)
	c.used += int64(len(b))
	for c.used > c.budget && c.blobs.Len() > 0 {
		c.blobs.RemoveOldest()
	}
}

// bury marks id deleted: from now on nothing caches it again here. The
// caller removes what is cached once the store has deleted it.
func (c *Cache) bury(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.tombs.Add(id, time.Now())
	c.mu.Unlock()
}

func (c *Cache) remove(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.metas.Remove(id)
	c.blobs.Remove(id)
	c.mu.Unlock()
}
