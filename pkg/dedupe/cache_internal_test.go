package dedupe

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests in this file pin cache.go's bounds, which mutation testing
// (make mutate PKG=./pkg/dedupe) found no test of the package noticing.
// They measure records with recordSize, the cache's own estimate, and
// state what the bound means in its terms, not how it is computed.

func completed(key, body string) Record {
	return Record{Key: key, Status: StatusCompleted, Fingerprint: "fp", Token: "tok",
		Result: &Result{StatusCode: 200, Body: []byte(body)}, ExpiresAt: time.Now().Add(time.Hour)}
}

// TestCacheByteBoundIsInclusive: maxBytes is the most the cache holds,
// and it may hold that much: a record of exactly maxBytes is cached, and
// records that together make exactly maxBytes all stay.
func TestCacheByteBoundIsInclusive(t *testing.T) {
	one, two := completed("a", "x"), completed("b", "y")
	c := NewCache(10, recordSize(one)+recordSize(two))
	c.put(one)
	c.put(two)
	if c.Len() != 2 {
		t.Fatalf("two records making exactly maxBytes: %d cached, want 2", c.Len())
	}
	c.put(completed("c", "z"))
	if c.Len() != 2 || c.lru.Contains("a") {
		t.Errorf("a third over the bound: %d cached (oldest kept: %v), want 2, the oldest evicted", c.Len(), c.lru.Contains("a"))
	}
	c = NewCache(10, recordSize(one))
	c.put(one)
	if c.Len() != 1 {
		t.Errorf("a record of exactly maxBytes: %d cached, want 1", c.Len())
	}
}

// TestCacheCountsEveryPart: the key, fingerprint, token, headers and body
// all count towards maxBytes: a record of which any one alone is over the
// bound is not cached.
func TestCacheCountsEveryPart(t *testing.T) {
	const max = 4096
	big := strings.Repeat("x", 2*max)
	for name, rec := range map[string]Record{
		"key":          {Key: big, Status: StatusCompleted, Fingerprint: "fp", Token: "tok", Result: &Result{}},
		"fingerprint":  {Key: "k", Status: StatusCompleted, Fingerprint: big, Token: "tok", Result: &Result{}},
		"token":        {Key: "k", Status: StatusCompleted, Fingerprint: "fp", Token: big, Result: &Result{}},
		"body":         {Key: "k", Status: StatusCompleted, Fingerprint: "fp", Token: "tok", Result: &Result{Body: []byte(big)}},
		"header name":  {Key: "k", Status: StatusCompleted, Fingerprint: "fp", Token: "tok", Result: &Result{Headers: map[string][]string{big: {"v"}}}},
		"header value": {Key: "k", Status: StatusCompleted, Fingerprint: "fp", Token: "tok", Result: &Result{Headers: map[string][]string{"H": {big}}}},
		"many header values": {Key: "k", Status: StatusCompleted, Fingerprint: "fp", Token: "tok",
			Result: &Result{Headers: map[string][]string{"H": make([]string, max)}}},
		"many headers": {Key: "k", Status: StatusCompleted, Fingerprint: "fp", Token: "tok",
			Result: &Result{Headers: manyHeaders(max)}},
	} {
		c := NewCache(10, max)
		c.put(rec)
		if c.Len() != 0 {
			t.Errorf("a record whose %s alone is over maxBytes was cached", name)
		}
	}
}

// manyHeaders returns n headers with short names and no values.
func manyHeaders(n int) map[string][]string {
	h := make(map[string][]string, n)
	for i := range n {
		h[strconv.Itoa(i)] = nil
	}
	return h
}

// TestCacheAccountsReplacedAndEvicted: a record put again under its key
// replaces the old one's bytes, and an evicted record's bytes are freed,
// so the cache keeps holding what fits however often it is refilled.
func TestCacheAccountsReplacedAndEvicted(t *testing.T) {
	rec := completed("a", "x")
	c := NewCache(2, 2*recordSize(rec))
	for range 10 {
		c.put(rec)
	}
	for i := range 10 {
		c.put(completed(string(rune('a'+i%3)), "x")) // the third evicts by entries
	}
	if c.Len() != 2 {
		t.Errorf("after replacements and evictions: %d cached, want 2", c.Len())
	}
}

// TestCacheKeepsItsOwnCopy: put copies the result, so the caller changing
// the body it handed over (a handler's reused buffer, say) does not
// change what the cache replays; a completed record without a result is
// cached as it is.
func TestCacheKeepsItsOwnCopy(t *testing.T) {
	c := NewCache(10, 1<<20)
	rec := completed("a", "paid")
	c.put(rec)
	rec.Result.Body[0] = 'X'
	got, ok := c.get("a", time.Now())
	if !ok || string(got.Result.Body) != "paid" {
		t.Errorf("cached %v %q after the caller changed its body, want \"paid\"", ok, got.Result.Body)
	}
	c.put(Record{Key: "omitted", Status: StatusCompleted, ResultOmitted: true, ExpiresAt: time.Now().Add(time.Hour)})
	if got, ok := c.get("omitted", time.Now()); !ok || got.Result != nil {
		t.Errorf("record without a result: cached %v, result %v; want it cached without one", ok, got.Result)
	}
}

// TestCacheEvictsAsManyAsItTakes: a record that fits the byte bound only
// once several older ones are gone evicts as many as it takes, oldest
// first, and the cache never holds more bytes than maxBytes. A cache
// whose byte count drifted above what it holds (it must not, but a
// loop that trusted it would spin under the lock) empties itself and
// returns.
func TestCacheEvictsAsManyAsItTakes(t *testing.T) {
	small := []Record{completed("a", "x"), completed("b", "y"), completed("c", "z")}
	each := recordSize(small[0])
	// Exactly two small records' room: it fits once a and b are gone.
	big := completed("big", strings.Repeat("w", 2*each-recordSize(completed("big", ""))))
	c := NewCache(10, 3*each)
	for _, rec := range small {
		c.put(rec)
	}
	c.put(big) // needs the room of at least two small ones
	if c.bytes > c.maxBytes || !c.lru.Contains("big") || c.lru.Contains("a") || c.lru.Contains("b") {
		t.Errorf("after a record needing two evictions: %d of %d bytes, big %v, a %v, b %v; want within the bound, the two oldest gone",
			c.bytes, c.maxBytes, c.lru.Contains("big"), c.lru.Contains("a"), c.lru.Contains("b"))
	}
	c.bytes += 100 * c.maxBytes // a drifted count
	c.put(completed("d", "v"))
	if c.lru.Contains("big") || !c.lru.Contains("d") {
		t.Errorf("with a drifted count: big kept %v, d cached %v; want everything older evicted, d cached", c.lru.Contains("big"), c.lru.Contains("d"))
	}
}
