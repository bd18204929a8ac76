package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
		{"no key", func() error { _, err := dedupe.Handler(g, dedupe.HandlerConfig{}, eb); return err }, "HandlerConfig.Key is empty"},
		{"bad key", func() error { _, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "detail.["}, eb); return err }, "HandlerConfig.Key"},
		{"unknown function", func() error {
			_, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "powertools_jsn(body).id"}, eb)
			return err
		}, "unknown function"},
		{"bad fingerprint", func() error {
			_, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "id", Fingerprint: "a[?"}, eb)
			return err
		}, "HandlerConfig.Fingerprint"},
		{"bad scope", func() error {
			_, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "id", Scope: "nope("}, custom)
			return err
		}, "HandlerConfig.Scope"},
		{"custom event without scope", func() error { _, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "id"}, custom); return err }, "HandlerConfig.Scope is empty and events of type dedupe_test.order have no default scope"},
		{"shared scope off HTTP", func() error {
			_, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "id", SharedScope: true}, eb)
			return err
		}, "SharedScope applies to API Gateway and Function URL events only"},
		{"nil guard", func() error { _, err := dedupe.Handler(nil, dedupe.HandlerConfig{Key: "id"}, eb); return err }, "nil Guard"},
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
	h, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "detail.orderId", Fingerprint: "detail.[amount, currency]"},
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

// TestHandlerAPIGateway checks the wrapper on real API Gateway requests:
// keys are scoped by principal, a request without one is refused unless
// SharedScope, refusals are the HTTP adapters' problem responses, and an
// HTTP request decoded into a map is refused.
func TestHandlerAPIGateway(t *testing.T) {
	var alice events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-jwt.json", &alice)
	bob := alice
	bob.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{
		Claims: map[string]string{"iss": alice.RequestContext.Authorizer.JWT.Claims["iss"], "sub": "user-bob"}}}
	anonymous := alice
	anonymous.RequestContext.Authorizer = nil

	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "payments"})
	runs := 0
	pay := func(_ context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"payment":"pay_` + req.RequestContext.Authorizer.JWT.Claims["sub"] + `"}`}, nil
	}
	h, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: `headers."idempotency-key"`}, pay)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a1, err := h(ctx, alice)
	a2, err2 := h(ctx, alice)
	if err != nil || err2 != nil || a1.Body != a2.Body || runs != 1 {
		t.Errorf("alice twice: %q %v, %q %v after %d runs; want one run and its replay", a1.Body, err, a2.Body, err2, runs)
	}
	b, err := h(ctx, bob)
	if err != nil || b.Body != `{"payment":"pay_user-bob"}` || runs != 2 {
		t.Errorf("bob with alice's key: %q, %v after %d runs; want his own run", b.Body, err, runs)
	}
	if resp, err := h(ctx, anonymous); err != nil || problemType(resp) != dedupe.ProblemInternal || resp.StatusCode != 500 || runs != 2 {
		t.Errorf("anonymous: %d %s, %v after %d runs, want the 500 problem (ErrNoPrincipal)", resp.StatusCode, resp.Body, err, runs)
	}
	keyless := alice
	keyless.Headers = map[string]string{"content-type": "application/json"}
	if resp, err := h(ctx, keyless); err != nil || problemType(resp) != dedupe.ProblemKeyUnusable || resp.StatusCode != 400 || runs != 2 {
		t.Errorf("keyless: %d %s, %v after %d runs, want the 400 problem", resp.StatusCode, resp.Body, err, runs)
	}
	shared, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: `headers."idempotency-key"`, SharedScope: true},
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shared(ctx, anonymous); err != nil || runs != 3 {
		t.Errorf("anonymous with SharedScope: %v after %d runs, want a run", err, runs)
	}
	// Another path parameter under the same route is another request.
	other := alice
	other.PathParameters = map[string]string{"id": "2"}
	if resp, err := h(ctx, other); err != nil || resp.StatusCode != 422 || problemType(resp) != dedupe.ProblemKeyReused {
		t.Errorf("same key, other path parameter: %d %s, %v; want the 422 problem", resp.StatusCode, resp.Body, err)
	}
	// A duplicate that arrives while the first request runs: 409 with
	// Retry-After. And the handler's own error stays an error.
	var dup events.APIGatewayV2HTTPResponse
	inner := dedupe.HandlerConfig{Key: `headers."idempotency-key"`}
	var slow func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	slow, err = dedupe.Handler(g, inner, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		dup, _ = slow(ctx, req)
		return events.APIGatewayV2HTTPResponse{}, errors.New("downstream down")
	})
	if err != nil {
		t.Fatal(err)
	}
	flight := alice
	flight.Headers = map[string]string{"idempotency-key": "in-flight"}
	if _, err := slow(ctx, flight); err == nil || err.Error() != "downstream down" {
		t.Errorf("handler error: %v, want it returned as is", err)
	}
	if dup.StatusCode != 409 || problemType(dup) != dedupe.ProblemInProgress || dup.Headers["Retry-After"] == "" {
		t.Errorf("duplicate in flight: %d %v %s, want the 409 problem with Retry-After", dup.StatusCode, dup.Headers, dup.Body)
	}

	raw, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: `headers."idempotency-key"`, Scope: "requestContext.apiId"},
		func(context.Context, map[string]any) (string, error) { t.Error("ran"); return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	fixture(t, "apigw-v2-jwt.json", &m)
	if _, err := raw(ctx, m); !errors.Is(err, dedupe.ErrNoPrincipal) {
		t.Errorf("HTTP request as a map: %v, want ErrNoPrincipal", err)
	}
}

// problemType returns the type of a problem response, "" for another.
func problemType(resp events.APIGatewayV2HTTPResponse) string {
	var p dedupe.Problem
	if resp.Headers["Content-Type"] != dedupe.ProblemContentType || json.Unmarshal([]byte(resp.Body), &p) != nil {
		return ""
	}
	return p.Type
}

// TestHandlerCustomEvent checks the wrapper on a custom event: the named
// scope keeps tenants apart, a null scope is refused.
func TestHandlerCustomEvent(t *testing.T) {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "orders"})
	runs := 0
	h, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "id", Scope: "tenant", Fingerprint: "amount"},
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
