package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// chargeReceipt is a typed handler result, replayed to duplicates.
type chargeReceipt struct {
	Order  string `json:"order"`
	Charge int    `json:"charge"`
}

// order is a custom event.
type order struct {
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// TestHandlerRefusesAtConstruction checks that every bad HandlerConfig is
// refused by Handler with a message naming the field and the fix.
func TestHandlerRefusesAtConstruction(t *testing.T) {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t"})
	eb := func(context.Context, events.EventBridgeEvent) (chargeReceipt, error) { return chargeReceipt{}, nil }
	custom := func(context.Context, order) (chargeReceipt, error) { return chargeReceipt{}, nil }
	for _, tt := range []struct {
		name string
		make func() error
		want string
	}{
		{"no key", func() error { _, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{}, eb); return err }, "HandlerConfig.Key is empty"},
		{"bad key", func() error {
			_, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "detail.["}, eb)
			return err
		}, "HandlerConfig.Key"},
		{"unknown function", func() error {
			_, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "powertools_jsn(body).id"}, eb)
			return err
		}, "unknown function"},
		{"bad fingerprint", func() error {
			_, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "id", Fingerprint: "a[?"}, eb)
			return err
		}, "HandlerConfig.Fingerprint"},
		{"bad scope", func() error {
			_, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "id", Scope: "nope("}, custom)
			return err
		}, "HandlerConfig.Scope"},
		{"custom event without scope", func() error {
			_, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "id"}, custom)
			return err
		}, "HandlerConfig.Scope is empty and events of type dedupe_test.order have no default scope"},
		{"nil config", func() error { _, err := dedupe.Handler[events.EventBridgeEvent, chargeReceipt](g, nil, eb); return err }, "the HandlerConfig is nil"},
		{"short retention", func() error {
			_, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "id", Retention: time.Second}, eb)
			return err
		}, "HandlerConfig.Retention is 1s: set it to at least 1m0s"},
		{"retention just below MinRetention", func() error {
			_, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "id", Retention: dedupe.MinRetention - time.Nanosecond}, eb)
			return err
		}, "HandlerConfig.Retention is 59.999999999s: set it to at least 1m0s"},
		{"negative retention", func() error {
			_, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "id", Retention: -time.Hour}, eb)
			return err
		}, "HandlerConfig.Retention is -1h0m0s"},
		{"nil guard", func() error {
			_, err := dedupe.Handler(nil, &dedupe.HandlerConfig[chargeReceipt]{Key: "id"}, eb)
			return err
		}, "nil Guard"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.make(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Handler = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// eventLog collects a guard's events.
type eventLog struct{ events []dedupe.Event }

func (l *eventLog) config(prefix string) *dedupe.Config {
	return &dedupe.Config{Prefix: prefix, OnOutcome: func(_ context.Context, e dedupe.Event) { l.events = append(l.events, e) }}
}

func (l *eventLog) last() string {
	if len(l.events) == 0 {
		return ""
	}
	return l.events[len(l.events)-1].Outcome
}

// TestHandlerEventBridge checks the wrapper on a real EventBridge event:
// a redelivery replays the typed result; the same business key from
// another source is another request; an event without the key field is
// refused, logged once, and never run.
func TestHandlerEventBridge(t *testing.T) {
	var ev events.EventBridgeEvent
	fixture(t, "eventbridge-event.json", &ev)
	var log eventLog
	g := dedupe.New(memstore.New(), log.config("billing"))
	runs := 0
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "detail.orderId", Fingerprint: "detail.[amount, currency]"},
		func(_ context.Context, ev events.EventBridgeEvent) (chargeReceipt, error) {
			runs++
			var d struct{ Amount int }
			json.Unmarshal(ev.Detail, &d)
			return chargeReceipt{Order: "ord_1001", Charge: d.Amount}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := h(ctx, ev)
	if err != nil || first != (chargeReceipt{"ord_1001", 1250}) {
		t.Fatalf("first = %+v, %v", first, err)
	}
	// A producer's re-put: new ID and time, same order and amount.
	reput := ev
	reput.ID = "0b9f4a57-0000-4000-8000-000000000001"
	again, err := h(ctx, reput)
	if err != nil || again != first || runs != 1 || log.last() != dedupe.OutcomeReplayed {
		t.Errorf("re-put = %+v, %v after %d runs (%s); want the replay", again, err, runs, log.last())
	}
	// Another source with the same order ID is another request.
	other := ev
	other.Source = "com.example.returns"
	if _, err := h(ctx, other); err != nil || runs != 2 {
		t.Errorf("other source: %v after %d runs, want a run of its own", err, runs)
	}
	// The same order with another amount is refused.
	changed := ev
	changed.Detail = json.RawMessage(strings.Replace(string(ev.Detail), "1250", "9999", 1))
	if _, err := h(ctx, changed); !errors.Is(err, dedupe.ErrFingerprintMismatch) || runs != 2 {
		t.Errorf("changed amount: %v after %d runs, want ErrFingerprintMismatch", err, runs)
	}
	// An event without the key field is refused, never run unguarded.
	keyless := ev
	keyless.Detail = json.RawMessage(`{"amount":1250,"currency":"EUR"}`)
	n := len(log.events)
	if _, err := h(ctx, keyless); !errors.Is(err, dedupe.ErrNoKey) || runs != 2 || len(log.events) != n+1 || log.last() != dedupe.OutcomeInvalidKey {
		t.Errorf("keyless: %v after %d runs, %d events (%s); want ErrNoKey, no run, one invalid_key event", err, runs, len(log.events)-n, log.last())
	}
}

// TestHandlerRefusesAdaptedEvents checks that Handler refuses, at
// construction, the events that have an entry point of their own, as
// values, pointers, aliases and types defined from them, naming the entry
// point; and that an HTTP request decoded into a map is refused per event.
func TestHandlerRefusesAdaptedEvents(t *testing.T) {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t"})
	type alias = events.APIGatewayV2HTTPRequest
	type defined events.APIGatewayProxyRequest
	type definedBatch events.SQSEvent
	type embeddedBatch struct {
		*events.KinesisEvent
		Note string
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"HTTP API", svcHandler(g, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{}, nil
		}), "use dedupe.HTTPAPI"},
		{"HTTP API pointer", svcHandler(g, func(context.Context, *events.APIGatewayV2HTTPRequest) (string, error) { return "", nil }), "use dedupe.HTTPAPI"},
		{"HTTP API alias", svcHandler(g, func(context.Context, alias) (string, error) { return "", nil }), "use dedupe.HTTPAPI"},
		{"REST API defined type", svcHandler(g, func(context.Context, defined) (string, error) { return "", nil }), "use dedupe.RESTAPI"},
		{"REST API", svcHandler(g, func(context.Context, events.APIGatewayProxyRequest) (string, error) { return "", nil }), "use dedupe.RESTAPI"},
		{"Function URL", svcHandler(g, func(context.Context, **events.LambdaFunctionURLRequest) (string, error) { return "", nil }), "use dedupe.FunctionURL"},
		{"SQS", svcHandler(g, func(context.Context, events.SQSEvent) (string, error) { return "", nil }), "use dedupe.SQS"},
		{"SQS defined type", svcHandler(g, func(context.Context, *definedBatch) (string, error) { return "", nil }), "use dedupe.SQS"},
		{"Kinesis", svcHandler(g, func(context.Context, events.KinesisEvent) (string, error) { return "", nil }), "use dedupe.Kinesis"},
		{"Kinesis embedded", svcHandler(g, func(context.Context, embeddedBatch) (string, error) { return "", nil }), "embed events.KinesisEvent, which has an entry point of its own: a batch's records are guarded one by one: use dedupe.Kinesis"},
		{"DynamoDB Streams", svcHandler(g, func(context.Context, *events.DynamoDBEvent) (string, error) { return "", nil }), "use dedupe.DynamoDBStream"},
		{"Kafka", svcHandler(g, func(context.Context, events.KafkaEvent) (string, error) { return "", nil }), "guard each record with dedupe.Once"},
		{"ActiveMQ", svcHandler(g, func(context.Context, events.ActiveMQEvent) (string, error) { return "", nil }), "guard each message with dedupe.Once"},
		{"RabbitMQ", svcHandler(g, func(context.Context, *events.RabbitMQEvent) (string, error) { return "", nil }), "guard each message with dedupe.Once"},
		{"Firehose", svcHandler(g, func(context.Context, events.KinesisFirehoseEvent) (events.KinesisFirehoseResponse, error) {
			return events.KinesisFirehoseResponse{}, nil
		}), "guard each record with dedupe.Once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) || !strings.HasPrefix(tt.err.Error(), "dedupe: Handler: ") {
				t.Errorf("got %v, want a refusal naming %q", tt.err, tt.want)
			}
		})
	}

	raw, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: `headers."idempotency-key"`, Scope: "requestContext.apiId"},
		func(context.Context, map[string]any) (string, error) { t.Error("ran"); return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	fixture(t, "apigw-v2-jwt.json", &m)
	if _, err := raw(context.Background(), m); !errors.Is(err, dedupe.ErrNoPrincipal) {
		t.Errorf("HTTP request as a map: %v, want ErrNoPrincipal", err)
	}
}

