package dedupe

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Problem types: the "type" member of the problem details the HTTP adapters
// answer with, one per distinct situation, so a client can branch on them.
// They are tag URIs (RFC 4151), which RFC 9457 suggests for types that are
// identifiers rather than documentation links.
//
// ProblemContentType is their media type.
const (
	// ProblemContentType is the media type of the adapters' error
	// responses (RFC 9457).
	ProblemContentType = "application/problem+json"

	// ProblemKeyMissing (400): the route requires an Idempotency-Key and
	// the request has none.
	ProblemKeyMissing = "tag:lambda-dedupe.github.io,2025:idempotency-key-missing"
	// ProblemKeyInvalid (400): the Idempotency-Key is not 1 to 255
	// printable ASCII characters, bare or as a quoted string, or the
	// header appears more than once.
	ProblemKeyInvalid = "tag:lambda-dedupe.github.io,2025:idempotency-key-invalid"
	// ProblemBodyTooLarge (413): the request body exceeds
	// HTTPConfig.MaxBodyBytes; nothing was claimed or run.
	ProblemBodyTooLarge = "tag:lambda-dedupe.github.io,2025:body-too-large"
	// ProblemBodyUnreadable (400): the request body could not be read.
	ProblemBodyUnreadable = "tag:lambda-dedupe.github.io,2025:body-unreadable"
	// ProblemInProgress (409): a request with this key is still being
	// processed; retry after Retry-After seconds.
	ProblemInProgress = "tag:lambda-dedupe.github.io,2025:request-in-progress"
	// ProblemKeyReused (422): the key was first used with a different
	// request (method, route, parameters or body).
	ProblemKeyReused = "tag:lambda-dedupe.github.io,2025:idempotency-key-reused"
	// ProblemResultUnavailable (409): the request with this key was
	// processed, but its response was too large to store, so it cannot be
	// replayed. The request is never processed again; use a new key only
	// for a new request.
	ProblemResultUnavailable = "tag:lambda-dedupe.github.io,2025:response-unavailable"
	// ProblemStoreUnavailable (503): the idempotency store, or what the
	// adapter needs to tell the caller (the ALB's public key, see
	// ALBAuth), could not be reached, so the request was not processed;
	// retry after Retry-After seconds.
	ProblemStoreUnavailable = "tag:lambda-dedupe.github.io,2025:store-unavailable"
	// ProblemResultUnreadable (503): the request with this key was
	// processed, but its stored response could not be read just now
	// (ErrResultUnreadable); retry after Retry-After seconds to receive
	// it. The request is never processed again.
	ProblemResultUnreadable = "tag:lambda-dedupe.github.io,2026:response-unreadable"
	// ProblemIdentityUnverified (401): the ALB user claims the request
	// carries (x-amzn-oidc-data) could not be verified (HTTPConfig.
	// ALBAuth); nothing was claimed or run.
	ProblemIdentityUnverified = "tag:lambda-dedupe.github.io,2026:identity-unverified"
	// ProblemInternal (500): the request was not processed because of a
	// fault on the server's side that a retry will not cure by itself: a
	// store error that is not transient, or no caller identity to scope
	// the key by (HTTPConfig.SharedScope off). The details are logged,
	// never sent.
	ProblemInternal = "tag:lambda-dedupe.github.io,2026:internal-error"
)

// storeRetryAfter is the Retry-After of a 503 answer: long enough for a
// throttled table to recover a little, short enough not to stall clients.
const storeRetryAfter = time.Second

// Problem is an RFC 9457 problem details object, the body of every
// response the HTTP adapters generate themselves. Its fields are fixed
// texts: a problem never echoes the request or an internal error.
type Problem struct {
	// Type is one of the Problem* type URIs.
	Type string `json:"type"`
	// Title is a short summary that does not change between occurrences.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence to the client.
	Detail string `json:"detail"`
}

// problemFor returns the fixed problem of a given type.
func problemFor(typ string) Problem {
	switch typ {
	case ProblemKeyMissing:
		return Problem{typ, "Idempotency-Key is missing", http.StatusBadRequest,
			"This operation requires an Idempotency-Key header."}
	case ProblemKeyInvalid:
		return Problem{typ, "Idempotency-Key is invalid", http.StatusBadRequest,
			"Send exactly one Idempotency-Key header of 1 to 255 printable ASCII characters, bare or as a quoted string."}
	case ProblemBodyTooLarge:
		return Problem{typ, "Request body too large", http.StatusRequestEntityTooLarge,
			"The request body exceeds the size this operation accepts."}
	case ProblemBodyUnreadable:
		return Problem{typ, "Request body could not be read", http.StatusBadRequest,
			"The request body could not be read completely."}
	case ProblemInProgress:
		return Problem{typ, "A request with this Idempotency-Key is in progress", http.StatusConflict,
			"The first request with this key has not finished yet. Retry after the number of seconds in Retry-After."}
	case ProblemKeyReused:
		return Problem{typ, "Idempotency-Key reused with a different request", http.StatusUnprocessableEntity,
			"This key was first used with a different request. Use a new key for a new request."}
	case ProblemResultUnavailable:
		return Problem{typ, "Original response cannot be replayed", http.StatusConflict,
			"The request with this key was processed, but its response was too large to keep. It will not be processed again."}
	case ProblemResultUnreadable:
		return Problem{typ, "Original response cannot be read right now", http.StatusServiceUnavailable,
			"The request with this key was processed, but its response could not be read just now. Retry after the number of seconds in Retry-After to receive it. It will not be processed again."}
	case ProblemIdentityUnverified:
		return Problem{typ, "Identity could not be verified", http.StatusUnauthorized,
			"The request was not processed: the identity it carries could not be verified."}
	case ProblemInternal:
		return Problem{typ, "Internal error", http.StatusInternalServerError,
			"The request was not processed because of an error on the server."}
	default:
		return Problem{ProblemStoreUnavailable, "Service temporarily unavailable", http.StatusServiceUnavailable,
			"The request was not processed. Retry after the number of seconds in Retry-After."}
	}
}

// problemResult renders the problem of type typ as a Result, with a
// Retry-After header when retryAfter is positive.
func problemResult(typ string, retryAfter time.Duration) Result {
	p := problemFor(typ)
	body, _ := json.Marshal(p) // cannot fail: four plain fields
	h := map[string][]string{"Content-Type": {ProblemContentType}}
	if retryAfter > 0 {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		h["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
	}
	return Result{StatusCode: p.Status, Headers: h, Body: body}
}
