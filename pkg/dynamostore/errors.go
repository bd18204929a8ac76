package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Errors of this package. Failures of the Store methods wrap the sentinels
// of package dedupe instead (dedupe.ErrLeaseLost, dedupe.ErrNotFound,
// dedupe.ErrStoreUnavailable, dedupe.ErrResultTooLarge).
var (
	// ErrInvalidOptions reports Options that New cannot use, such as an
	// empty Table.
	ErrInvalidOptions = errors.New("dynamostore: invalid options")

	// ErrMalformedItem reports a stored item the store cannot decode: an
	// attribute of the wrong type, a missing key or owner, a corrupt body.
	ErrMalformedItem = errors.New("dynamostore: malformed item")

	// ErrShardMismatch reports an in-flight record filed under a shard
	// that the reaper's Options.Shards would not give its key: the writers
	// and the reaper disagree on the shard count, so the reaper misses
	// every record in the shards it does not query. Reap counts it as an
	// error (ReapErrors, the reaper's alarm) and leaves the record alone.
	// It sees a reaper count larger than the writers', or one that does
	// not divide it; one that divides it (4 against 8) agrees on the
	// shards it reads and cannot tell. InFlight (dedupe inflight and
	// stranded) refuses on it too, and also probes the shards beyond its
	// count, so it sees a writers' count up to twice its own as well.
	ErrShardMismatch = errors.New("dynamostore: shard count differs from the writers'")

	// ErrObjectInvalid reports a result stored in S3 (LargeResults) that
	// cannot be replayed: the object is missing, its size or SHA-256
	// differ from its record's, the role may not read it, or the store has
	// no LargeResults for the bucket the record names. It comes with
	// dedupe.ErrResultOmitted and the record without its result (see
	// dedupe.Store): the record is never answered with another body, and
	// its request never runs again.
	ErrObjectInvalid = errors.New("dynamostore: stored result object is missing or does not match its record")
)

// unavailableCodes are the DynamoDB error codes that mean "try again
// later". The SDK's retryer has already retried them when the store sees
// them.
var unavailableCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"ThrottlingException":                    true,
	"RequestLimitExceeded":                   true,
	"InternalServerError":                    true,
	"ServiceUnavailable":                     true,
	"ServiceUnavailableException":            true,
	"RequestTimeout":                         true,
	"RequestTimeoutException":                true,
	// Only MRSC global tables return it; the store has already retried
	// it (ConflictAttempts). A claim reports it as a concurrent writer
	// (dedupe.ErrInProgress) instead, see conflictRetrier; Complete,
	// Release and Extend, whose record is the caller's, as unavailable,
	// which the guard retries.
	"ReplicatedWriteConflictException": true,
}

// wrapErr wraps an SDK error from operation op on key with context, and
// with dedupe.ErrStoreUnavailable when the failure is transient:
// throttling, a server-side fault, a network failure or a deadline.
func wrapErr(op, key string, err error) error {
	return wrap(fmt.Sprintf("dynamostore: %s %s", op, dedupe.KeyRef(key)), err)
}

// wrap prefixes err with context, adding dedupe.ErrStoreUnavailable when
// the failure is transient.
func wrap(prefix string, err error) error {
	if transient(err) {
		return fmt.Errorf("%s: %w: %w", prefix, dedupe.ErrStoreUnavailable, err)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// transient reports whether err is a failure worth retrying later.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up; the store did not fail
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return unavailableCodes[apiErr.ErrorCode()]
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var sendErr *smithyhttp.RequestSendError
	if errors.As(err, &sendErr) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// isItemTooLarge reports whether err is DynamoDB refusing an item above its
// size limit.
func isItemTooLarge(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException" &&
		strings.Contains(apiErr.ErrorMessage(), "exceeded the maximum allowed size")
}