// svcHandler builds a Handler with Key "id" and Scope "'svc'", and
// returns its refusal.
func svcHandler[In, Out any](g *dedupe.Guard, h func(context.Context, In) (Out, error)) error {
	_, err := dedupe.Handler(g, &dedupe.HandlerConfig[Out]{Key: "id", Scope: "'svc'"}, h)
	return err
}

// TestHandlerCustomEvent checks the wrapper on a custom event: the named
// scope keeps tenants apart, a null scope is refused.
func TestHandlerCustomEvent(t *testing.T) {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "orders"})
	runs := 0
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[chargeReceipt]{Key: "id", Scope: "tenant", Fingerprint: "amount"},
		func(_ context.Context, o order) (chargeReceipt, error) {
			runs++
			return chargeReceipt{Order: o.Tenant + "/" + o.ID, Charge: o.Amount}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		in       order
		want     chargeReceipt
		wantRuns int
		wantErr  error
	}{
		{order{"acme", "o-1", 10}, chargeReceipt{"acme/o-1", 10}, 1, nil},
		{order{"acme", "o-1", 10}, chargeReceipt{"acme/o-1", 10}, 1, nil},
		{order{"globex", "o-1", 20}, chargeReceipt{"globex/o-1", 20}, 2, nil},
		{order{"acme", "o-1", 30}, chargeReceipt{}, 2, dedupe.ErrFingerprintMismatch},
		{order{"", "o-1", 10}, chargeReceipt{}, 2, dedupe.ErrNoKey},
		{order{"acme", "", 10}, chargeReceipt{}, 2, dedupe.ErrNoKey},
	} {
		got, err := h(ctx, tt.in)
		if got != tt.want || runs != tt.wantRuns || !errors.Is(err, tt.wantErr) {
			t.Errorf("%+v: got %+v, %v after %d runs; want %+v, %v after %d", tt.in, got, err, runs, tt.want, tt.wantErr, tt.wantRuns)
		}
	}
}

