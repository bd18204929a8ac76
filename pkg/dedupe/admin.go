package dedupe

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// This file holds what an operator's tool (cmd/dedupe) needs of the
// package: the key derivations the adapters use, exported; where a
// record's provenance comes from; and the Admin interface stores
// implement beside Store.

// ScopeKey returns the key the HTTP adapters pass to the guard for the
// client key key, used by principal (as HTTPConfig.Principal returns it)
// on route ("POST /payments") of the deployment api ("http:<api
// id>/<stage>", "rest:<api id>/<stage>", "url:<domain>"). It is the
// adapters' own function:
//
//	<api>|<route>|<principal hash, or - for the shared scope>|<key>
//
// with '%' and '|' percent-escaped in api, route and key, and principal
// replaced by the first 16 bytes of its SHA-256 in hex. The shared scope
// (HTTPConfig.SharedScope) is principal "", which the key writes as "-";
// a principal "-" is a principal like any other, hashed. The store's key
// is StoreKey of this.
func ScopeKey(api, route, principal, key string) string {
	return scopeKey(api, route, principal, key)
}

// StoreKey returns the key a store holds for the call key key under the
// guard prefix prefix: what Guard.Key returns for a guard whose
// Config.Prefix is prefix (the Lambda function's name by default). An
// empty prefix means none.
func StoreKey(prefix, key string) string {
	if prefix == "" {
		return boundKey(key)
	}
	return boundKey(prefix + "#" + key)
}

// EventKey is what an HTTP adapter derives from a request before it
// claims: see KeyOfEvent.
type EventKey struct {
	// API is the deployment scope: "http:<api id>/<stage>",
	// "rest:<api id>/<stage>", "url:<domain>" or "alb:<target group
	// ARN>".
	API string
	// Route is the route, "METHOD /path".
	Route string
	// Principal is the caller's identity as HTTPConfig.Principal returned
	// it; "" when the request carries none.
	Principal string
	// ClientKey is the parsed idempotency key.
	ClientKey string
	// Scoped is ScopeKey(API, Route, Principal, ClientKey): the key the
	// adapter passes to the guard. StoreKey(prefix, Scoped) is the
	// stored key.
	Scoped string
	// Guarded reports whether the adapter guards the request's method.
	Guarded bool
}

// KeyOfEvent derives the key of an HTTP request exactly as the adapters
// built with cfg (nil means the zero HTTPConfig) do, from the event an
// adapter receives: an events.APIGatewayV2HTTPRequest (HTTPAPI), an
// events.APIGatewayProxyRequest (RESTAPI), an
// events.LambdaFunctionURLRequest (FunctionURL) or an
// events.ALBTargetGroupRequest (ALB), as a value or a pointer. With
// cfg.ALBAuth, the principal is taken from the user claims of a token
// the configured load balancer signed, WITHOUT verifying the signature
// or the expiry: KeyOfEvent locates a stored record for an operator,
// from an event that may be days old, and answers no client. It returns
// an error wrapping ErrInvalidKey when the request carries no key, a
// repeated or a malformed one, ErrNoPrincipal when it carries no
// principal and cfg.SharedScope is off, and ErrNoEventSource for an ALB
// request without a target group: the adapter would have refused such a
// request before any claim.
func KeyOfEvent(cfg *HTTPConfig, event any) (EventKey, error) {
	var ev httpEvent
	switch e := event.(type) {
	case *events.APIGatewayV2HTTPRequest:
		ev = (*v2Event)(e)
	case events.APIGatewayV2HTTPRequest:
		ev = (*v2Event)(&e)
	case *events.APIGatewayProxyRequest:
		ev = (*v1Event)(e)
	case events.APIGatewayProxyRequest:
		ev = (*v1Event)(&e)
	case *events.LambdaFunctionURLRequest:
		ev = (*urlEvent)(e)
	case events.LambdaFunctionURLRequest:
		ev = (*urlEvent)(&e)
	case *events.ALBTargetGroupRequest:
		ev = (*albEvent)(e)
	case events.ALBTargetGroupRequest:
		ev = (*albEvent)(&e)
	default:
		return EventKey{}, fmt.Errorf("dedupe: key of event: unsupported event type %T", event)
	}
	cfg, principal, err := albKeyRule(cfg, ev)
	if err != nil {
		return EventKey{}, fmt.Errorf("dedupe: key of event: %w", err)
	}
	// A throwaway core: newHTTPCore resolves cfg's defaults as the
	// adapters do. Its guard, and so its store, is never called.
	c := newHTTPCore(&Guard{cfg: (&Config{Prefix: "-"}).withDefaults(uncalledStore{})}, cfg)
	out := EventKey{API: ev.scope()}
	if c.route != nil {
		out.Route = c.route(ev.raw())
	} else {
		out.Route = ev.route()
	}
	for _, m := range c.methods {
		out.Guarded = out.Guarded || m == upper(ev.method())
	}
	raw, n := c.opts.keyValue(ev)
	switch {
	case n == 0:
		return out, fmt.Errorf("dedupe: key of event: no idempotency key: %w", ErrInvalidKey)
	case n > 1:
		return out, fmt.Errorf("dedupe: key of event: %w: %w", errRepeatedKey, ErrInvalidKey)
	}
	key, err := c.opts.parseKey(raw)
	if err != nil {
		return out, fmt.Errorf("dedupe: key of event: %w", err)
	}
	out.ClientKey = key
	out.Principal = c.principal(ev.raw())
	if principal != nil {
		if out.Principal, err = principal(); err != nil {
			return out, fmt.Errorf("dedupe: key of event: %w", err)
		}
	}
	if out.Principal == "" && !c.shared {
		return out, fmt.Errorf("dedupe: key of event: %w", ErrNoPrincipal)
	}
	out.Scoped = scopeKey(out.API, out.Route, out.Principal, key)
	return out, nil
}

