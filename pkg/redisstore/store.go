package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/internal/headerenc"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Client is what the store calls on Redis: the script commands
// (redis.Scripter: EVALSHA, and EVAL once per server when the script is
// not cached yet) and HGETALL. *redis.Client, *redis.ClusterClient and
// *redis.Ring satisfy it; tests and wrappers (metrics, fault injection)
// may stand in for it.
type Client interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (*redis.Ring)(nil)
)

// Defaults for zero fields of Options.
const (
	// DefaultMaxResultBytes matches DynamoDB's item limit (400 KB), so a
	// result that one store keeps, every store keeps.
	DefaultMaxResultBytes = 400 << 10

	// DefaultTTLMargin is added to a record's server TTL beyond its
	// ExpiresAt, so that a server clock running ahead of the writers'
	// never drops a record the contract still counts as live.
	DefaultTTLMargin = time.Minute
)

// Options configures a Store. The zero value is usable: no key prefix and
// the defaults below.
type Options struct {
	// Prefix is prepended to every key in Redis, such as "dedupe:", to
	// keep the records apart from other data. Empty means none. A prefix
	// holding a hash tag ("{dedupe}:") would put every record on one
	// Cluster slot; leave tags out.
	Prefix string

	// MaxResultBytes bounds the stored size of a result (encoded headers
	// plus body). A larger result is not stored: the record becomes
	// COMPLETED with ResultOmitted, and Complete returns an error wrapping
	// dedupe.ErrResultTooLarge. Zero means DefaultMaxResultBytes; a
	// negative value means no limit (Redis itself takes up to 512 MB).
	MaxResultBytes int

	// TTLMargin is how long past ExpiresAt (rounded up to its second) the
	// server keeps a record: its PEXPIREAT. Expiry as the contract sees
	// it is still computed from the request's time. Zero means
	// DefaultTTLMargin; a negative value means none.
	TTLMargin time.Duration

	// RefIndex makes every write that moves a record's expiry (a claim
	// that acquires the key, a completion, a lease extension) also
	// record the key in the pointer set of its dedupe.KeyRef, which
	// lives as long as the longest-lived record it names, so that an
	// operator finds every record with a ref from a log line (FindRef,
	// dedupe show key:…) without a SCAN. It costs one more round trip
	// per such write: the pointer lives on another Cluster slot than the
	// record. False means no pointers, and FindRef finds nothing.
	RefIndex bool

	// NoEvictionVerified says that the operator has verified that every
	// node (masters and replicas) runs with maxmemory-policy noeviction.
	// New reads the policy itself wherever the server lets it (CONFIG
	// GET, else INFO memory) and refuses any other policy whatever this
	// says; the flag only lets New accept a node whose policy it cannot
	// read (CONFIG and INFO renamed or denied, as on some managed
	// services), or a Client that implements neither Inspector nor
	// ForEachShard. False means such a node or client is refused.
	NoEvictionVerified bool
}

// Store is a dedupe.Store backed by Redis or Valkey, one hash per record.
// Create it with New; it is safe for concurrent use and holds no
// goroutines.
type Store struct {
	c         Client
	prefix    string
	maxResult int
	ttlMargin time.Duration
	refIndex  bool
}

var (
	_ dedupe.Store         = (*Store)(nil)
	_ dedupe.LeaseExtender = (*Store)(nil)
)

