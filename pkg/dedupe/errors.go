package dedupe

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors returned by the guard and by every Store. Check them with
// errors.Is; stores and the guard wrap them with context.
var (
	// ErrInProgress reports that another invocation holds the key and its
	// lease has not run out. The caller should retry later; a ConflictError
	// carrying the record says how long the lease has left.
	ErrInProgress = errors.New("dedupe: request with this key is in progress")

	// ErrFingerprintMismatch reports that the key was first used with a
	// different request (a different fingerprint). The stored result is
	// never returned for it.
	ErrFingerprintMismatch = errors.New("dedupe: key reused with a different request")

	// ErrLeaseLost reports that Complete or Release was called with an owner
	// token the record no longer carries: the lease ran out and another
	// invocation took the key over, or the record is gone. Nothing changed.
	ErrLeaseLost = errors.New("dedupe: lease lost to another owner")

	// ErrNotFound reports that no live record exists for a key. An expired
	// record that the backend has not deleted yet is reported as not found.
	ErrNotFound = errors.New("dedupe: record not found")

	// ErrStoreUnavailable reports that no authoritative answer about the
	// key was received, for a reason a retry may cure: the call was
	// throttled, timed out, or could not reach the backend, and no record
	// and no sign of another writer came back. It is the only store error
	// on which Config.FailOpen runs the function, and the adapters answer
	// it with 503 and Retry-After.
	//
	// Anything the store did learn about the key is an answer, never
	// ErrStoreUnavailable, even when a later step failed: a completed
	// record whose result could not be read (ErrResultUnreadable,
	// ErrResultOmitted), a record in flight, or evidence of a concurrent
	// writer of that very key, such as a conditional check that failed
	// on a record the store then could not read, or DynamoDB's
	// ReplicatedWriteConflictException on a multi-Region strongly
	// consistent global table (Claim reports those as ErrInProgress). A
	// caller that gave up (context.Canceled) is not unavailable either:
	// stores return its error as it is. docs/options.md (FailOpen) lists
	// each store's classification.
	ErrStoreUnavailable = errors.New("dedupe: store unavailable")

	// ErrResultUnreadable reports a COMPLETED record whose result the
	// store keeps outside the record (dynamostore's LargeResults, in S3)
	// and could not read this time, for a reason a retry may cure:
	// throttling, a timeout, a transfer cut mid-body. The store has
	// answered: the request ran, and it never runs again. Claim and Get
	// return the record without its Result together with an error
	// wrapping it (see Store), so the guard still refuses a different
	// request with ErrFingerprintMismatch. It never wraps
	// ErrStoreUnavailable, so FailOpen never runs on it; the adapters
	// answer 503 with Retry-After (ProblemResultUnreadable).
	ErrResultUnreadable = errors.New("dedupe: stored result cannot be read now")

	// ErrResultTooLarge reports that Complete stored the record as COMPLETED
	// but without its result, because the result did not fit the backend's
	// item size limit (see Record.ResultOmitted), or because the place a
	// store keeps large results in refused it (dynamostore's LargeResults:
	// a bucket that is missing or may not be written). The side effect is
	// still protected: retries are never executed again.
	ErrResultTooLarge = errors.New("dedupe: result too large to store")

	// ErrResultOmitted is returned by the guard on a duplicate of a request
	// whose result could not be stored (ErrResultTooLarge at the time), or
	// whose result, kept outside the record, is gone for good (a store
	// returns it with the record, as for ErrResultUnreadable: the object
	// is missing, differs from its record, or may not be read). The
	// request was executed once; it is never executed again.
	ErrResultOmitted = errors.New("dedupe: stored result was too large to keep")

	// ErrInvalidKey reports an idempotency key that cannot be used: empty
	// for Guard.Do, or not 1 to 255 printable ASCII characters for the
	// HTTP adapters (see ParseKey).
	ErrInvalidKey = errors.New("dedupe: invalid idempotency key")

	// ErrRanUnguarded is returned with a valid Outcome when the store failed
	// and Config.FailOpen let the function run without a claim. The
	// function's result is in the Outcome; exactly-once was not enforced.
	ErrRanUnguarded = errors.New("dedupe: store failed, ran without idempotency (fail open)")

	// ErrNotStored is returned with a valid Outcome when the function ran
	// and succeeded but its result could not be recorded (the lease was
	// lost, or the store failed on completion). The result in the Outcome
	// is the real one and should be returned to the caller; a retry may
	// execute the function again once the lease runs out.
	ErrNotStored = errors.New("dedupe: result not recorded")

	// ErrKeyRejected reports a key a Store refused outright: empty, longer
	// than MaxStoreKeyBytes, or not valid UTF-8 (see CheckStoreKey), or any
	// other permanent validation failure of the backend. It is not
	// transient: the guard answers it as an internal error and never
	// fails open on it.
	ErrKeyRejected = errors.New("dedupe: key rejected by the store")

	// ErrResultUnencodable is the Answer.Warning of Once when fn
	// succeeded but its value could not be encoded for storage (a NaN, a
	// MarshalJSON that failed or panicked), or would not decode back to
	// the same JSON (see Once). The run was recorded as completed without
	// a result, so it is never run again; duplicates get ErrResultOmitted.
	ErrResultUnencodable = errors.New("dedupe: result could not be encoded; recorded without it")

	// ErrNoPrincipal reports a guarded HTTP request whose caller could not
	// be identified while HTTPConfig.SharedScope is off. The adapters
	// answer it with 500 and never run the handler: a missing identity is
	// a configuration error, and guessing would let one caller receive
	// another's response.
	ErrNoPrincipal = errors.New("dedupe: no principal for the request and SharedScope is off")
	// ErrInvalidRetention reports a Call.Retention (or what
	// HTTPConfig.Retention returned for a route) below MinRetention: the
	// call is refused before anything is claimed.
	ErrInvalidRetention = errors.New("dedupe: retention below MinRetention")
	// ErrNoEventSource reports a message or stream record without an event
	// source ARN while the batch adapter scopes keys by source (the
	// default), or an ALB request without a target group ARN: it is
	// failed (the ALB adapter answers 500), not guessed into another
	// source's scope.
	ErrNoEventSource = errors.New("dedupe: message has no event source ARN")
	// ErrBatchFailed is the error of SQS, Kinesis and
	// DynamoDBStream when an item failed and their config's
	// ReportBatchItemFailures is not set: the handler returns it, Lambda
	// fails the whole batch, and every item is delivered again (those
	// processed are duplicates then, and do not run again), whether or not
	// the event source mapping reports batch item failures.
	ErrBatchFailed = errors.New("dedupe: batch has failed items")
	// ErrRouteUnknown reports a Middleware request whose route cannot be
	// told (the router set no r.Pattern) while HTTPConfig.RequireKey is set
	// and HTTPConfig.Route is not: the request is refused with 500 rather
	// than let a keyless request through unguarded.
	ErrRouteUnknown = errors.New("dedupe: Middleware cannot tell the route (r.Pattern is empty): set HTTPConfig.Route")

	// ErrNoKey reports an event from which a key or scope expression
	// selected nothing usable as a key (see HandlerConfig.Key): null, an empty
	// string, a boolean, an object, an empty list, a number that is not
	// a whole number, a value computed from a missing one
	// (to_string(orderId) of an event without orderId), or an error in
	// evaluating it (powertools_json on text that is not JSON). Such an
	// event is refused; it never runs unguarded and never shares a key.
	ErrNoKey = errors.New("dedupe: expression selected no usable key from the event")

	// ErrNoFingerprint reports an event from which a fingerprint
	// expression selected no information (see HandlerConfig.Fingerprint: only nulls
	// and empty lists or objects, or a value computed from a missing
	// one), a number it cannot compare exactly, or failed. Such an event
	// is refused.
	ErrNoFingerprint = errors.New("dedupe: expression selected nothing to fingerprint from the event")
)