// upper returns s in upper case, ASCII only (methods).
func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// provenanceKey is the context key of an explicit request ID or trace.
type provenanceKey int

const (
	requestIDKey provenanceKey = iota
	traceKey
)

// WithRequestID returns ctx carrying id as the request ID the guard
// stores on the records it writes (Record.RequestID) and logs
// (Event.RequestID), instead of the Lambda request ID, for callers
// outside Lambda (net/http Middleware) or that know a better correlation
// ID than Lambda's.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// WithTrace returns ctx carrying trace as the trace context the guard
// stores on the records it writes (Record.Trace), instead of the X-Ray
// trace header of the Lambda invocation. Trace is opaque to the guard and the stores: a W3C
// traceparent set by a tracing integration, an X-Ray header, or any
// string up to MaxTraceBytes that names the execution's trace.
func WithTrace(ctx context.Context, trace string) context.Context {
	return context.WithValue(ctx, traceKey, trace)
}

// requestIDFrom returns the request ID of the execution ctx belongs to:
// the one set by WithRequestID, else the Lambda request ID
// (lambdacontext), else "". The guard stores it on the record it writes
// (Record.RequestID).
func requestIDFrom(ctx context.Context) string {
	if id, ok := ctx.Value(requestIDKey).(string); ok {
		return bounded(id)
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return bounded(lc.AwsRequestID)
	}
	return ""
}

// traceFrom returns the trace context of the execution ctx belongs to:
// the one set by WithTrace, else the X-Ray trace header the Lambda
// runtime (aws-lambda-go) puts in the context, else, inside a Lambda
// invocation, the _X_AMZN_TRACE_ID environment variable it sets; "" when
// there is none. The guard stores it on the record (Record.Trace).
func traceFrom(ctx context.Context) string {
	if t, ok := ctx.Value(traceKey).(string); ok {
		return bounded(t)
	}
	if t, ok := ctx.Value("x-amzn-trace-id").(string); ok && t != "" {
		return bounded(t)
	}
	if _, ok := lambdacontext.FromContext(ctx); ok {
		return bounded(os.Getenv("_X_AMZN_TRACE_ID"))
	}
	return ""
}

// bounded returns s, or "" when it is longer than MaxTraceBytes.
func bounded(s string) string {
	if len(s) > MaxTraceBytes {
		return ""
	}
	return s
}

// Admin is what an operator's tool needs of a store beside Store: find a
// record from the KeyRef in a log line without a scan, list what is in
// flight, and delete a completed record. pkg/memstore, pkg/dynamostore,
// pkg/redisstore and pkg/pgstore provide one; the deployed functions never
// call it (their IAM roles cannot delete).
//
// Each method does what its comment says in every mode of the store, or
// refuses with an error wrapping errors.ErrUnsupported that names the
// mode and the fix (dynamostore's InFlight on a Lean store); it never
// answers nothing for what it cannot see.
type Admin interface {
	// FindRef returns every live record at now whose key's KeyRef is ref
	// ("key:" and 12 hex digits), through an index on the ref, never by
	// scanning every record. It returns an empty slice when there is
	// none, and more than one when 48-bit references collide: a tool
	// that acts on one record must then refuse the ref and ask for the
	// key (dedupe release and forget do), since a collision can be
	// planted (see docs/security.md).
	FindRef(ctx context.Context, ref string, now time.Time) ([]Record, error)

	// InFlight returns up to limit live IN_PROGRESS records at now
	// (stranded ones included, see Record.Stranded), in no particular
	// order, with truncated true when there may be more. Results are not
	// included.
	InFlight(ctx context.Context, now time.Time, limit int) (recs []Record, truncated bool, err error)

	// ReleaseSeen ends the lease of the record seen (as Get, FindRef or
	// InFlight returned it) as Store.Release does, but only while that
	// record is unchanged: IN_PROGRESS, carrying seen.Token, its lease
	// ending at seen.LeaseExpiresAt (to the millisecond). A record
	// released since (the guard's own release included), renewed by a
	// heartbeat, re-claimed, taken over, completed or deleted is left
	// alone, and so is a seen record whose lease had already ended
	// (released): ReleaseSeen then returns an error wrapping
	// ErrLeaseLost and changes nothing. It is the release of an
	// operator's tool (dedupe release): what the operator decided on,
	// and nothing that changed since, is what it releases.
	ReleaseSeen(ctx context.Context, seen Record) error

	// Forget deletes the record for key if it still carries token (the
	// owner token Get shows), so that the key runs again. Otherwise it
	// returns an error wrapping ErrLeaseLost and deletes nothing, or
	// ErrNotFound when there is no record. Warm containers may still
	// replay a forgotten result from their cache (Config.Cache) until its
	// entry runs out.
	Forget(ctx context.Context, key, token string) error
}

// ValidRef reports whether ref has the form KeyRef returns.
func ValidRef(ref string) bool {
	if len(ref) != len("key:")+12 || ref[:4] != "key:" {
		return false
	}
	for _, c := range ref[4:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// uncalledStore stands in for the store of a guard that is never called.
type uncalledStore struct{ Store }