// TestHandlerRefusesTypesAndExpressions checks the refusals issue 30
// moved to construction: what the types or the expressions already
// decide is refused by Handler, naming the type or the field and what to
// do instead.
func TestHandlerRefusesTypesAndExpressions(t *testing.T) {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t"})
	refuse := func(name string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Handler = %v, want an error containing %q", name, err, want)
		}
	}
	type untagged struct {
		RequestContext map[string]any
		Body           string
	}
	type lowerTag struct {
		Ctx  map[string]any `json:"requestcontext"`
		Body string
	}
	type inner struct{ RequestContext struct{ APIID string } }
	type embedded struct {
		inner
		Body string
	}
	type embeddedPtr struct {
		*inner
		Body string
	}
	type extended struct {
		events.APIGatewayV2HTTPRequest
		Note string
	}
	err := svcHandler(g, func(context.Context, untagged) (string, error) { return "", nil })
	refuse("untagged RequestContext", err, "field RequestContext receives the requestContext")
	err = svcHandler(g, func(context.Context, lowerTag) (string, error) { return "", nil })
	refuse("requestcontext tag", err, "field Ctx receives the requestContext")
	err = svcHandler(g, func(context.Context, *embedded) (string, error) { return "", nil })
	refuse("embedded", err, "field inner.RequestContext")
	err = svcHandler(g, func(context.Context, embeddedPtr) (string, error) { return "", nil })
	refuse("embedded pointer", err, "field inner.RequestContext")
	err = svcHandler(g, func(context.Context, extended) (string, error) { return "", nil })
	refuse("extended HTTP request", err, "embed events.APIGatewayV2HTTPRequest, which has an entry point of its own: use dedupe.HTTPAPI")

	err = svcHandler(g, func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		return events.ALBTargetGroupResponse{}, nil
	})
	refuse("ALB", err, "events of type events.ALBTargetGroupRequest cannot be scoped: an ALB request names no caller Handler can trust; use the ALB adapter (dedupe.ALB)")
	err = svcHandler(g, func(context.Context, *events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{}, nil
	})
	refuse("WebSocket", err, "cannot be scoped: a WebSocket message")
	// A type defined from one of them is that event: it gets the same
	// advice, not only the generic requestContext refusal.
	type definedALB events.ALBTargetGroupRequest
	type definedAuthorizer events.APIGatewayV2CustomAuthorizerV2Request
	err = svcHandler(g, func(context.Context, definedALB) (string, error) { return "", nil })
	refuse("ALB defined type", err, "cannot be scoped: an ALB request names no caller Handler can trust; use the ALB adapter (dedupe.ALB)")
	err = svcHandler(g, func(context.Context, *definedAuthorizer) (string, error) { return "", nil })
	refuse("authorizer defined type", err, "cannot be scoped: an authorizer decides")

	err = svcHandler(g, func(context.Context, order) (*events.LambdaFunctionURLStreamingResponse, error) { return nil, nil })
	refuse("streamed", err, "are streamed")
	err = svcHandler(g, func(context.Context, order) (fmt.Stringer, error) { return nil, nil })
	refuse("interface", err, "cannot fill an interface with methods")
	type withChan struct {
		ID   string
		Done chan struct{}
	}
	err = svcHandler(g, func(context.Context, order) (withChan, error) { return withChan{}, nil })
	refuse("chan field", err, "field Done is a chan")
	// encoding/json encodes the exported fields of an embedded unexported
	// struct (and fails on a chan among them), and ignores an embedded
	// unexported type that is not a struct: Handler refuses exactly what
	// json.Marshal fails on.
	type hidden struct{ Done chan struct{} }
	type withHidden struct {
		hidden
		ID string
	}
	if _, jerr := json.Marshal(withHidden{}); jerr == nil {
		t.Fatal("json.Marshal encodes an embedded struct's chan; the case below tests nothing")
	}
	err = svcHandler(g, func(context.Context, order) (withHidden, error) { return withHidden{}, nil })
	refuse("embedded unexported struct with a chan", err, "is a chan")
	type hiddenChan chan struct{}
	type withHiddenChan struct {
		hiddenChan
		ID string
	}
	if _, jerr := json.Marshal(withHiddenChan{}); jerr != nil {
		t.Fatalf("json.Marshal of an embedded unexported chan: %v; the case below tests nothing", jerr)
	}
	if err = svcHandler(g, func(context.Context, order) (withHiddenChan, error) { return withHiddenChan{}, nil }); err != nil {
		t.Errorf("embedded unexported chan, which json ignores: Handler = %v, want it accepted", err)
	}

	// An array of a type json cannot encode fails json.Marshal when it
	// has an element, and encodes as [] when it has none.
	type withChans struct{ Done [1]chan struct{} }
	type withNoChans struct{ Done [0]chan struct{} }
	if _, jerr := json.Marshal(withChans{}); jerr == nil {
		t.Fatal("json.Marshal encodes an array of one chan; the case below tests nothing")
	}
	if _, jerr := json.Marshal(withNoChans{}); jerr != nil {
		t.Fatalf("json.Marshal of an array of no chan: %v; the case below tests nothing", jerr)
	}
	err = svcHandler(g, func(context.Context, order) (withChans, error) { return withChans{}, nil })
	refuse("array of one chan", err, "field Done[0] is a chan")
	if err = svcHandler(g, func(context.Context, order) (withNoChans, error) { return withNoChans{}, nil }); err != nil {
		t.Errorf("array of no chan, which json encodes as []: Handler = %v, want it accepted", err)
	}
	// A value type whose pointer is an io.Reader is a stream too: the
	// runtime streams what the handler returns through its address.
	err = svcHandler(g, func(context.Context, order) (pointerReader, error) { return pointerReader{}, nil })
	refuse("value whose pointer is a reader", err, "are streamed")

	for _, tt := range []struct{ name, key, fp, scope, want string }{
		{"constant key", "'order'", "", "", "HandlerConfig.Key \"'order'\" reads nothing of the event"},
		{"boolean key", "id == 'x'", "", "", "always selects null or a boolean, never a key"},
		{"object key", "{id: id}", "", "", "always selects an object"},
		{"constant fingerprint", "id", "`{\"v\": 1}`", "", "HandlerConfig.Fingerprint \"`{\\\"v\\\": 1}`\" reads nothing of the event"},
		{"boolean scope", "id", "", "tenant == 'a'", "HandlerConfig.Scope \"tenant == 'a'\" always selects"},
		{"variadic without arguments", "not_null()", "", "", "not_null() called with 0 arguments"},
	} {
		scope := tt.scope
		if scope == "" {
			scope = "'svc'"
		}
		_, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: tt.key, Fingerprint: tt.fp, Scope: scope},
			func(context.Context, order) (string, error) { return "", nil })
		refuse(tt.name, err, tt.want)
	}
}

