package dedupe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// HandlerConfig configures Handler for results of type Out. Key is
// required; Scope is required for event types Handler knows no scope of
// (see Handler). A nil *HandlerConfig is refused, since it has no Key.
type HandlerConfig[Out any] struct {
	// Key is a JMESPath expression (see docs/powertools.md, "Expressions")
	// that selects the event's idempotency key from its JSON, as
	// Powertools' event_key_jmespath: "id" for an EventBridge event,
	// "Records[].Sns.MessageId" for an SNS notification, "[customer,
	// orderId]" for a key of two fields. An event for which it selects no
	// usable key (a missing field, null, an empty string, an object, a
	// boolean, a number that is not whole, a value made of literals
	// alone such as id && 'v1', one picked out of a list or object that
	// mixes literals with fields such as ['v1', id][0], a string computed
	// from comparisons alone such as to_string(!id)) is refused with an
	// error wrapping ErrNoKey: the handler does not run. A literal that
	// is a function's parameter is no part of what it selects:
	// split(pk, '#')[1] is a key. Select the key rather than compute it:
	// length(items) is a key, shared by every event with as many items.
	Key string

	// Fingerprint is a JMESPath expression that selects what of the
	// event identifies the request, as Powertools'
	// payload_validation_jmespath: a duplicate whose selection differs
	// is refused with ErrFingerprintMismatch. An event for which it
	// selects no information (only nulls, empty lists or objects) is
	// refused with ErrNoFingerprint. Empty means the event type's
	// default (see Handler).
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

	// Retention is how long a completed run is replayed, overriding
	// Config.Retention for this handler, as Powertools'
	// expires_after_seconds. Zero means the guard's; Handler refuses a
	// value below MinRetention (negative included). A store that keeps
	// large results elsewhere must keep them as long (dynamostore's
	// LargeResults: the bucket's lifecycle, docs/large-responses.md),
	// else a duplicate after the lifecycle gets ErrResultOmitted.
	Retention time.Duration

	// Keep reports whether a result is stored and replayed. A result it
	// rejects is returned to the caller and not stored, and its key is
	// released, so that a retry runs h again, as HTTPConfig.Keep releases
	// a 5xx answer. Nil keeps every result.
	Keep func(Out) bool

	// OnReplay, when set, is called with every replayed result before it
	// is returned (h did not run), and may adjust it, as
	// HTTPConfig.OnReplay adjusts a replayed response and Powertools'
	// response_hook does: it is how the handler's caller learns that an
	// answer was replayed. It sees a decoded copy: the stored record is
	// not changed.
	OnReplay func(ctx context.Context, out *Out)
}

