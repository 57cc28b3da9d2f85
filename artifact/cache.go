package artifact

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache holds artifact metadata and, within a byte budget, the bytes of small
// hot artifacts. Artifacts are immutable, so a cached entry is never stale;
// it only may outlive a deletion made on another replica, for at most MetaTTL.
// A nil *Cache caches nothing. Safe for concurrent use.
type Cache struct {
	metas *expirable.LRU[string, Artifact]

	mu       sync.Mutex
	blobs    *simplelru.LRU[string, []byte]
	used     int64
	budget   int64
	maxEntry int64
}

// CacheOptions size a Cache. Zero fields take the defaults in brackets.
type CacheOptions struct {
	MetaEntries int           // metadata entries [10000]
	MetaTTL     time.Duration // how long a deletion elsewhere may go unseen [5s]
	BlobBudget  int64         // bytes of artifact content held [64 MiB]; <0 holds none
	BlobMax     int64         // largest artifact held [1 MiB]
}

// NewCache returns a cache sized by o.
func NewCache(o CacheOptions) *Cache {
	if o.MetaEntries <= 0 {
		o.MetaEntries = 10000
	}
	if o.MetaTTL <= 0 {
		o.MetaTTL = 5 * time.Second
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
	return c
}

func (c *Cache) meta(id string) (Artifact, bool) {
	if c == nil {
		return Artifact{}, false
	}
	return c.metas.Get(id)
}

func (c *Cache) addMeta(a Artifact) {
	if c != nil {
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
	if c.blobs.Contains(id) {
		return
	}
	c.blobs.Add(id, b)
	c.used += int64(len(b))
	for c.used > c.budget && c.blobs.Len() > 0 {
		c.blobs.RemoveOldest()
	}
}

func (c *Cache) remove(id string) {
	if c == nil {
		return
	}
	c.metas.Remove(id)
	c.mu.Lock()
	c.blobs.Remove(id)
	c.mu.Unlock()
}