// TestHandlerRequestContextInAMap checks that an HTTP request decoded
// into a map is refused however the runtime spelled requestContext.
func TestHandlerRequestContextInAMap(t *testing.T) {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger()})
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: "id", Scope: "'svc'"},
		func(context.Context, map[string]any) (string, error) { t.Error("ran"); return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"requestContext", "RequestContext", "requestcontext"} {
		if _, err := h(context.Background(), map[string]any{"id": "1", name: map[string]any{"apiId": "a"}}); !errors.Is(err, dedupe.ErrNoPrincipal) {
			t.Errorf("%s: %v, want ErrNoPrincipal", name, err)
		}
	}
}

// account is a custom event whose IDs do not fit a float64.
type account struct {
	Tenant  string `json:"tenant"`
	ID      string `json:"id"`
	Account int64  `json:"account"`
}

// TestHandlerDefaultFingerprintExact checks that the default "whole
// event" fingerprint of a custom type is exact (issue 30): two accounts
// one apart, beyond float64's exact range, are two requests.
func TestHandlerDefaultFingerprintExact(t *testing.T) {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger()})
	runs := 0
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[int64]{Key: "id", Scope: "tenant"},
		func(_ context.Context, a account) (int64, error) { runs++; return a.Account, nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := h(ctx, account{"acme", "transfer-1", 1234567890123456789})
	if err != nil || first != 1234567890123456789 {
		t.Fatalf("first = %d, %v", first, err)
	}
	again, err := h(ctx, account{"acme", "transfer-1", 1234567890123456789})
	if err != nil || again != first || runs != 1 {
		t.Errorf("retry = %d, %v after %d runs; want the replay", again, err, runs)
	}
	other, err := h(ctx, account{"acme", "transfer-1", 1234567890123456788})
	if !errors.Is(err, dedupe.ErrFingerprintMismatch) || runs != 1 {
		t.Errorf("the neighbouring account with the same key = %d, %v after %d runs; want ErrFingerprintMismatch, never the first account's answer", other, err, runs)
	}
	// Keyed by the account itself, the two are two keys.
	byAccount, err := dedupe.Handler(g, &dedupe.HandlerConfig[int64]{Key: "account", Scope: "tenant"},
		func(_ context.Context, a account) (int64, error) { runs++; return a.Account, nil })
	if err != nil {
		t.Fatal(err)
	}
	a, errA := byAccount(ctx, account{"acme", "x", 1234567890123456789})
	b, errB := byAccount(ctx, account{"acme", "x", 1234567890123456788})
	if errA != nil || errB != nil || a == b || runs != 3 {
		t.Errorf("keyed by account: %d, %v and %d, %v after %d runs; want two runs", a, errA, b, errB, runs)
	}
}

