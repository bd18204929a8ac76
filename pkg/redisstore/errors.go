package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Errors of this package. Failures of the Store methods wrap the sentinels
// of package dedupe instead (dedupe.ErrLeaseLost, dedupe.ErrNotFound,
// dedupe.ErrStoreUnavailable, dedupe.ErrResultTooLarge,
// dedupe.ErrKeyRejected).
var (
	// ErrInvalidOptions reports a nil client or Options that New cannot
	// use, and from InFlight a single-node client in front of a Cluster
	// node, which would scan that node only.
	ErrInvalidOptions = errors.New("redisstore: invalid options")

	// ErrEvictionPolicy reports, from New, a server that may evict live
	// records (a maxmemory-policy other than noeviction), or one whose
	// policy New cannot read while Options.NoEvictionVerified is not set.
	ErrEvictionPolicy = errors.New("redisstore: eviction policy can lose records")

	// ErrMalformedRecord reports a stored hash the store cannot decode: a
	// missing or non-numeric field, an unknown status, corrupt headers, or
	// a script reply of an unexpected type.
	ErrMalformedRecord = errors.New("redisstore: malformed record")
)

// transientPrefixes are the Redis error replies that mean "try again
// later": a server loading its dataset, a busy script, a cluster
// resharding or without quorum, a replica promoted under us, the client
// limit reached.
var transientPrefixes = []string{
	"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY",
	"max number of clients reached",
}

// wrapErr prefixes err from operation op on key with context, adding
// dedupe.ErrStoreUnavailable when the failure is transient. It never
// quotes the key (dedupe.KeyRef).
func wrapErr(op, key string, err error) error {
	if transient(err) {
		return fmt.Errorf("redisstore: %s %s: %w: %w", op, dedupe.KeyRef(key), dedupe.ErrStoreUnavailable, err)
	}
	return fmt.Errorf("redisstore: %s %s: %w", op, dedupe.KeyRef(key), err)
}

// transient reports whether err is a failure worth retrying later: a
// network failure (refused, reset, EOF, timeout), a deadline, an
// exhausted or timed-out pool, or one of transientPrefixes. A canceled
// context is not: the caller gave up.
func transient(err error) bool {
	switch {
	case errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, redis.ErrPoolExhausted),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	for _, p := range transientPrefixes {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}