// New returns a Store that keeps records in Redis through c. It never
// reads the environment or starts goroutines of its own; build the client
// once, at init (redis.ParseURL and redis.NewClient, or
// redis.NewClusterClient).
//
// New checks that the server cannot evict records, which would let a
// retry run the work again: every record carries a TTL, so any
// maxmemory-policy but noeviction (volatile-* and allkeys-* alike) may
// drop a live one. It reads the policy of every node c reaches (every
// master and replica of a *redis.ClusterClient, every shard of a
// *redis.Ring) with CONFIG GET, or INFO where CONFIG is refused, within 5
// seconds, and returns an error wrapping ErrEvictionPolicy for any other
// policy, and for a node whose policy it cannot read unless
// Options.NoEvictionVerified is set. A server it cannot reach yields an
// error wrapping dedupe.ErrStoreUnavailable. A *redis.Client built by
// redis.NewFailoverClient (Sentinel) reaches the master only: give its
// replicas the same policy.
//
// The client's own retries (MaxRetries, 3 by default) resend a command
// after a network error; every script is safe to resend, because a
// claim or completion that was applied is recognised by its token.
func New(c Client, opts Options) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	if err := checkEviction(c, opts.NoEvictionVerified); err != nil {
		return nil, err
	}
	s := &Store{c: c, prefix: opts.Prefix, maxResult: opts.MaxResultBytes, ttlMargin: opts.TTLMargin, refIndex: opts.RefIndex}
	if s.maxResult == 0 {
		s.maxResult = DefaultMaxResultBytes
	}
	switch {
	case s.ttlMargin == 0:
		s.ttlMargin = DefaultTTLMargin
	case s.ttlMargin < 0:
		s.ttlMargin = 0
	}
	return s, nil
}

// ttlAt returns the PEXPIREAT time, in epoch milliseconds, of a record
// expiring at exp: the end of exp's second, plus the margin.
func (s *Store) ttlAt(exp time.Time) int64 {
	return (exp.Unix()+1)*1000 + s.ttlMargin.Milliseconds()
}

// Claim implements dedupe.Store with one script (EVALSHA). The script
// applies the contract's rule (dedupe.Record.FreeFor) to the stored hash
// and either writes the new record or returns the existing one, so a
// duplicate costs one round trip too. The new record's FirstToken (field
// ft) is the caller's token when the key was absent or expired, and the
// replaced record's Life() when the claim took it over or re-claimed its
// own; a hash written before ft existed reads with an empty FirstToken.
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	rec := dedupe.Record{
		Key:            req.Key,
		Status:         dedupe.StatusInProgress,
		Fingerprint:    req.Fingerprint,
		Token:          req.Token,
		LeaseExpiresAt: time.UnixMilli(req.LeaseUntil.UnixMilli()).UTC(),
		ExpiresAt:      time.Unix(req.ExpiresAt.Unix(), 0).UTC(),
		CreatedAt:      time.UnixMilli(req.Now.UnixMilli()).UTC(),
		UpdatedAt:      time.UnixMilli(req.Now.UnixMilli()).UTC(),
		RequestID:      req.RequestID,
		Trace:          req.Trace,
	}
	reply, err := claimScript.Run(ctx, s.c, []string{s.prefix + req.Key},
		req.Now.Unix(), req.Now.UnixMilli(), req.Fingerprint, req.Token,
		rec.LeaseExpiresAt.UnixMilli(), rec.ExpiresAt.Unix(), s.ttlAt(rec.ExpiresAt),
		req.RequestID, req.Trace,
	).Result()
	if err != nil {
		return dedupe.ClaimResult{}, wrapErr("claim", req.Key, err)
	}
	switch v := reply.(type) {
	case string:
		rec.FirstToken = v
		if s.refIndex {
			s.pointRef(ctx, req.Key, rec.ExpiresAt, req.Now)
		}
		return dedupe.ClaimResult{Acquired: true, Record: rec}, nil
	case []any:
		fields, err := pairs(v)
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redisstore: claim %s: %w", dedupe.KeyRef(req.Key), err)
		}
		existing, err := decode(req.Key, fields)
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redisstore: claim %s: %w", dedupe.KeyRef(req.Key), err)
		}
		return dedupe.ClaimResult{Record: existing}, nil
	default:
		return dedupe.ClaimResult{}, fmt.Errorf("redisstore: claim %s: %w: reply of type %T", dedupe.KeyRef(req.Key), ErrMalformedRecord, reply)
	}
}

