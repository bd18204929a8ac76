package dedupe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
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
	// selects no information (Expr.Payload) is refused with
	// ErrNoFingerprint. Empty means the event type's default (see
	// Handler).
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
// decoded again so that it encodes to the same bytes (see Once). The key
// is selected from the event by cfg.Key, within a scope:
//
//	event type                         default scope                       default fingerprint
//	events.EventBridgeEvent            account, region, source, detail-type  detail
//	events.APIGatewayV2HTTPRequest,    API and stage (domain for a URL),   method, path, query, body
//	events.APIGatewayProxyRequest,     route, principal (DefaultPrincipal;
//	events.LambdaFunctionURLRequest    none: refused unless SharedScope)
//	any other type                     none: cfg.Scope is required         the whole event
//
// Expressions see the event as h sees it: the JSON encoding/json writes
// for the In the runtime decoded, numbers exact; the whole-event
// fingerprint is that JSON (CanonicalJSON).
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
// An HTTP response (those three, and events.ALBTargetGroupResponse) is
// stored by the HTTP adapters' rule, DefaultKeep: a 5xx, 408, 425 or 429
// (or a nil response) releases the key, so that a retry runs h again.
// A run whose result could not be recorded (ErrNotStored,
// ErrRanUnguarded) returns h's result and no error: the guard logs it;
// one whose result could not be encoded returns it with the error
// (ErrResultUnencodable), since the runtime cannot encode it either.
//
// Handler compiles the expressions and checks cfg and the types when it
// is called, and returns an error naming the field or type and the fix
// for what could never work: an expression CompileExpr refuses; a Key or
// Fingerprint that reads nothing of the event (every event would share
// it); a Key or Scope that can only select something that is no key (a
// boolean, an object); a Fingerprint that can only select null; an In
// that can never be scoped (an events.ALBTargetGroupRequest, a WebSocket
// or authorizer request, a struct of yours into which the runtime would
// decode an HTTP request's requestContext, matching names
// case-insensitively); an Out that can never be stored and replayed (a
// streamed response, an interface with methods, a type encoding/json
// always fails on).
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
	if err := checkInType(reflect.TypeFor[In]()); err != nil {
		return nil, err
	}
	switch {
	case kind == customEvent && scope == nil:
		return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Scope is empty and events of type %T have no default scope; set it to an expression that names where the events come from, a literal such as \"'orders-service'\" or a field such as \"tenantId\", so that two sources' keys never meet", zero)
	case cfg.SharedScope && kind != httpEventKind:
		return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.SharedScope applies to API Gateway and Function URL events only, not to %T; remove it", zero)
	}
	if err := checkExprs(key, fp, scope); err != nil {
		return nil, err
	}
	outType := reflect.TypeFor[Out]()
	if err := checkOutType(outType); err != nil {
		return nil, err
	}
	var keep func(Out) bool
	if httpResponse(outType) {
		keep = func(o Out) bool { return keepHTTP(o) }
	}
	return func(ctx context.Context, in In) (Out, error) {
		var out Out
		k, payload, outcome, err := handlerKey(in, kind, key, fp, scope, cfg.SharedScope)
		if err != nil {
			g.emit(ctx, Event{Outcome: outcome, Err: err})
			return problemOr[Out](g, err)
		}
		ran := false
		a, err := onceKeep(ctx, g, k, payload, keep, func(ctx context.Context) (Out, error) {
			ran = true
			return h(ctx, in)
		})
		switch {
		case err != nil && ran:
			return out, err // h's own error: Lambda's, as in the HTTP adapters
		case err != nil:
			return problemOr[Out](g, err)
		case errors.Is(a.Warning, errUnencodable):
			// The run is recorded without its result, which the Lambda
			// runtime could not encode either: say why.
			return a.Value, a.Warning
		}
		return a.Value, nil
	}, nil
}

// checkExprs refuses, at construction, key, fingerprint and scope
// expressions that could never work: a key or fingerprint that reads
// nothing of the event (every event would share it), and a selection
// that can never be a key, or is always null.
func checkExprs(key, fp, scope *Expr) error {
	const keyKinds = kString | kNumber | kArray
	switch {
	case !key.shape.readsEvent():
		return fmt.Errorf("dedupe: Handler: HandlerConfig.Key %q reads nothing of the event, so every event would have one key; select a field of the event", key.src)
	case key.shape.kinds&keyKinds == 0:
		return fmt.Errorf("dedupe: Handler: HandlerConfig.Key %q always selects %s, never a key (a string, a whole number, or a list of them)", key.src, key.shape.kinds)
	case scope != nil && scope.shape.kinds&keyKinds == 0:
		return fmt.Errorf("dedupe: Handler: HandlerConfig.Scope %q always selects %s, never a scope (a string, a whole number, or a list of them)", scope.src, scope.shape.kinds)
	case fp != nil && !fp.shape.readsEvent():
		return fmt.Errorf("dedupe: Handler: HandlerConfig.Fingerprint %q reads nothing of the event, so every event would have one fingerprint; select the fields that identify the request", fp.src)
	case fp != nil && fp.shape.kinds&^kNull == 0:
		return fmt.Errorf("dedupe: Handler: HandlerConfig.Fingerprint %q always selects null", fp.src)
	}
	return nil
}

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
// event, or the outcome and error that refuse it. Expressions see the
// event as the handler does: its JSON as encoding/json writes the value
// the runtime decoded, numbers exact.
//
//	handler|<default scope>|<Scope selection>|<Key selection>   (see keySel.write)
func handlerKey(in any, kind int, key, fp, scope *Expr, shared bool) (k string, payload []byte, outcome string, err error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return "", nil, OutcomeInvalidRequest, fmt.Errorf("%w: encode event: %w", ErrNoKey, safeJSONError(err))
	}
	tree, err := decodeJSON(raw)
	if err != nil {
		return "", nil, OutcomeInvalidRequest, fmt.Errorf("%w: decode event: %w", ErrNoKey, err)
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
		if hasRequestContext(tree) {
			return "", nil, OutcomeInvalidRequest, fmt.Errorf("handler: an HTTP request decoded as %T has no known principal; %s: %w", in, httpRequestAdvice, ErrNoPrincipal)
		}
		// The whole event, as the handler sees it: encoding/json's
		// encoding of the decoded value, exact (never through float64).
		payload = raw
	}
	var b strings.Builder
	b.WriteString("handler|")
	stringSel(defScope...).write(&b)
	if scope != nil {
		sel, err := scope.keySel(tree)
		if err != nil {
			return "", nil, OutcomeInvalidKey, fmt.Errorf("scope: %w", err)
		}
		sel.write(&b)
	}
	sel, err := key.keySel(tree)
	if err != nil {
		return "", nil, OutcomeInvalidKey, err
	}
	sel.write(&b)
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
