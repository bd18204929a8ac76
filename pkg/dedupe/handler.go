package dedupe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// HandlerConfig configures Handler. Key is required; Scope is required
// for event types Handler knows no scope of (see Handler).
type HandlerConfig struct {
	// Key is a JMESPath expression (see Expr) that selects the event's
	// idempotency key from its JSON, as Powertools' event_key_jmespath:
	// "id" for an EventBridge event, "powertools_json(body).orderId"
	// for an API Gateway request, "[customer, orderId]" for a key of two
	// fields. An event for which it selects no usable key (Expr.Key) is
	// refused with an error wrapping ErrNoKey: the handler does not run.
	Key string

	// Fingerprint is a JMESPath expression that selects what of the
	// event identifies the request, as Powertools'
	// payload_validation_jmespath: a duplicate whose selection differs
	// is refused with ErrFingerprintMismatch. An event for which it
	// selects null is refused with ErrNoFingerprint. Empty means the
	// event type's default (see Handler).
	Fingerprint string

	// Scope is a JMESPath expression that names the key space of an
	// event: where it comes from, so that two sources using the same
	// keys never share a record (and one is never answered with the
	// other's result). It may select a string or a list of strings
	// ("[tenant, source]"), or be a literal ("'orders-service'"); an
	// event for which it selects nothing usable is refused with
	// ErrNoKey. It adds to the event type's default scope. Empty means
	// that default alone; for a type that has none, Handler refuses an
	// empty Scope.
	Scope string

	// SharedScope lets API Gateway and Function URL requests with no
	// principal share one key space per API, stage and route, as
	// HTTPConfig.SharedScope does. Set it only for anonymous callers
	// whose keys are unguessable. Without it such a request is refused
	// with ErrNoPrincipal. Handler refuses it for other event types,
	// where it would mean nothing.
	SharedScope bool
}

// Handler makes a Lambda handler idempotent, as Powertools' idempotent
// decorator does: the returned function runs h at most once per key and
// answers a duplicate with the first run's Out, stored JSON-encoded and
// decoded again (Out must survive encoding/json). The key is selected
// from the event by cfg.Key, within a scope:
//
//	event type                         default scope                       default fingerprint
//	events.EventBridgeEvent            account, region, source, detail-type  detail
//	events.APIGatewayV2HTTPRequest,    API and stage (domain for a URL),   method, path, query, body
//	events.APIGatewayProxyRequest,     route, principal (DefaultPrincipal;
//	events.LambdaFunctionURLRequest    none: refused unless SharedScope)
//	any other type                     none: cfg.Scope is required         the whole event
//
// The function returns h's own errors (after releasing the key, so a
// retry runs again), a *ConflictError (in progress: Config.Wait lets it
// wait for the first run instead; or the key reused with a different
// fingerprint), ErrResultOmitted, store failures, and refusals: ErrNoKey,
// ErrNoFingerprint, ErrNoPrincipal. Each of these reaches Lambda as an
// error, so an asynchronous event is retried and then sent to its
// dead-letter queue. When Out is the response type of an HTTP event
// (events.APIGatewayV2HTTPResponse, events.APIGatewayProxyResponse,
// events.LambdaFunctionURLResponse), all but h's own errors are answered
// as the HTTP adapters answer them, with a problem response and a nil
// error: 400 (ProblemKeyUnusable), 409 with Retry-After, 422, 503, 500.
// A run whose result could not be recorded (ErrNotStored,
// ErrRanUnguarded) returns h's result and no error: the guard logs it.
//
// Handler compiles the expressions and checks cfg when it is called, and
// returns an error naming the field and the fix for a bad one.
//
//	h, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "id"}, process)
//	if err != nil {
//		log.Fatal(err) // in main
//	}
//	lambda.Start(h)
func Handler[In, Out any](g *Guard, cfg HandlerConfig, h func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, error), error) {
	if g == nil || h == nil {
		return nil, errors.New("dedupe: Handler: nil Guard or handler")
	}
	if strings.TrimSpace(cfg.Key) == "" {
		return nil, errors.New(`dedupe: Handler: HandlerConfig.Key is empty; set it to a JMESPath expression that selects the event's idempotency key, such as "id" or "powertools_json(body).orderId"`)
	}
	key, err := CompileExpr(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Key: %w", err)
	}
	var fp, scope *Expr
	if cfg.Fingerprint != "" {
		if fp, err = CompileExpr(cfg.Fingerprint); err != nil {
			return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Fingerprint: %w", err)
		}
	}
	if cfg.Scope != "" {
		if scope, err = CompileExpr(cfg.Scope); err != nil {
			return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Scope: %w", err)
		}
	}
	var zero In
	kind := kindOf(zero)
	switch {
	case kind == customEvent && scope == nil:
		return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Scope is empty and events of type %T have no default scope; set it to an expression that names where the events come from, a literal such as \"'orders-service'\" or a field such as \"tenantId\", so that two sources' keys never meet", zero)
	case cfg.SharedScope && kind != httpEventKind:
		return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.SharedScope applies to API Gateway and Function URL events only, not to %T; remove it", zero)
	}
	return func(ctx context.Context, in In) (Out, error) {
		var out Out
		k, payload, outcome, err := handlerKey(in, kind, key, fp, scope, cfg.SharedScope)
		if err != nil {
			g.emit(ctx, Event{Outcome: outcome, Err: err})
			return problemOr[Out](g, err)
		}
		ran := false
		a, err := Once(ctx, g, k, payload, func(ctx context.Context) (Out, error) {
			ran = true
			return h(ctx, in)
		})
		switch {
		case err != nil && ran:
			return out, err // h's own error: Lambda's, as in the HTTP adapters
		case err != nil:
			return problemOr[Out](g, err)
		}
		return a.Value, nil
	}, nil
}

