package dedupe

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache is a bounded in-memory cache of completed records, kept in the
// execution environment between invocations, so that a replay served by
// the same warm environment costs no store call at all.
//
// It only ever holds COMPLETED records, which nothing changes until they
// expire: in-flight records are never cached, an entry is dropped once
// its record's expiry has passed, and a cached record answers a different
// fingerprint with the same mismatch the store would. Its keys are the
// guard's stored keys, which carry the whole scope (function, API, stage,
// route, caller), so one scope never sees another's entry. Give each
// Guard its own Cache.
//
// A Cache is safe for concurrent use. It is off unless Config.Cache is
// set: a record deleted from the table by hand (to unblock a key) would
// still be replayed by warm environments until it expires or is evicted.
type Cache struct {
	mu       sync.Mutex
	lru      *simplelru.LRU[string, Record]
	bytes    int
	maxBytes int
}

// NewCache returns a Cache bounded to maxEntries records and about
// maxBytes of keys, headers and bodies. Zero or negative values mean
// DefaultCacheEntries and DefaultCacheBytes.
func NewCache(maxEntries, maxBytes int) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	c := &Cache{maxBytes: maxBytes}
	// NewLRU fails only for a non-positive size.
	c.lru, _ = simplelru.NewLRU[string, Record](maxEntries, func(_ string, r Record) { c.bytes -= recordSize(r) })
	return c
}

// Len returns the number of records cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// get returns the live cached record for key at now, deep-copied.
func (c *Cache) get(key string, now time.Time) (Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.lru.Get(key)
	if !ok {
		return Record{}, false
	}
	if rec.Expired(now) {
		c.lru.Remove(key)
		return Record{}, false
	}
	if rec.Result != nil {
		r := rec.Result.Clone()
		rec.Result = &r
	}
	return rec, true
}

// put caches rec if it is COMPLETED and fits; it keeps its own copy.
func (c *Cache) put(rec Record) {
	if rec.Status != StatusCompleted {
		return
	}
	size := recordSize(rec)
	if size > c.maxBytes {
		return
	}
	if rec.Result != nil {
		r := rec.Result.Clone()
		rec.Result = &r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(rec.Key)
	// Evict while the record does not fit, and stop when nothing is left
	// to evict: a byte count that ever drifted from the records held
	// must leave the cache over budget, never spin here under its lock.
	for c.bytes+size > c.maxBytes {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
	c.lru.Add(rec.Key, rec)
	c.bytes += size
}

// recordSize estimates what a cached record holds in memory.
func recordSize(r Record) int {
	n := len(r.Key) + len(r.Fingerprint) + len(r.Token) + 128
	if r.Result != nil {
		n += len(r.Result.Body)
		for k, vs := range r.Result.Headers {
			n += len(k) + 16
			for _, v := range vs {
				n += len(v) + 16
			}
		}
	}
	return n
}