// Complete implements dedupe.Store with one script (EVALSHA) fenced by
// the owner token and the record's expiry. A result above
// Options.MaxResultBytes is not stored: the record is completed with
// ResultOmitted, and Complete returns an error wrapping
// dedupe.ErrResultTooLarge.
func (s *Store) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	var headers, body []byte
	omitted, tooLarge := req.OmitResult, 0
	if !omitted {
		headers, body = headerenc.Encode(req.Result.Headers), req.Result.Body
		if size := len(headers) + len(body); s.maxResult > 0 && size > s.maxResult {
			headers, body, omitted, tooLarge = nil, nil, true, size
		}
	}
	ro := "0"
	if omitted {
		ro = "1"
	}
	exp := time.Unix(req.ExpiresAt.Unix(), 0)
	n, err := completeScript.Run(ctx, s.c, []string{s.prefix + req.Key},
		req.Token, req.Now.Unix(), exp.Unix(), req.Now.UnixMilli(),
		req.Result.StatusCode, ro, headers, body, s.ttlAt(exp),
		req.RequestID, req.Trace,
	).Int64()
	switch {
	case err != nil:
		return wrapErr("complete", req.Key, err)
	case n == 0:
		return fmt.Errorf("redisstore: complete %s: %w", dedupe.KeyRef(req.Key), dedupe.ErrLeaseLost)
	}
	if s.refIndex {
		s.pointRef(ctx, req.Key, exp, req.Now)
	}
	if tooLarge > 0 {
		return fmt.Errorf("redisstore: complete %s: result of %d bytes exceeds %d, stored without it: %w",
			dedupe.KeyRef(req.Key), tooLarge, s.maxResult, dedupe.ErrResultTooLarge)
	}
	return nil
}

// Release implements dedupe.Store with one script (EVALSHA) that ends the
// lease (lease 0) only while the record carries token and is IN_PROGRESS.
// The record keeps its fingerprint and its TTL: a retry of the same
// request takes the key at once, a different request is still refused.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	n, err := releaseScript.Run(ctx, s.c, []string{s.prefix + key}, token).Int64()
	switch {
	case err != nil:
		return wrapErr("release", key, err)
	case n == 0:
		return fmt.Errorf("redisstore: release %s: %w", dedupe.KeyRef(key), dedupe.ErrLeaseLost)
	}
	return nil
}

// Extend implements dedupe.LeaseExtender with one script (EVALSHA) fenced
// like the contract says: it sets the lease, the expiry and the server TTL
// only while the hash carries req.Token, is IN_PROGRESS, has not expired
// and its lease has not run out at req.Now. Otherwise it returns an error
// wrapping dedupe.ErrLeaseLost and changes nothing. The script touches
// one key, so it runs on Redis Cluster too; resent after a lost reply, it
// finds its own renewal and applies it again.
func (s *Store) Extend(ctx context.Context, req dedupe.ExtendRequest) error {
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return fmt.Errorf("redisstore: extend: %w", err)
	}
	exp := time.Unix(req.ExpiresAt.Unix(), 0)
	n, err := extendScript.Run(ctx, s.c, []string{s.prefix + req.Key},
		req.Token, req.Now.Unix(), req.Now.UnixMilli(), req.LeaseUntil.UnixMilli(), exp.Unix(), s.ttlAt(exp),
	).Int64()
	switch {
	case err != nil:
		return wrapErr("extend", req.Key, err)
	case n == 0:
		return fmt.Errorf("redisstore: extend %s: %w", dedupe.KeyRef(req.Key), dedupe.ErrLeaseLost)
	}
	if s.refIndex {
		s.pointRef(ctx, req.Key, exp, req.Now)
	}
	return nil
}

// Get implements dedupe.Store with one HGETALL. A record whose ExpiresAt
// is before now is reported as dedupe.ErrNotFound, even while the server
// still holds it (its TTL runs on the server's clock, plus the margin).
func (s *Store) Get(ctx context.Context, key string, now time.Time) (dedupe.Record, error) {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return dedupe.Record{}, fmt.Errorf("redisstore: get: %w", err)
	}
	fields, err := s.c.HGetAll(ctx, s.prefix+key).Result()
	if err != nil {
		return dedupe.Record{}, wrapErr("get", key, err)
	}
	if len(fields) == 0 {
		return dedupe.Record{}, fmt.Errorf("redisstore: get %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	}
	rec, err := decode(key, fields)
	if err != nil {
		return dedupe.Record{}, fmt.Errorf("redisstore: get %s: %w", dedupe.KeyRef(key), err)
	}
	if rec.Expired(now) {
		return dedupe.Record{}, fmt.Errorf("redisstore: get %s: expired: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	}
	return rec, nil
}