// TestHandlerRawEventFingerprint checks that the whole-event fingerprint
// of a raw JSON event keeps what decoding it may tell apart: duplicate
// members in their order and big numbers.
func TestHandlerRawEventFingerprint(t *testing.T) {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger()})
	runs := 0
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: "id", Scope: "'svc'"},
		func(_ context.Context, raw json.RawMessage) (string, error) { runs++; return string(raw), nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, ev := range []string{`{"id":"k","amount":1,"amount":2}`, `{"id":"k","amount":2,"amount":1}`, `{"id":"k","n":9007199254740993}`, `{"id":"k","n":9007199254740992}`} {
		if i%2 == 0 {
			g = dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger()})
			h, _ = dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: "id", Scope: "'svc'"},
				func(_ context.Context, raw json.RawMessage) (string, error) { runs++; return string(raw), nil })
			if _, err := h(ctx, json.RawMessage(ev)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := h(ctx, json.RawMessage(ev)); !errors.Is(err, dedupe.ErrFingerprintMismatch) {
			t.Errorf("%s after its neighbour: %q, %v; want ErrFingerprintMismatch", ev, got, err)
		}
	}
}

// receiptOut is a result whose MarshalJSON fails or panics after the
// work is done.
type receiptOut struct {
	ID   string
	mode string // "panic", "error" or ""
}

func (r receiptOut) MarshalJSON() ([]byte, error) {
	switch r.mode {
	case "panic":
		var m map[string]int
		m["boom"]++ // a nil map: a panic of the runtime
	case "error":
		return nil, errors.New("no encoding today")
	}
	return json.Marshal(map[string]string{"id": r.ID})
}

func (r *receiptOut) UnmarshalJSON(b []byte) error {
	var m map[string]string
	err := json.Unmarshal(b, &m)
	r.ID = m["id"]
	return err
}

