package dedupe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// Claim describes the claim a guarded function runs under. The guard puts
// it in the function's context (see ClaimFrom) in every entry point: Guard.Do,
// Once, Handler, SQS, Kinesis, DynamoDBStream and the HTTP
// adapters.
type Claim struct {
	// Key is the key the store holds, in Guard.Key form: the guard's
	// prefix, "#" and the call's key (for the HTTP adapters the scoped
	// key, see docs/http.md, "The key's scope"). It may carry personal
	// data: never log it, log Ref.
	Key string
	// Ref is KeyRef(Key), for logs.
	Ref string
	// Token is the owner token of this claim. A takeover after the lease
	// ran out gets a new one.
	Token string
	// Life names the record's life this claim belongs to (Record.Life):
	// the same across the retries and takeovers of one request, new once
	// the key's record expired and the key started again. Empty when
	// Unguarded.
	Life string
	// LeaseUntil is when the lease taken at the claim runs out. With
	// lease renewal (Config.Heartbeat) the lease may be extended past it.
	LeaseUntil time.Time
	// Unguarded reports a run without a claim: the store failed and
	// Config.FailOpen let the function run anyway. Key is still the
	// request's real scoped key; nothing fences the run.
	Unguarded bool
}

// DownstreamKey returns an idempotency key for a downstream service: "dd-"
// and the hex SHA-256 of Key and Life (67 printable ASCII characters), so
// it fits the limits processors put on their own idempotency keys
// (Stripe: 255) and exposes nothing of the key. It identifies one
// request, not one key string: it is the same for every retry of the
// request, takeovers included, and different once the key's record has
// expired and the same key string starts a new request. Pass it to a
// payment processor so that a retry after a result the guard could not
// record (ErrNotStored, a crash after the charge) is deduplicated
// downstream too.
//
// For an Unguarded claim (Config.FailOpen after a store failure) there
// is no record and so no life to name: the key is derived from Key and
// this run's own token ("dd-u-" and 64 hex digits), so it never equals
// another request's key, nor a guarded run's. Each unguarded run gets a
// new one: a processor does not deduplicate unguarded retries, which is
// what FailOpen trades away (ErrRanUnguarded), but it never answers one
// request with another's charge.
//
// The zero Claim (ClaimFrom outside a guarded call) has no key: its
// DownstreamKey is "", which no caller may use as a key.
func (c Claim) DownstreamKey() string {
	if c.Key == "" {
		return ""
	}
	if c.Unguarded {
		sum := sha256.Sum256([]byte("unguarded:" + strconv.Itoa(len(c.Key)) + ":" + c.Key + c.Token))
		return "dd-u-" + hex.EncodeToString(sum[:])
	}
	if c.Life == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(strconv.Itoa(len(c.Key)) + ":" + c.Key + c.Life))
	return "dd-" + hex.EncodeToString(sum[:])
}

// claimKey is the context key of the Claim.
type claimKey struct{}

// withClaim returns ctx carrying c.
func withClaim(ctx context.Context, c Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// ClaimFrom returns the claim a guarded function runs under, and false
// when ctx carries none: outside a guarded call, or an HTTP request
// without a key or with an unguarded method; the zero Claim's
// DownstreamKey is then "". When Config.FailOpen ran the function after
// a store failure, it returns a Claim with Unguarded set and the
// request's real key.
//
// The exactly-once window no store can close is the one between the side
// effect and its record: the function charged the card, then the Complete
// that records it failed (ErrNotStored) or the invocation died. Once the
// lease runs out, a retry runs the function again. Close it downstream:
// pass Claim.DownstreamKey to a service that deduplicates on its own
// (a payment processor's idempotency key, a conditional write keyed by
// it), so the second run is answered with the first one's outcome.
//
//	claim ─ fn: charge(key) ─ complete ✗ ─ … lease ends ─ retry: charge(key)
//	                 └─ processor records key     processor replays ┘
func ClaimFrom(ctx context.Context) (Claim, bool) {
	c, ok := ctx.Value(claimKey{}).(Claim)
	return c, ok
}
