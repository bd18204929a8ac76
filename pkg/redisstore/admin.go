package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

var _ dedupe.Admin = (*Store)(nil)

// The ref index is one sorted set per dedupe.KeyRef, its pointer set,
// named Options.Prefix + refsMark + ref. Its members are the keys with
// that ref (more than one when references collide), each scored with the
// server expiry (PEXPIREAT, epoch ms) of the longest-lived record the key
// has had; the set itself expires at its highest score. Every write that
// moves a record's expiry (a claim that acquires the key, a completion,
// a lease extension) moves its score, so the pointer lives as long as
// the longest-lived record it points to:
//
//	claim        heartbeat         complete                       record expires
//	  |---- 1 ------|------ 2 --------|------------ 3 -----------------|
//	  score ttl(1)  score ttl(2)      score ttl(3)                     set expires
//
// The pointer lives in another hash slot than its records (Redis Cluster
// forbids one script on both), so each of those writes costs one more
// round trip, after the record's own. It is a diagnostic index: a
// failure to write it does not fail the write (the record is what guards
// the request); the record can still be shown from its key (dedupe show
// --stored-key, or --event).
//
// Versions before this one kept a single string per ref (refMark), which
// a later claim of a colliding key overwrote and which expired with the
// first claim's expiry. FindRef still reads it, beside the set, until it
// expires on its own; nothing writes it any more.
const (
	// refsMark starts the name of a pointer set, after Options.Prefix:
	// a byte that is not UTF-8, so no record key (valid UTF-8, see
	// dedupe.CheckStoreKey) can ever share a name with a pointer.
	refsMark = "\xffrefs:"
	// refMark starts the name of an old-format pointer (a string).
	refMark = "\xffref:"
)

// refsKey returns the name of the pointer set of the KeyRef ref.
func (s *Store) refsKey(ref string) string { return s.prefix + refsMark + ref }

// pointRefScript adds the key to its pointer set with the record's server
// expiry unless its score is later already, drops the members whose
// records are gone from the server (score before now), and sets the
// set's expiry to its highest score.
//
//	KEYS[1]  pointer set
//	ARGV     key, ttl_at_ms, now_ms
var pointRefScript = redis.NewScript(`
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not cur or tonumber(cur) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if top[2] then redis.call('PEXPIREAT', KEYS[1], top[2]) end
return 1
`)

// pointRef records, after a write that set the record for key to expire
// at exp, that the pointer set of dedupe.KeyRef(key) must hold key until
// then (see refsMark). Errors are dropped: the pointer is a diagnostic.
func (s *Store) pointRef(ctx context.Context, key string, exp, now time.Time) {
	_ = pointRefScript.Run(ctx, s.c, []string{s.refsKey(dedupe.KeyRef(key))}, key, s.ttlAt(exp), now.UnixMilli()).Err()
}

// refKeysScript returns the members of a pointer set whose records may
// still be on the server (score from now on).
//
//	KEYS[1]  pointer set
//	ARGV     now_ms
var refKeysScript = redis.NewScript(`return redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')`)

// oldRefScript reads an old-format pointer (refMark): the one key it
// names, or nil.
//
//	KEYS[1]  pointer
var oldRefScript = redis.NewScript(`return redis.call('GET', KEYS[1])`)

// releaseSeenScript implements Store.ReleaseSeen: only when the record
// carries the token, is IN_PROGRESS and its lease still ends at the
// lease read (lease_ms, not 0), it ends the lease as releaseScript does
// and returns 1; otherwise it changes nothing and returns 0.
//
//	KEYS[1]  key
//	ARGV     token, lease_ms
var releaseSeenScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'tok', 'st', 'lease')
if cur[1] == ARGV[1] and cur[2] == 'IN_PROGRESS' and tonumber(cur[3]) == tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'lease', '0')
  return 1
