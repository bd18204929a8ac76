package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

var _ dedupe.Admin = (*Store)(nil)

// refMark starts the name of a ref pointer, after Options.Prefix: a byte
// that is not UTF-8, so no record key (valid UTF-8, see
// dedupe.CheckStoreKey) can ever share a name with a pointer.
const refMark = "\xffref:"

// refKey returns the name of the pointer from the KeyRef ref to its key.
func (s *Store) refKey(ref string) string { return s.prefix + refMark + ref }

// pointRefScript writes the pointer from a ref to its key, expiring with
// the record (PXAT), unless one with a later expiry is there.
//
//	KEYS[1]  pointer
//	ARGV     key, ttl_at_ms
var pointRefScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
return 1
`)

// pointRef writes, after a claim that acquired key, the pointer from
// dedupe.KeyRef(key) to key through which FindRef finds the record: one
// more round trip per new claim, since the pointer lives in another hash
// slot than the record (Redis Cluster forbids one script on both). It is
// a diagnostic index: a failure to write it does not fail the claim (the
// record is what guards the request), and the record can still be shown
// from its key (dedupe show --key).
func (s *Store) pointRef(ctx context.Context, key string, exp time.Time) {
	_ = pointRefScript.Run(ctx, s.c, []string{s.refKey(dedupe.KeyRef(key))}, key, s.ttlAt(exp)).Err()
}

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

// FindRef implements dedupe.Admin with one GET of the ref pointer that
// Claim writes when the writers set Options.RefIndex, and one HGETALL of
// the key it names. Without pointers it finds nothing.
func (s *Store) FindRef(ctx context.Context, ref string, now time.Time) ([]dedupe.Record, error) {
	if !dedupe.ValidRef(ref) {
		return nil, fmt.Errorf("redisstore: find %q: not a key reference (key: and 12 hex digits)", ref)
	}
	g, ok := s.c.(interface {
		Get(ctx context.Context, key string) *redis.StringCmd
	})
	if !ok {
		return nil, fmt.Errorf("redisstore: find %s: client %T has no GET", ref, s.c)
	}
	key, err := g.Get(ctx, s.refKey(ref)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, wrap("redisstore: find "+ref, err)
	}
	rec, err := s.Get(ctx, key, now)
	switch {
	case errors.Is(err, dedupe.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case dedupe.KeyRef(rec.Key) != ref:
		return nil, nil
	}
	return []dedupe.Record{rec}, nil
}

// scanner is what InFlight needs of a client to walk the keyspace.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// InFlight implements dedupe.Admin. Redis keeps no in-flight index, so it
// walks the store's prefix with SCAN (cursor-based, COUNT 1000: it never
// blocks the server, but it reads every key under the prefix, on every
// master of a cluster) and reads each record with HGETALL. Use it on a
// prefix of its own, not on a shared instance's whole keyspace.
func (s *Store) InFlight(ctx context.Context, now time.Time, limit int) ([]dedupe.Record, bool, error) {
	var out []dedupe.Record
	truncated := false
	walk := func(ctx context.Context, c scanner) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, globEscape(s.prefix)+"*", 1000).Result()
			if err != nil {
				return err
			}
			for _, k := range keys {
				if strings.HasPrefix(k, s.prefix+refMark) || truncated {
					continue
				}
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
	var err error
	switch c := s.c.(type) {
	case *redis.ClusterClient:
		// ForEachMaster runs concurrently: collect the masters under a
		// lock, then walk them one by one.
		var masters []*redis.Client
		var mu sync.Mutex
		if err = c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			masters = append(masters, m)
			return nil
		}); err == nil {
			for _, m := range masters {
				if err = walk(ctx, m); err != nil {
					break
				}
			}
		}
	case scanner:
		err = walk(ctx, c)
	default:
		return nil, false, fmt.Errorf("redisstore: in flight: client %T has no SCAN", s.c)
	}
	if err != nil {
		return nil, false, wrap("redisstore: in flight", err)
	}
	return out, truncated, nil
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