// TestHandlerResultEncodingFails checks that a result whose encoding
// fails or panics after h returned records that the work ran (issue 30):
// a retry never runs h again, it gets ErrResultOmitted.
func TestHandlerResultEncodingFails(t *testing.T) {
	for _, mode := range []string{"panic", "error"} {
		t.Run(mode, func(t *testing.T) {
			g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger()})
			runs := 0
			h, err := dedupe.Handler(g, &dedupe.HandlerConfig[receiptOut]{Key: "id", Scope: "tenant"},
				func(_ context.Context, o order) (receiptOut, error) {
					runs++
					return receiptOut{ID: o.ID, mode: mode}, nil
				})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := h(ctx, order{"acme", "o-1", 10}); !errors.Is(err, dedupe.ErrResultUnencodable) || runs != 1 {
				t.Errorf("first: %v after %d runs; want ErrResultUnencodable", err, runs)
			}
			if _, err := h(ctx, order{"acme", "o-1", 10}); !errors.Is(err, dedupe.ErrResultOmitted) || runs != 1 {
				t.Errorf("retry: %v after %d runs; want ErrResultOmitted and no second run", err, runs)
			}
		})
	}
	// Once keeps the value and says why it was not recorded with it.
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger()})
	a, err := dedupe.Once(context.Background(), g, "k", nil, func(context.Context) (receiptOut, error) { return receiptOut{ID: "r", mode: "panic"}, nil })
	if err != nil || a.Value.ID != "r" || !a.Recorded || !errors.Is(a.Warning, dedupe.ErrResultUnencodable) || !strings.Contains(a.Warning.Error(), "panicked: assignment to entry in nil map") {
		t.Errorf("Once with a panicking MarshalJSON = %+v, %v; want the value, recorded, with ErrResultUnencodable naming the panic", a, err)
	}
}

// TestHandlerKeep checks HandlerConfig.Keep: a result it rejects is
// returned and not stored, and the retry runs again; one it keeps is
// replayed; nil keeps every result.
func TestHandlerKeep(t *testing.T) {
	keepStatus := func(r events.APIGatewayV2HTTPResponse) bool { return dedupe.DefaultKeep(r.StatusCode) }
	for _, tt := range []struct {
		status int
		keep   func(events.APIGatewayV2HTTPResponse) bool
		stored bool
	}{{201, keepStatus, true}, {409, keepStatus, true}, {500, keepStatus, false}, {503, keepStatus, false},
		{429, keepStatus, false}, {408, keepStatus, false}, {425, keepStatus, false}, {503, nil, true}} {
		g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger()})
		runs, replays := 0, 0
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[events.APIGatewayV2HTTPResponse]{Key: "id", Scope: "tenant", Keep: tt.keep,
			OnReplay: func(context.Context, *events.APIGatewayV2HTTPResponse) { replays++ }},
			func(context.Context, order) (events.APIGatewayV2HTTPResponse, error) {
				runs++
				return events.APIGatewayV2HTTPResponse{StatusCode: tt.status}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if resp, err := h(context.Background(), order{"acme", "o-1", 1}); err != nil || resp.StatusCode != tt.status {
				t.Errorf("%d: %d, %v", tt.status, resp.StatusCode, err)
			}
		}
		if want := map[bool]int{true: 1, false: 2}[tt.stored]; runs != want || replays != 2-want {
			t.Errorf("status %d (keep %v): %d runs and %d replays for two calls, want %d runs", tt.status, tt.keep != nil, runs, replays, want)
		}
	}
}

// TestHandlerRetention checks HandlerConfig.Retention: the record is
// replayed for its Retention, not the guard's, and runs again after.
func TestHandlerRetention(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger(), Retention: time.Hour, Now: func() time.Time { return now }})
	runs := 0
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[int]{Key: "id", Scope: "tenant", Retention: 48 * time.Hour},
		func(context.Context, order) (int, error) { runs++; return runs, nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		after time.Duration
		want  int
	}{{0, 1}, {2 * time.Hour, 1}, {47 * time.Hour, 1}, {49 * time.Hour, 2}} {
		now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(tt.after)
		if got, err := h(context.Background(), order{"acme", "o-1", 1}); err != nil || got != tt.want {
			t.Errorf("after %v: got %d, %v; want %d", tt.after, got, err, tt.want)
		}
	}
}

