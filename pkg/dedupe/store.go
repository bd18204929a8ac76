package dedupe

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// Store persists idempotency records. It is the whole contract between the
// guard and a backend; pkg/memstore and pkg/dynamostore implement it, and
// pkg/dedupe/dedupetest checks any implementation against it.
//
// Stores never read a clock: every time they compare against comes in the
// request (Now), so the guard's injected clock governs expiry everywhere.
// Two times matter, at different precisions, exactly as DynamoDB compares
// them:
//
//   - a record is expired when ExpiresAt.Unix() < Now.Unix() (the TTL
//     attribute, epoch seconds). An expired record counts as absent in
//     every method, even while the backend still holds it.
//   - a lease has run out when LeaseExpiresAt.UnixMilli() < Now.UnixMilli().
//
// Keys are valid UTF-8 of 1 to MaxStoreKeyBytes bytes; the guard never
// passes any other (see Guard.Key). A store refuses any other key with an
// error that wraps ErrKeyRejected, never ErrStoreUnavailable, and changes
// nothing, so a disagreement about limits surfaces as an error instead of
// a 503 that invites endless retries.
//
// Records returned by Claim and Get belong to the caller: they share no
// memory (Result headers and body included) with the store. Results round
// trip byte for byte: header values may hold any bytes (RFC 9110 obs-text
// such as a Latin-1 filename), and bodies are binary.
//
// All methods must be safe for concurrent use by many goroutines and many
// processes. A failure that left the store without an authoritative answer
// about the key, for a reason a retry may cure (throttling, timeouts, an
// unreachable endpoint), must wrap ErrStoreUnavailable; every other failure
// must not (see ErrStoreUnavailable for the rule). In particular, what the
// store learnt before a later step failed is reported as what it is:
//
//   - a COMPLETED record whose result the store keeps outside the record
//     and cannot read now: Claim and Get return the record, every field
//     but Result (nil) as stored, with an error wrapping
//     ErrResultUnreadable when a retry may read it, or ErrResultOmitted
//     when it is gone for good. A store that keeps every result in its
//     record never returns either.
//   - evidence of another writer of the key whose record the store could
//     not read (DynamoDB's ReplicatedWriteConflictException on every
//     attempt, a conditional write that failed on a record the following
//     read could not fetch, a row lock another transaction holds past
//     the lock timeout): Claim returns an error wrapping ErrInProgress,
//     with the last record it saw, or a zero Record with Key set. The
//     guard answers it as a request in flight and never runs the
//     function for it.
//
// On any other error the returned ClaimResult and Record are zero.
type Store interface {
	// Claim tries to take req.Key for the owner req.Token, atomically.
	//
	// The key is free for req when
	//   - no record exists, or the record has expired (Record.Expired);
	//   - the record is IN_PROGRESS, its lease has run out
	//     (Record.LeaseExpired), and it carries req.Fingerprint: only the
	//     same request may take over a stranded key, so a different
	//     request gets the mismatch it would have got while the first was
	//     running (Record.FreeFor);
	//   - the record is IN_PROGRESS and carries req.Token: this is the
	//     owner's own claim, written by an earlier attempt of the same
	//     call whose response was lost (a connection reset, a 500) and
	//     retried by a client library.
	//
	// If the key is free, Claim writes a new IN_PROGRESS record carrying
	// req's fingerprint, token, lease and expiry, with CreatedAt and
	// UpdatedAt set to req.Now, and returns Acquired true with that
	// record. Its FirstToken is req.Token when the key was absent or
	// expired (a new life), and the existing record's Life() when the
	// claim took over a stranded record or re-claimed its own. Of any number of concurrent claims on a free key, exactly
	// one acquires it.
	//
	// If the key is not free, Claim changes nothing and returns Acquired
	// false with the existing record (its Result included). In a rare race
	// the existing record may vanish between the failed write and the read
	// that fetches it; the store then returns Acquired false with a zero
	// Record, and the caller may claim again.
	//
	// When the existing record is COMPLETED and its result cannot be
	// read, or another writer holds the key and its record cannot be
	// read, Claim returns Acquired false with the errors described
	// above, never ErrStoreUnavailable.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)

	// Complete stores req.Result on the record for req.Key and marks it
	// COMPLETED with expiry req.ExpiresAt, but only if the record still
	// carries req.Token and has not expired. Otherwise it returns an error
	// wrapping ErrLeaseLost and changes nothing. A lease that ran out
	// without anyone taking over does not prevent completion: the token
	// alone fences the record.
	//
	// With req.OmitResult, Complete marks the record COMPLETED with
	// ResultOmitted set and stores no result (req.Result.StatusCode may
	// still be kept); it returns nil. If the result cannot be stored
	// because of the backend's size limits, Complete does the same and
	// returns an error wrapping ErrResultTooLarge.
	Complete(ctx context.Context, req CompleteRequest) error

	// Release ends the owner's lease on the record for key at once, but
	// only if the record still carries token and is IN_PROGRESS.
	// Otherwise it returns an error wrapping ErrLeaseLost and changes
	// nothing. Callers release a key when the guarded work failed, so that
	// a retry of the same request may run it again at once.
	//
	// The record itself, with its fingerprint, is kept until it expires:
	// the key stays bound to its request, and a different request still
	// gets the mismatch. This matters after a takeover: the stranded owner
	// may have done its work before it died, and a failed retry must not
	// erase that memory. A released record is stranded by definition
	// (Record.Stranded), but there is nothing for a reaper to clear.
	Release(ctx context.Context, key, token string) error

	// Get returns the live record for key at now, or an error wrapping
	// ErrNotFound when there is none or it has expired. Reads are strongly
	// consistent. A COMPLETED record whose result cannot be read is
	// returned without it, with an error wrapping ErrResultUnreadable or
	// ErrResultOmitted, as for Claim.
	Get(ctx context.Context, key string, now time.Time) (Record, error)
}