end
return 0
`)

// forgetScript deletes the record if it carries the token: 1 deleted, 0
// another owner's, -1 no record.
//
//	KEYS[1]  key
//	ARGV     token
var forgetScript = redis.NewScript(`
local tok = redis.call('HGET', KEYS[1], 'tok')
if not tok then return -1 end
if tok ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)

// FindRef implements dedupe.Admin with one script reading the pointer set
// that writers built with Options.RefIndex keep (see refsMark), one GET
// of the old-format pointer, and one HGETALL per key found: every live
// record with the ref, so that a collision of references shows as two
// records. Without pointers it finds nothing.
func (s *Store) FindRef(ctx context.Context, ref string, now time.Time) ([]dedupe.Record, error) {
	if !dedupe.ValidRef(ref) {
		return nil, fmt.Errorf("redisstore: find %q: not a key reference (key: and 12 hex digits)", ref)
	}
	keys, err := refKeysScript.Run(ctx, s.c, []string{s.refsKey(ref)}, now.UnixMilli()).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap("redisstore: find "+ref, err)
	}
	old, err := oldRefScript.Run(ctx, s.c, []string{s.prefix + refMark + ref}).Text()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return nil, wrap("redisstore: find "+ref, err)
	case !slices.Contains(keys, old):
		keys = append(keys, old)
	}
	var out []dedupe.Record
	for _, key := range keys {
		rec, err := s.Get(ctx, key, now)
		switch {
		case errors.Is(err, dedupe.ErrNotFound), errors.Is(err, dedupe.ErrKeyRejected):
			continue // gone, expired or forgotten; or not a key at all
		case err != nil:
			return nil, err
		case dedupe.KeyRef(rec.Key) != ref:
			continue
		}
		out = append(out, rec)
	}
	return out, nil
}

// ReleaseSeen implements dedupe.Admin with one script fenced by the owner
// token, the IN_PROGRESS status and the lease end read.
func (s *Store) ReleaseSeen(ctx context.Context, seen dedupe.Record) error {
	if err := dedupe.CheckStoreKey(seen.Key); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	lease := seen.LeaseExpiresAt.UnixMilli()
	if lease == 0 {
		return fmt.Errorf("redisstore: release %s: released already: %w", dedupe.KeyRef(seen.Key), dedupe.ErrLeaseLost)
	}
	n, err := releaseSeenScript.Run(ctx, s.c, []string{s.prefix + seen.Key}, seen.Token, lease).Int64()
	switch {
	case err != nil:
		return wrapErr("release", seen.Key, err)
	case n == 0:
		return fmt.Errorf("redisstore: release %s: changed since it was read: %w", dedupe.KeyRef(seen.Key), dedupe.ErrLeaseLost)
	}
	return nil
}