// TestHandlerReplaysExactly checks that a duplicate gets the first
// caller's answer byte for byte, or none (issue 30): int64 values in a
// map, a struct in an any.
func TestHandlerReplaysExactly(t *testing.T) {
	type unsorted struct {
		Zeta  int64 `json:"zeta"`
		Alpha string
	}
	type holder struct{ V any }
	ctx := context.Background()
	check := func(name string, run func() (first, replay any, err error)) {
		t.Helper()
		first, replay, err := run()
		a, _ := json.Marshal(first)
		b, _ := json.Marshal(replay)
		if err != nil || string(a) != string(b) {
			t.Errorf("%s: first %s, replay %s, %v; want the same bytes", name, a, b, err)
		}
	}
	newHandler := func() *dedupe.Guard {
		return dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger()})
	}
	check("map of int64", func() (any, any, error) {
		h, _ := dedupe.Handler(newHandler(), &dedupe.HandlerConfig[map[string]any]{Key: "id", Scope: "tenant"},
			func(context.Context, order) (map[string]any, error) {
				return map[string]any{"n": int64(9007199254740993), "f": 0.1, "s": "<&>"}, nil
			})
		a, _ := h(ctx, order{"acme", "o", 1})
		b, err := h(ctx, order{"acme", "o", 1})
		return a, b, err
	})
	check("struct in any", func() (any, any, error) {
		h, _ := dedupe.Handler(newHandler(), &dedupe.HandlerConfig[any]{Key: "id", Scope: "tenant"},
			func(context.Context, order) (any, error) { return unsorted{Zeta: 9007199254740993, Alpha: "a"}, nil })
		a, _ := h(ctx, order{"acme", "o", 1})
		b, err := h(ctx, order{"acme", "o", 1})
		return a, b, err
	})
	// A struct held by an interface field cannot be decoded back as it
	// was: the run is recorded without it, and a duplicate gets no answer
	// rather than another one.
	g := newHandler()
	runs := 0
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[holder]{Key: "id", Scope: "tenant"},
		func(context.Context, order) (holder, error) {
			runs++
			return holder{V: unsorted{Zeta: 1, Alpha: "a"}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := h(ctx, order{"acme", "o", 1}); err != nil || first.V == nil {
		t.Errorf("first = %+v, %v; want the value", first, err)
	}
	if dup, err := h(ctx, order{"acme", "o", 1}); !errors.Is(err, dedupe.ErrResultOmitted) || runs != 1 {
		t.Errorf("duplicate = %+v, %v after %d runs; want ErrResultOmitted, no second run", dup, err, runs)
	}
}

// TestHandlerLogsNoEventValues checks that neither the errors Handler
// returns nor the guard's log lines quote an event value (issue 30).
func TestHandlerLogsNoEventValues(t *testing.T) {
	var logs strings.Builder
	// The time is dropped: its digits ("...101737...") could spell a secret.
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: noTime}))})
	type payment struct {
		Tenant string            `json:"tenant"`
		ID     any               `json:"id"`
		Card   map[string]string `json:"card"`
		Email  string            `json:"email"`
		Name   string            `json:"name"`
	}
	ev := payment{Tenant: "acme", ID: map[string]any{"n": "4111111111111111"}, Card: map[string]string{"number": "4111111111111111", "cvc": "737"}, Email: "alice@example.com", Name: "Alice Liddell"}
	var errs []error
	for _, tt := range []struct{ key, fp string }{
		{"lower(card)", ""}, {"powertools_json(card)", ""}, {"join(',', [email, card.cvc, `1`][2:])", ""},
		{"id", ""}, {"powertools_json(email).x", ""}, {"email", "abs(name)"}, {"email", "powertools_json(name)"},
		{"email", "to_string(nope)"}, {"card.number", "[nope]"},
	} {
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: tt.key, Fingerprint: tt.fp, Scope: "tenant"},
			func(context.Context, payment) (string, error) { return "", nil })
		if err != nil {
			t.Fatalf("%s %s: %v", tt.key, tt.fp, err)
		}
		_, err = h(context.Background(), ev)
		if err == nil && tt.key != "email" && tt.key != "card.number" {
			t.Errorf("%s: no error", tt.key)
		}
		errs = append(errs, err)
	}
	for _, err := range errs {
		for _, s := range secrets {
			if err != nil && strings.Contains(err.Error(), s) {
				t.Errorf("error quotes %q: %v", s, err)
			}
		}
	}
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("log quotes %q:\n%s", s, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "lower() argument 1 is an object") {
		t.Errorf("log does not say what was refused:\n%s", logs.String())
	}
}

// discardLogger is the Logger of guards whose refusals a test provokes.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestHandlerRefusesEmptySelections checks, on EventBridge events that
// name their fields otherwise than the expressions, that no event is
// answered with another's result (issue 30): the fingerprint that
// selects [null, null] and the key computed from a missing field are
// refused, and the handler never runs for them.
func TestHandlerRefusesEmptySelections(t *testing.T) {
	var ev events.EventBridgeEvent
	fixture(t, "eventbridge-event.json", &ev)
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "billing", Logger: discardLogger()})
	runs := 0
	bill := func(_ context.Context, ev events.EventBridgeEvent) (string, error) {
		runs++
		return string(ev.Detail), nil
	}
	ctx := context.Background()
	first := ev
	first.Detail = json.RawMessage(`{"orderId":"ord_1","total":1250,"cur":"EUR"}`)
	second := ev
	second.Detail = json.RawMessage(`{"orderId":"ord_1","total":9999,"cur":"EUR"}`)
	for _, fp := range []string{"detail.[amount, currency]", "detail.{amount: amount, currency: currency}", "detail.lines[*].price", "to_string(detail.amount)"} {
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: "detail.orderId", Fingerprint: fp}, bill)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []events.EventBridgeEvent{first, second} {
			if got, err := h(ctx, e); !errors.Is(err, dedupe.ErrNoFingerprint) || runs != 0 {
				t.Errorf("Fingerprint %s: %q, %v after %d runs; want ErrNoFingerprint, no run", fp, got, err, runs)
			}
		}
	}
	for _, key := range []string{"to_string(detail.order_id)", "type(detail.order_id)", "detail.order_id || 'none'", "not_null(detail.order_id, 'none')"} {
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: key}, bill)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []events.EventBridgeEvent{first, second} {
			if got, err := h(ctx, e); !errors.Is(err, dedupe.ErrNoKey) || runs != 0 {
				t.Errorf("Key %s: %q, %v after %d runs; want ErrNoKey, no run", key, got, err, runs)
			}
		}
	}
}