// ProblemKeyUnusable (400) is the problem Handler answers an HTTP request
// with when its key, scope or fingerprint expression selects nothing
// usable from it (ErrNoKey, ErrNoFingerprint).
const ProblemKeyUnusable = "tag:lambda-dedupe.github.io,2026:idempotency-key-unusable"

// problemOr returns the refusal err as Out when Out is an API Gateway or
// Function URL response: the problem response the HTTP adapters answer
// for it, with a nil error. For any other Out it returns err.
func problemOr[Out any](g *Guard, err error) (Out, error) {
	var out Out
	var res Result
	var conflict *ConflictError
	switch {
	case errors.Is(err, ErrNoKey) || errors.Is(err, ErrNoFingerprint):
		body, _ := json.Marshal(Problem{ProblemKeyUnusable, "Idempotency key is missing or unusable", http.StatusBadRequest,
			"This operation needs an idempotency key in the request, and it has none usable."})
		res = Result{StatusCode: http.StatusBadRequest, Headers: map[string][]string{"Content-Type": {ProblemContentType}}, Body: body}
	case errors.As(err, &conflict) && errors.Is(err, ErrInProgress):
		res = problemResult(ProblemInProgress, conflict.RetryAfter(g.Now()))
	case errors.As(err, &conflict):
		res = problemResult(ProblemKeyReused, 0)
	case errors.Is(err, ErrResultOmitted):
		res = problemResult(ProblemResultUnavailable, 0)
	case errors.Is(err, ErrResultUnreadable):
		res = problemResult(ProblemResultUnreadable, storeRetryAfter)
	case errors.Is(err, ErrStoreUnavailable):
		res = problemResult(ProblemStoreUnavailable, storeRetryAfter)
	default:
		res = problemResult(ProblemInternal, 0) // no principal, a permanent store error
	}
	hdr := make(map[string]string, len(res.Headers))
	for k, vs := range res.Headers {
		hdr[k] = vs[0]
	}
	switch o := any(&out).(type) {
	case *events.APIGatewayV2HTTPResponse:
		*o = events.APIGatewayV2HTTPResponse{StatusCode: res.StatusCode, Headers: hdr, Body: string(res.Body)}
	case *events.APIGatewayProxyResponse:
		*o = events.APIGatewayProxyResponse{StatusCode: res.StatusCode, Headers: hdr, Body: string(res.Body)}
	case *events.LambdaFunctionURLResponse:
		*o = events.LambdaFunctionURLResponse{StatusCode: res.StatusCode, Headers: hdr, Body: string(res.Body)}
	default:
		return out, err
	}
	return out, nil
}

// The kinds of event Handler knows a default scope of.
const (
	customEvent = iota
	eventBridgeEvent
	httpEventKind
)

