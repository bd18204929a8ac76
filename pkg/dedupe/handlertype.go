package dedupe

import (
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// What Handler decides from its type parameters alone, at construction.

// unscopedEvents names the event types that carry a requestContext but
// no caller Handler could scope keys by, and what to use instead. (Edit
// the advice here when an adapter for one of them exists.)
var unscopedEvents = map[reflect.Type]string{
	reflect.TypeFor[events.ALBTargetGroupRequest](): "an ALB request names no caller Handler can trust; " +
		"use the ALB adapter (dedupe.ALB), which scopes keys by target group and takes the caller from HTTPConfig.ALBAuth, Principal or SharedScope",
	reflect.TypeFor[events.APIGatewayWebsocketProxyRequest](): "a WebSocket message is not a request Handler can scope; " +
		"call Guard.Do with a Call.Key made of the route, the caller (requestContext.authorizer) and the client's key",
	reflect.TypeFor[events.APIGatewayCustomAuthorizerRequestTypeRequest](): "an authorizer decides, it has no effect to guard; do not wrap it",
	reflect.TypeFor[events.APIGatewayV2CustomAuthorizerV1Request]():        "an authorizer decides, it has no effect to guard; do not wrap it",
	reflect.TypeFor[events.APIGatewayV2CustomAuthorizerV2Request]():        "an authorizer decides, it has no effect to guard; do not wrap it",
	reflect.TypeFor[events.AppSyncLambdaAuthorizerRequest]():               "an authorizer decides, it has no effect to guard; do not wrap it",
}

// adaptedEvents names the event types that have an entry point of their
// own, which Handler refuses with the entry point to use: HTTP requests,
// whose keys the HTTP adapters scope by caller, API, stage and route; and
// batches, whose items must be guarded one by one, so that a retry that
// regroups them (a partial batch response, Kafka's regrouping, a
// redelivery of fewer messages) loses none.
var adaptedEvents = map[reflect.Type]string{
	reflect.TypeFor[events.APIGatewayV2HTTPRequest]():  "use dedupe.HTTPAPI, which scopes keys by API, stage, route and caller",
	reflect.TypeFor[events.APIGatewayProxyRequest]():   "use dedupe.RESTAPI, which scopes keys by API, stage, route and caller",
	reflect.TypeFor[events.LambdaFunctionURLRequest](): "use dedupe.FunctionURL, which scopes keys by URL, route and caller",
	reflect.TypeFor[events.SQSEvent]():                 "a batch's messages are guarded one by one: use dedupe.SQS",
	reflect.TypeFor[events.KinesisEvent]():             "a batch's records are guarded one by one: use dedupe.Kinesis",
	reflect.TypeFor[events.DynamoDBEvent]():            "a batch's records are guarded one by one: use dedupe.DynamoDBStream",
	reflect.TypeFor[events.KafkaEvent](): "a Kafka batch is retried regrouped, so one key for the batch would lose records; " +
		"guard each record with dedupe.Once, keyed by its topic, partition and offset",
	reflect.TypeFor[events.ActiveMQEvent](): "a broker's batch may be redelivered regrouped, so one key for the batch would lose messages; " +
		"guard each message with dedupe.Once, keyed by its message ID",
	reflect.TypeFor[events.RabbitMQEvent](): "a broker's batch may be redelivered regrouped, so one key for the batch would lose messages; " +
		"guard each message with dedupe.Once, keyed by its message ID",
	reflect.TypeFor[events.KinesisFirehoseEvent](): "a Firehose batch answers each record, and may be retried regrouped; " +
		"guard each record with dedupe.Once, keyed by its record ID",
}

// httpRequestAdvice is what a refusal of an HTTP request in another type
// says to take.
const httpRequestAdvice = "take events.APIGatewayV2HTTPRequest, events.APIGatewayProxyRequest or events.LambdaFunctionURLRequest with the HTTP adapters (HTTPAPI, RESTAPI, FunctionURL), which scope keys by caller"

// checkInType refuses an event type Handler can never scope: one of
// unscopedEvents, or a struct the Lambda runtime would decode an HTTP
// request's requestContext into (encoding/json matches field names
// case-insensitively, so an untagged RequestContext field, a
// `json:"requestcontext"` tag, or a field promoted from an embedded
// struct all count). Maps, any and raw JSON are checked per event.
func checkInType(t reflect.Type) error {
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if advice, ok := unscopedEvents[base]; ok {
		return fmt.Errorf("dedupe: Handler: events of type %v cannot be scoped: %s", t, advice)
	}
	for et, advice := range adaptedEvents {
		if base == et || (base.Kind() == reflect.Struct && base.ConvertibleTo(et)) {
			return fmt.Errorf("dedupe: Handler: events of type %v have an entry point of their own: %s", t, advice)
		}
	}
	for et, advice := range unscopedEvents {
		if base.Kind() == reflect.Struct && base.ConvertibleTo(et) {
			return fmt.Errorf("dedupe: Handler: events of type %v cannot be scoped: %s", t, advice)
		}
	}
	if base.Kind() == reflect.Struct {
		// A struct that embeds one of them receives its fields: it is
		// that event, with more.
		for i := range base.NumField() {
			f := base.Field(i)
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if !f.Anonymous || f.Tag.Get("json") != "" {
				continue
			}
			if advice, ok := adaptedEvents[ft]; ok {
				return fmt.Errorf("dedupe: Handler: events of type %v embed %v, which has an entry point of its own: %s", t, ft, advice)
			}
		}
	}
	if kindOf(reflect.Zero(t).Interface()) != customEvent {
		return nil
	}
	if field, ok := requestContextField(base, map[reflect.Type]bool{}); ok {
		return fmt.Errorf("dedupe: Handler: events of type %v are HTTP requests (field %s receives the requestContext), whose caller Handler cannot tell in a type of yours; %s", t, field, httpRequestAdvice)
	}
	return nil
}

// requestContextField returns the struct field of t that the JSON member
// "requestContext" decodes into, as encoding/json finds it.
func requestContextField(t reflect.Type, seen map[reflect.Type]bool) (string, bool) {
	if t.Kind() != reflect.Struct || seen[t] {
		return "", false
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if inner, ok := requestContextField(ft, seen); ok {
					return f.Name + "." + inner, true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, "requestContext") {
			return f.Name, true
		}
	}
	return "", false
}

// hasRequestContext reports whether a decoded event (a map, any, raw
// JSON) has a requestContext member, matched as the Lambda runtime
// matches names.
func hasRequestContext(tree any) bool {
	m, _ := tree.(map[string]any)
	for k, v := range m {
		if v != nil && strings.EqualFold(k, "requestContext") {
			return true
		}
	}
	return false
}

// checkOutType refuses a result type that can never be stored and
// replayed: a streamed response (an io.Reader), an interface with
// methods (a replay cannot decode into it), or a type encoding/json
// fails on whatever its value (a func, a channel, a complex number, a
// map keyed by one, reached through fields that are always encoded).
func checkOutType(t reflect.Type) error {
	reader := reflect.TypeFor[io.Reader]()
	switch {
	case t.Implements(reader) || (t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && reflect.PointerTo(t).Implements(reader)):
		return fmt.Errorf("dedupe: Handler: results of type %v are streamed, and a stream cannot be stored and replayed; return events.APIGatewayProxyResponse or events.LambdaFunctionURLResponse", t)
	case t.Kind() == reflect.Interface && t.NumMethod() > 0:
		return fmt.Errorf("dedupe: Handler: results of type %v cannot be replayed: a duplicate's result is decoded from JSON, which cannot fill an interface with methods; return a concrete type", t)
	}
	if path, ok := neverEncodes(t, "", map[reflect.Type]bool{}); ok {
		return fmt.Errorf("dedupe: Handler: results of type %v cannot be encoded as JSON (%s), so no run could be recorded with its result; change the type", t, path)
	}
	return nil
}

// neverEncodes reports whether encoding/json fails on every value of t,
// and where.
func neverEncodes(t reflect.Type, path string, seen map[reflect.Type]bool) (string, bool) {
	if t.Implements(reflect.TypeFor[json.Marshaler]()) || t.Implements(reflect.TypeFor[encoding.TextMarshaler]()) || seen[t] {
		return "", false
	}
	seen[t] = true
	defer delete(seen, t)
	here := func() string {
		if path == "" {
			return "a " + t.Kind().String()
		}
		return "field " + path + " is a " + t.Kind().String()
	}
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return here(), true
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			return "", false
		}
		if t.Key().Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
			return "", false
		}
		return here() + " keyed by a " + t.Key().Kind().String(), true
	case reflect.Array:
		if t.Len() > 0 {
			return neverEncodes(t.Elem(), path+"[0]", seen)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			_, opts, _ := strings.Cut(tag, ",")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) || strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
				continue
			}
			if !f.IsExported() && f.Type.Kind() != reflect.Struct {
				continue
			}
			name := f.Name
			if path != "" {
				name = path + "." + f.Name
			}
			if where, ok := neverEncodes(f.Type, name, seen); ok {
				return where, true
			}
		}
	}
	return "", false
}