// scanner is what InFlight needs of a client to walk the keyspace.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// InFlight implements dedupe.Admin. Redis keeps no in-flight index, so it
// walks the store's prefix with SCAN (cursor-based, COUNT 1000: it never
// blocks the server, but it reads every key under the prefix, on every
// master of a cluster, every shard of a Ring or of a Client that
// implements ForEachShard) and reads each record with HGETALL, listing
// each once. Use it on a
// prefix of its own, not on a shared instance's whole keyspace. On a
// Cluster, give the store a *redis.ClusterClient: through a client of
// one node (whose INFO says cluster_enabled:1), InFlight returns an
// error wrapping ErrInvalidOptions, since it would see that node's
// records only.
func (s *Store) InFlight(ctx context.Context, now time.Time, limit int) ([]dedupe.Record, bool, error) {
	var out []dedupe.Record
	truncated := false
	// SCAN may return a key more than once (while the server rehashes),
	// and the nodes of a wrapper's ForEachShard may hold the same keys
	// (replicas): each record is listed once.
	seen := map[string]bool{}
	walk := func(ctx context.Context, c scanner) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, globEscape(s.prefix)+"*", 1000).Result()
			if err != nil {
				return err
			}
			for _, k := range keys {
				if strings.HasPrefix(k, s.prefix+"\xff") || truncated || seen[k] {
					continue // a pointer (refsMark, refMark), never a record
				}
				seen[k] = true
				rec, err := s.Get(ctx, strings.TrimPrefix(k, s.prefix), now)
				switch {
				case errors.Is(err, dedupe.ErrNotFound), errors.Is(err, dedupe.ErrKeyRejected):
					continue
				case err != nil:
					return err
				case rec.Status != dedupe.StatusInProgress || rec.LeaseExpiresAt.UnixMilli() == 0:
					continue // completed, or released
				case len(out) == limit:
					truncated = true
					continue
				}
				out = append(out, rec)
			}
			if cursor = next; cursor == 0 || truncated {
				return nil
			}
		}
	}
	// each walks the nodes forEach calls back with (concurrently, as
	// go-redis does) one by one, after collecting them under a lock.
	each := func(forEach func(context.Context, func(context.Context, *redis.Client) error) error) error {
		var mu sync.Mutex
		var nodes []*redis.Client
		if err := forEach(ctx, func(_ context.Context, n *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, n)
			return nil
		}); err != nil {
			return err
		}
		for _, n := range nodes {
			if err := walk(ctx, n); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch c := s.c.(type) {
	case *redis.ClusterClient:
		err = each(c.ForEachMaster)
	case shards:
		// A Ring (or a wrapper that names its nodes): its SCAN goes to a
		// random shard, page by page, so each shard is walked on its own.
		err = each(c.ForEachShard)
	case scanner:
		if err := refuseClusterNode(ctx, c); err != nil {
			return nil, false, err
		}
		err = walk(ctx, c)
	default:
		return nil, false, fmt.Errorf("redisstore: in flight: client %T has no SCAN", s.c)
	}
	if err != nil {
		return nil, false, wrap("redisstore: in flight", err)
	}
	return out, truncated, nil
}

// refuseClusterNode returns an error wrapping ErrInvalidOptions when c,
// a client InFlight would SCAN directly, is in front of one node of a
// Redis Cluster, as its INFO cluster tells (cluster_enabled:1): SCAN
// would list that node's records only, and say nothing of the others.
// A client that cannot ask (no INFO, or INFO refused) is not refused.
func refuseClusterNode(ctx context.Context, c scanner) error {
	in, ok := c.(Inspector)
	if !ok {
		return nil
	}
	info, err := in.Info(ctx, "cluster").Result()
	if err != nil && transient(err) {
		return wrap("redisstore: in flight: INFO cluster", err)
	}
	if err == nil && infoField(info, "cluster_enabled") == "1" {
		addr := "the server"
		if rc, ok := c.(*redis.Client); ok {
			addr = rc.Options().Addr
		}
		return fmt.Errorf("%w: in flight: %s is a Redis Cluster node, and a single-node client (%T) scans that node only, missing the records of the others: "+
			"pass a *redis.ClusterClient (redis.NewClusterClient)", ErrInvalidOptions, addr, c)
	}
	return nil
}

// globEscape escapes the glob characters of a MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Forget implements dedupe.Admin with one script fenced by the owner
// token.
func (s *Store) Forget(ctx context.Context, key, token string) error {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return fmt.Errorf("redisstore: forget: %w", err)
	}
	n, err := forgetScript.Run(ctx, s.c, []string{s.prefix + key}, token).Int64()
	switch {
	case err != nil:
		return wrapErr("forget", key, err)
	case n == -1:
		return fmt.Errorf("redisstore: forget %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	case n == 0:
		return fmt.Errorf("redisstore: forget %s: %w", dedupe.KeyRef(key), dedupe.ErrLeaseLost)
	}
	return nil
}

// wrap prefixes err with prefix, adding dedupe.ErrStoreUnavailable when
// the failure is transient, as wrapErr does for one key.
func wrap(prefix string, err error) error {
	if transient(err) {
		return fmt.Errorf("%s: %w: %w", prefix, dedupe.ErrStoreUnavailable, err)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}