// TestHandlerOptionsCompose checks HandlerConfig's Keep, Retention and
// OnReplay with the guard's cache, FailOpen and a store that cannot keep
// the result: OnReplay fires exactly for answers h did not compute, a
// rejected result is never cached, and an unguarded run is no replay.
func TestHandlerOptionsCompose(t *testing.T) {
	ctx := context.Background()
	type counts struct{ runs, replays int }
	build := func(t *testing.T, g *dedupe.Guard, keep func(int) bool) (func(context.Context, order) (int, error), *counts) {
		c := &counts{}
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[int]{Key: "id", Scope: "tenant", Retention: 2 * time.Hour, Keep: keep,
			OnReplay: func(_ context.Context, v *int) { c.replays++ }},
			func(context.Context, order) (int, error) { c.runs++; return 1000 * c.runs, nil })
		if err != nil {
			t.Fatal(err)
		}
		return h, c
	}
	t.Run("cache", func(t *testing.T) {
		store := &countingStore{Store: memstore.New()}
		g := dedupe.New(store, &dedupe.Config{Prefix: "t", Logger: discardLogger(), Cache: dedupe.NewCache(0, 0)})
		h, c := build(t, g, nil)
		for range 3 {
			if v, err := h(ctx, order{"acme", "o-1", 1}); v != 1000 || err != nil {
				t.Fatalf("got %d, %v; want the first run's 1000", v, err)
			}
		}
		if c.runs != 1 || c.replays != 2 {
			t.Errorf("%d runs, %d replays; want 1 and 2 (the cache's replays too)", c.runs, c.replays)
		}
	})
	t.Run("keep rejects, cache on", func(t *testing.T) {
		g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t", Logger: discardLogger(), Cache: dedupe.NewCache(0, 0)})
		h, c := build(t, g, func(v int) bool { return v > 1000 })
		for _, want := range []int{1000, 2000, 2000} {
			if v, err := h(ctx, order{"acme", "o-1", 1}); v != want || err != nil {
				t.Errorf("got %d, %v; want %d", v, err, want)
			}
		}
		if c.runs != 2 || c.replays != 1 {
			t.Errorf("%d runs, %d replays; want the rejected first run repeated once, then a replay", c.runs, c.replays)
		}
	})
	t.Run("fail open", func(t *testing.T) {
		fs := &faultyStore{Store: memstore.New(), claimErr: fmt.Errorf("test: %w", dedupe.ErrStoreUnavailable)}
		g := dedupe.New(fs, &dedupe.Config{Prefix: "t", Logger: discardLogger(), FailOpen: true})
		h, c := build(t, g, func(int) bool { return false })
		for range 2 {
			if _, err := h(ctx, order{"acme", "o-1", 1}); err != nil {
				t.Errorf("unguarded run: %v, want its value and no error", err)
			}
		}
		if c.runs != 2 || c.replays != 0 {
			t.Errorf("%d runs, %d replays; want 2 unguarded runs and no replay", c.runs, c.replays)
		}
	})
	t.Run("result not kept by the store", func(t *testing.T) {
		g := dedupe.New(&faultyStore{Store: memstore.New(), omitOver: 1}, &dedupe.Config{Prefix: "t", Logger: discardLogger()})
		h, c := build(t, g, nil)
		h(ctx, order{"acme", "o-1", 1})
		if _, err := h(ctx, order{"acme", "o-1", 1}); !errors.Is(err, dedupe.ErrResultOmitted) || c.replays != 0 || c.runs != 1 {
			t.Errorf("duplicate: %v after %d runs, %d replays; want ErrResultOmitted, no OnReplay", err, c.runs, c.replays)
		}
	})
}

// pointerReader is a result type whose pointer, not its value, is an
// io.Reader.
type pointerReader struct{ ID string }

func (*pointerReader) Read([]byte) (int, error) { return 0, io.EOF }