// Handler makes a Lambda handler idempotent, as Powertools' idempotent
// decorator does: the returned function runs h at most once per key and
// answers a duplicate with the first run's Out, stored JSON-encoded and
// decoded again so that it encodes to the same bytes (see Once, which it
// is built on). The key is selected from the event by cfg.Key, within a
// scope:
//
//	event type                 default scope                          default fingerprint
//	events.EventBridgeEvent    account, region, source, detail-type   detail
//	any other type             none: cfg.Scope is required            the whole event
//
// Expressions see the event as h sees it: the JSON encoding/json writes
// for the In the runtime decoded, numbers exact; the whole-event
// fingerprint is that JSON (CanonicalJSON).
//
// It suits events that are one request each: EventBridge events, SNS
// notifications (events.SNSEvent, one record per invocation), S3
// notifications (events.S3Event), a Step Functions task's input, direct
// invocations; the examples show each. Events that have an adapter of
// their own are refused at construction, with the adapter to use: HTTP
// requests (HTTPAPI, RESTAPI, FunctionURL; an ALB request is refused
// too) and batches whose items must be guarded one by one (SQS, Kinesis,
// DynamoDBStream; events.KafkaEvent, events.ActiveMQEvent,
// events.RabbitMQEvent and events.KinesisFirehoseEvent, whose retries may
// regroup records: guard each record with Once).
//
// The function returns h's own errors (after releasing the key, so a
// retry runs again), a *ConflictError (in progress: Config.Wait lets it
// wait for the first run instead; or the key reused with a different
// fingerprint), ErrResultOmitted, store failures, and refusals: ErrNoKey,
// ErrNoFingerprint. Each of these reaches Lambda as an error, so an
// asynchronous event is retried and then sent to its dead-letter queue.
// A run whose result could not be recorded (ErrNotStored,
// ErrRanUnguarded) returns h's result and no error: the guard logs it;
// one whose result could not be encoded returns it with the error
// (ErrResultUnencodable), since the runtime cannot encode it either.
//
// Handler compiles the expressions and checks cfg and the types when it
// is called, and returns an error naming the field or type and the fix
// for what could never work: a nil cfg or an empty Key; an expression
// that does not compile; a Key or Fingerprint that reads nothing of the
// event (every event would share it); a Key or Scope that can only select
// something that is no key (a boolean, an object); a Fingerprint that can
// only select null; a Retention below MinRetention; an In that has an
// adapter of its own or can never be scoped (the event types above, as
// values, pointers, types defined from them or structs embedding them; a
// WebSocket or authorizer request; a struct of yours into which the runtime would decode an HTTP
// request's requestContext, matching names case-insensitively); an Out
// that can never be stored and replayed (a streamed response, an
// interface with methods, a type encoding/json always fails on).
//
//	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[Receipt]{Key: "id"}, process)
//	if err != nil {
//		log.Fatal(err) // in main
//	}
//	lambda.Start(h)
func Handler[In, Out any](g *Guard, cfg *HandlerConfig[Out], h func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, error), error) {
	if g == nil || h == nil {
		return nil, errors.New("dedupe: Handler: nil Guard or handler")
	}
	if cfg == nil {
		return nil, errors.New(`dedupe: Handler: the HandlerConfig is nil; pass one whose Key is a JMESPath expression that selects the event's idempotency key, such as "id"`)
	}
	c := *cfg
	if strings.TrimSpace(c.Key) == "" {
		return nil, errors.New(`dedupe: Handler: HandlerConfig.Key is empty; set it to a JMESPath expression that selects the event's idempotency key, such as "id" or "[customer, orderId]"`)
	}
	if c.Retention < 0 || (c.Retention > 0 && c.Retention < MinRetention) {
		return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Retention is %v: set it to at least %v (MinRetention), or 0 for the guard's", c.Retention, MinRetention)
	}
	key, err := compileExpr(c.Key)
	if err != nil {
		return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Key: %w", err)
	}
	var fp, scope *jmesExpr
	if c.Fingerprint != "" {
		if fp, err = compileExpr(c.Fingerprint); err != nil {
			return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Fingerprint: %w", err)
		}
	}
	if c.Scope != "" {
		if scope, err = compileExpr(c.Scope); err != nil {
			return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Scope: %w", err)
		}
	}
	var zero In
	kind := kindOf(zero)
	if err := checkInType(reflect.TypeFor[In]()); err != nil {
		return nil, err
	}
	if kind == customEvent && scope == nil {
		return nil, fmt.Errorf("dedupe: Handler: HandlerConfig.Scope is empty and events of type %T have no default scope; set it to an expression that names where the events come from, a literal such as \"'orders-service'\" or a field such as \"tenantId\", so that two sources' keys never meet", zero)
	}
	if err := checkExprs(key, fp, scope); err != nil {
		return nil, err
	}
	if err := checkOutType(reflect.TypeFor[Out]()); err != nil {
		return nil, err
	}
	return func(ctx context.Context, in In) (Out, error) {
		var out Out
		k, payload, outcome, err := handlerKey(in, kind, key, fp, scope)
		if err != nil {
			g.emit(ctx, Event{Outcome: outcome, Err: err})
			return out, err
		}
		ran := false
		a, err := onceKeep(ctx, g, Call{Key: k, Retention: c.Retention}, payload, c.Keep, func(ctx context.Context) (Out, error) {
			ran = true
			return h(ctx, in)
		})
		switch {
		case err != nil:
			return out, err // h's own error when it ran: Lambda's, as in the HTTP adapters
		case errors.Is(a.Warning, errUnencodable):
			// The run is recorded without its result, which the Lambda
			// runtime could not encode either: say why.
			return a.Value, a.Warning
		case a.Replayed && !ran && c.OnReplay != nil:
			c.OnReplay(ctx, &a.Value)
		}
		return a.Value, nil
	}, nil
}

// checkExprs refuses, at construction, key, fingerprint and scope
// expressions that could never work: a key or fingerprint that reads
// nothing of the event (every event would share it), and a selection
// that can never be a key, or is always null.
func checkExprs(key, fp, scope *jmesExpr) error {
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

// The kinds of event Handler knows a default scope of.
const (
	customEvent = iota
	eventBridgeEvent
)

// kindOf returns the kind of an event type.
func kindOf(in any) int {
	switch in.(type) {
	case events.EventBridgeEvent, *events.EventBridgeEvent:
		return eventBridgeEvent
	}
	return customEvent
}

// handlerKey returns the guard key and the fingerprinted payload of one
// event, or the outcome and error that refuse it. Expressions see the
// event as the handler does: its JSON as encoding/json writes the value
// the runtime decoded, numbers exact.
//
//	handler|<default scope>|<Scope selection>|<Key selection>   (see keySel.write)
func handlerKey(in any, kind int, key, fp, scope *jmesExpr) (k string, payload []byte, outcome string, err error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return "", nil, OutcomeInvalidRequest, fmt.Errorf("%w: encode event: %w", ErrNoKey, safeJSONError(err))
	}
	if !marshaledValid(in, raw) {
		return "", nil, OutcomeInvalidRequest, fmt.Errorf("%w: %w", ErrNoKey, errNotUTF8)
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
		sel, err := scope.scopeSel(tree)
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