// ConflictError reports a duplicate request that cannot be answered with a
// stored result. It wraps ErrInProgress or ErrFingerprintMismatch and
// carries the record found, so callers can compute Retry-After or log the
// owner.
type ConflictError struct {
	// Err is ErrInProgress or ErrFingerprintMismatch, or a store's error
	// wrapping ErrInProgress (evidence of a concurrent writer, see
	// ErrStoreUnavailable).
	Err error
	// Record is the existing record that caused the conflict. For a
	// concurrent writer whose record the store could not read it holds
	// the key only (no lease: RetryAfter is one second).
	Record Record
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v (%s)", e.Err, KeyRef(e.Record.Key))
}

// Unwrap returns the sentinel error, so errors.Is(err, ErrInProgress) works.
func (e *ConflictError) Unwrap() error { return e.Err }

// RetryAfterHint returns a realistic Retry-After for an ErrInProgress
// conflict at now: how much longer the first request should take, given
// how long it has run (since the record's CreatedAt) and typical, how
// long such requests usually take (0 when unknown); rounded up to whole
// seconds, at least one second, and never past the lease's end
// (RetryAfter), which stays the upper bound.
//
// When typical is unknown, or the owner has already run longer than
// typical (a request held by Config.MinHold after a timeout, a slow or
// dead owner whose lease still runs), the hint is the lease's end: a
// shorter one would only invite retries that find the key still held.
func (e *ConflictError) RetryAfterHint(now time.Time, typical time.Duration) time.Duration {
	if typical <= 0 || now.Sub(e.Record.CreatedAt) >= typical {
		return e.RetryAfter(now)
	}
	hint := typical - now.Sub(e.Record.CreatedAt)
	secs := (hint + time.Second - 1) / time.Second
	if secs < 1 {
		secs = 1
	}
	return min(secs*time.Second, e.RetryAfter(now))
}

// RetryAfter returns how long the current owner's lease has left at now,
// rounded up to whole seconds and never less than one second. It is
// meaningful for ErrInProgress conflicts.
func (e *ConflictError) RetryAfter(now time.Time) time.Duration {
	left := e.Record.LeaseExpiresAt.Sub(now)
	secs := (left + time.Second - 1) / time.Second
	if secs < 1 {
		secs = 1
	}
	return secs * time.Second
}