// kindOf returns the kind of an event type.
func kindOf(in any) int {
	switch in.(type) {
	case events.EventBridgeEvent, *events.EventBridgeEvent:
		return eventBridgeEvent
	case events.APIGatewayV2HTTPRequest, *events.APIGatewayV2HTTPRequest,
		events.APIGatewayProxyRequest, *events.APIGatewayProxyRequest,
		events.LambdaFunctionURLRequest, *events.LambdaFunctionURLRequest:
		return httpEventKind
	}
	return customEvent
}

// asHTTPEvent returns the httpEvent of an HTTP event.
func asHTTPEvent(in any) httpEvent {
	switch r := in.(type) {
	case events.APIGatewayV2HTTPRequest:
		return (*v2Event)(&r)
	case *events.APIGatewayV2HTTPRequest:
		return (*v2Event)(r)
	case events.APIGatewayProxyRequest:
		return (*v1Event)(&r)
	case *events.APIGatewayProxyRequest:
		return (*v1Event)(r)
	case events.LambdaFunctionURLRequest:
		return (*urlEvent)(&r)
	case *events.LambdaFunctionURLRequest:
		return (*urlEvent)(r)
	}
	return nil
}

// handlerKey returns the guard key and the fingerprinted payload of one
// event, or the outcome and error that refuse it.
//
//	handler|<default scope parts>|<Scope parts>|<Key parts>   (see writeParts)
func handlerKey(in any, kind int, key, fp, scope *Expr, shared bool) (k string, payload []byte, outcome string, err error) {
	tree, err := eventTree(in)
	if err != nil {
		return "", nil, OutcomeInvalidRequest, fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	var defScope []string
	switch kind {
	case eventBridgeEvent:
		ev := derefEventBridge(in)
		if ev.Source == "" {
			return "", nil, OutcomeInvalidKey, fmt.Errorf("%w: EventBridge event without a source", ErrNoKey)
		}
		defScope = []string{"events", ev.AccountID, ev.Region, ev.Source, ev.DetailType}
		payload = ev.Detail
	case httpEventKind:
		ev := asHTTPEvent(in)
		principal := DefaultPrincipal(in)
		if principal == "" && !shared {
			return "", nil, OutcomeInvalidRequest, fmt.Errorf("handler: %w", ErrNoPrincipal)
		}
		route := ev.route()
		defScope = []string{"http", scopeKey(ev.scope(), route, principal, "")}
		body, _, err := ev.body(-1)
		if err != nil {
			return "", nil, OutcomeInvalidRequest, fmt.Errorf("%w: read body: %w", ErrNoFingerprint, err)
		}
		payload = body
		defer func() {
			if err == nil {
				// Method and route are in the scope; the actual target
				// (path parameters, query) enters the fingerprint whatever
				// Fingerprint selects, as in the HTTP adapters.
				payload = appendBody(appendPart(ev.appendTarget(nil), route), payload)
			}
		}()
	default:
		if m, ok := tree.(map[string]any); ok && m["requestContext"] != nil {
			return "", nil, OutcomeInvalidRequest, fmt.Errorf("handler: an HTTP request decoded as %T has no known principal; take events.APIGatewayV2HTTPRequest, events.APIGatewayProxyRequest or events.LambdaFunctionURLRequest: %w", in, ErrNoPrincipal)
		}
		if payload, err = json.Marshal(tree); err != nil {
			return "", nil, OutcomeInvalidRequest, fmt.Errorf("%w: %w", ErrNoFingerprint, err)
		}
	}
	var b strings.Builder
	b.WriteString("handler|")
	writeParts(&b, defScope)
	if scope != nil {
		parts, err := scope.keyParts(tree)
		if err != nil {
			return "", nil, OutcomeInvalidKey, fmt.Errorf("scope: %w", err)
		}
		writeParts(&b, parts)
	}
	parts, err := key.keyParts(tree)
	if err != nil {
		return "", nil, OutcomeInvalidKey, err
	}
	writeParts(&b, parts)
	if fp != nil {
		if payload, err = fp.payload(tree); err != nil {
			return "", nil, OutcomeInvalidRequest, err
		}
	}
	return b.String(), payload, "", nil
}

// derefEventBridge returns the EventBridge event in in.
func derefEventBridge(in any) events.EventBridgeEvent {
	if p, ok := in.(*events.EventBridgeEvent); ok {
		if p == nil {
			return events.EventBridgeEvent{}
		}
		return *p
	}
	return in.(events.EventBridgeEvent)
}
