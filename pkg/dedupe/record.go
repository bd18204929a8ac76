package dedupe

import "time"

// Status is the stored state of a record. "Expired" is not a status: it is
// computed from the clock (see Record.Expired), because DynamoDB deletes
// expired items lazily, sometimes days late.
type Status string

// The stored statuses of a record.
const (
	// StatusInProgress means an invocation holds the key under a lease.
	StatusInProgress Status = "IN_PROGRESS"
	// StatusCompleted means the result is stored and will be replayed.
	StatusCompleted Status = "COMPLETED"
)

// Result is what a guarded function produced and what a duplicate gets
// back. For HTTP it is the response; for other events StatusCode and
// Headers may be left zero and Body holds the encoded return value.
type Result struct {
	// StatusCode is the HTTP status, or 0 when not applicable.
	StatusCode int
	// Headers are the response headers, keyed as the handler set them.
	Headers map[string][]string
	// Body holds the raw bytes, binary-safe.
	Body []byte
}

// Clone returns a deep copy of r, so stores never share memory with callers.
func (r Result) Clone() Result {
	out := Result{StatusCode: r.StatusCode}
	if r.Headers != nil {
		out.Headers = make(map[string][]string, len(r.Headers))
		for k, v := range r.Headers {
			out.Headers[k] = append([]string(nil), v...)
		}
	}
	if r.Body != nil {
		out.Body = append([]byte{}, r.Body...)
	}
	return out
}

// Record is one idempotency record as a Store keeps it.
type Record struct {
	// Key is the full, namespaced key.
	Key string
	// Status is StatusInProgress or StatusCompleted.
	Status Status
	// Fingerprint identifies the request that first used the key.
	Fingerprint string
	// Token is the owner token of the claim that wrote the record.
	Token string
	// FirstToken is the owner token of the claim that started the
	// record's life: the claim that found the key absent or expired.
	// Takeovers and an owner's own re-claim keep it, so it names one
	// request across all its attempts, and a new life (after expiry)
	// gets a new one. Empty on records written before it existed; read
	// Life for the value to use.
	FirstToken string
	// LeaseExpiresAt ends the owner's lease (millisecond precision). After
	// it, an IN_PROGRESS record may be taken over by a new claim.
	LeaseExpiresAt time.Time
	// ExpiresAt ends the record's life (second precision; DynamoDB's TTL
	// attribute). After it the record counts as absent everywhere.
	ExpiresAt time.Time
	// Result is the stored result; nil while IN_PROGRESS or when
	// ResultOmitted is set.
	Result *Result
	// ResultOmitted marks a COMPLETED record whose result was too large to
	// store. Duplicates are refused with ErrResultOmitted, never re-run.
	ResultOmitted bool
	// CreatedAt is when the current owner claimed the key.
	CreatedAt time.Time
	// UpdatedAt is when the record was last written.
	UpdatedAt time.Time
	// RequestID is the request ID (the Lambda request ID, see
	// requestIDFrom) of the execution the record belongs to: the owner's
	// while IN_PROGRESS, and on a COMPLETED record the execution whose
	// result it holds. Empty when the context carried none, and on
	// records written before it existed.
	RequestID string
	// Trace is the trace context of that same execution, opaque to the
	// stores: an X-Ray trace header ("Root=1-…;Parent=…;Sampled=1") or,
	// set through WithTrace, a W3C traceparent. Empty when there was none.
	Trace string
}

// Life returns the identity of the record's life: FirstToken, or Token
// for a record written before FirstToken existed.
func (r Record) Life() string {
	if r.FirstToken != "" {
		return r.FirstToken
	}
	return r.Token
}

// Expired reports whether the record has outlived its ExpiresAt at now.
// Precision is whole seconds, as DynamoDB compares the TTL attribute:
// the record is expired when ExpiresAt (epoch seconds) < now (epoch
// seconds). A zero ExpiresAt never expires.
func (r Record) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && r.ExpiresAt.Unix() < now.Unix()
}

// LeaseExpired reports whether the owner's lease has run out at now, in
// epoch milliseconds as stores compare it.
func (r Record) LeaseExpired(now time.Time) bool {
	return r.LeaseExpiresAt.UnixMilli() < now.UnixMilli()
}

// Stranded reports whether the record is IN_PROGRESS with a lease that has
// run out at now, and has not expired: its owner died or timed out, and
// only a retry of the same request may take it over (see FreeFor).
func (r Record) Stranded(now time.Time) bool {
	return !r.Expired(now) && r.Status == StatusInProgress && r.LeaseExpired(now)
}

// FreeFor reports whether a claim at now by the request with fingerprint
// fp and owner token may take the key, the rule every Store.Claim
// applies: the record has expired; or it is IN_PROGRESS and carries
// token (the owner's own earlier attempt); or it is IN_PROGRESS, its
// lease has run out and it carries fp.
//
//	record state                     same fp     other fp     own token
//	absent or expired                free        free         free
//	IN_PROGRESS, lease running       held (409)  held (422)   free
//	IN_PROGRESS, lease run out       free        held (422)   free
//	COMPLETED                        replay      held (422)   held
func (r Record) FreeFor(now time.Time, fp, token string) bool {
	switch {
	case r.Expired(now):
		return true
	case r.Status != StatusInProgress:
		return false
	case token != "" && r.Token == token:
		return true
	}
	return r.LeaseExpired(now) && r.Fingerprint == fp
}