// CheckStoreKey returns nil when key is one a Store must accept (valid
// UTF-8, 1 to MaxStoreKeyBytes bytes), else an error wrapping
// ErrKeyRejected that does not quote the key. Stores call it so that
// every backend enforces DynamoDB's limits alike.
func CheckStoreKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("store key is empty: %w", ErrKeyRejected)
	case len(key) > MaxStoreKeyBytes:
		return fmt.Errorf("store key %s is %d bytes, over %d: %w", KeyRef(key), len(key), MaxStoreKeyBytes, ErrKeyRejected)
	case !utf8.ValidString(key):
		return fmt.Errorf("store key %s is not valid UTF-8: %w", KeyRef(key), ErrKeyRejected)
	}
	return nil
}

// ClaimRequest is the input of Store.Claim.
type ClaimRequest struct {
	// Key is the full, namespaced key. Never empty.
	Key string
	// Fingerprint identifies the request; stored on the new record.
	Fingerprint string
	// Token is the new owner's token, fresh and random per claim.
	Token string
	// Now is the time of the claim; expiry and lease checks compare to it.
	Now time.Time
	// LeaseUntil is when the new owner's lease runs out.
	LeaseUntil time.Time
	// ExpiresAt is when the new IN_PROGRESS record itself expires.
	ExpiresAt time.Time
	// RequestID and Trace name the claiming execution (Record.RequestID,
	// Record.Trace); stored on the new record, empty means none.
	RequestID, Trace string
}

// ClaimResult is the output of Store.Claim.
type ClaimResult struct {
	// Acquired reports whether the caller now owns the key.
	Acquired bool
	// Record is the new record when Acquired, otherwise the existing one
	// (zero if it vanished in a race).
	Record Record
}

// CompleteRequest is the input of Store.Complete.
type CompleteRequest struct {
	// Key is the full, namespaced key.
	Key string
	// Token must match the record's owner token.
	Token string
	// Result is stored and replayed to duplicates.
	Result Result
	// Now is the time of completion; it becomes UpdatedAt.
	Now time.Time
	// ExpiresAt is when the completed record expires (its retention).
	ExpiresAt time.Time
	// OmitResult records the call as completed without its result
	// (Record.ResultOmitted): the work ran, but its result cannot be
	// replayed. Duplicates are refused with ErrResultOmitted, never run.
	OmitResult bool
	// RequestID and Trace name the execution that produced Result
	// (Record.RequestID, Record.Trace); stored on the completed record,
	// replacing the claim's. Empty means none.
	RequestID, Trace string
}
