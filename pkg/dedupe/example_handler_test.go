package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// An EventBridge handler made idempotent by the order ID in the event's
// detail; the amount and currency are what must match. EventBridge
// events are scoped by account, region, source and detail type.
func ExampleHandler_eventBridge() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "billing"})
	type Receipt struct{ Charge string }
	h, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "detail.orderId", Fingerprint: "detail.[amount, currency]"},
		func(ctx context.Context, ev events.EventBridgeEvent) (Receipt, error) {
			fmt.Println("charging", string(ev.Detail))
			return Receipt{Charge: "ch_1"}, nil
		})
	if err != nil {
		panic(err) // a bad configuration: refused here, never at the first event
	}
	ev := events.EventBridgeEvent{ID: "e-1", Source: "com.example.orders", DetailType: "OrderPlaced",
		Detail: json.RawMessage(`{"orderId":"ord_1","amount":1250,"currency":"EUR"}`)}
	for range 2 { // EventBridge delivers it twice
		r, err := h(context.Background(), ev)
		fmt.Println(r.Charge, err)
	}
	// Output:
	// charging {"orderId":"ord_1","amount":1250,"currency":"EUR"}
	// ch_1 <nil>
	// ch_1 <nil>
}

// An API Gateway handler keyed by a field of the JSON body. Keys are
// scoped by API, stage, route and the caller (DefaultPrincipal); a
// request with no caller is refused unless SharedScope is set. Refusals
// are problem responses, as the HTTP adapters answer them.
func ExampleHandler_apiGateway() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "payments"})
	h, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "powertools_json(body).paymentId"},
		func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			fmt.Println("paying")
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"status":"paid"}`}, nil
		})
	if err != nil {
		panic(err)
	}
	req := events.APIGatewayV2HTTPRequest{RouteKey: "POST /payments", Body: `{"paymentId":"p-9","amount":5}`}
	req.RequestContext.APIID, req.RequestContext.Stage = "a1b2c3", "prod"
	req.RequestContext.HTTP.Method = "POST"
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"iss": "https://idp.example", "sub": "alice"}}}
	for range 2 {
		resp, err := h(context.Background(), req)
		fmt.Println(resp.StatusCode, resp.Body, err)
	}
	req.Body = `{"amount":5}` // no paymentId: refused, never run unguarded
	resp, err := h(context.Background(), req)
	fmt.Println(resp.StatusCode, resp.Headers["Content-Type"], err)
	// Output:
	// paying
	// 201 {"status":"paid"} <nil>
	// 201 {"status":"paid"} <nil>
	// 400 application/problem+json <nil>
}

// A custom event: Handler knows no scope for it, so the configuration
// names one, here the tenant, so that two tenants' order IDs never meet.
func ExampleHandler_custom() {
	type Order struct {
		Tenant string `json:"tenant"`
		ID     string `json:"id"`
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "fulfilment"})
	ship := func(ctx context.Context, o Order) (string, error) {
		fmt.Println("shipping", o.Tenant, o.ID)
		return "shipped " + o.ID, nil
	}
	if _, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "id"}, ship); err != nil {
		fmt.Println("refused: no scope")
	}
	h, err := dedupe.Handler(g, dedupe.HandlerConfig{Key: "id", Scope: "tenant"}, ship)
	if err != nil {
		panic(err)
	}
	for _, o := range []Order{{"acme", "o-1"}, {"acme", "o-1"}, {"globex", "o-1"}} {
		s, err := h(context.Background(), o)
		fmt.Println(s, err)
	}
	// Output:
	// refused: no scope
	// shipping acme o-1
	// shipped o-1 <nil>
	// shipped o-1 <nil>
	// shipping globex o-1
	// shipped o-1 <nil>
}

// Once runs work at most once per key and returns its typed value, or
// the first run's value to a duplicate.
func ExampleOnce() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "shipping"})
	ship := func(context.Context) (string, error) {
		fmt.Println("shipping order 42")
		return "s-1", nil
	}
	for range 2 {
		a, err := dedupe.Once(context.Background(), g, "order-42", []byte(`{"order":42}`), ship)
		fmt.Println(a.Value, a.Replayed, err)
	}
	// Output:
	// shipping order 42
	// s-1 false <nil>
	// s-1 true <nil>
}

// Expressions pick keys out of any event, with Powertools' functions.
func ExampleExpr_Key() {
	kinesisData := `{"data":"eyJvcmRlcklkIjoib3JkXzcifQ=="}` // base64 of {"orderId":"ord_7"}
	k, err := dedupe.MustCompileExpr("powertools_json(powertools_base64(data)).orderId").Key([]byte(kinesisData))
	fmt.Println(k, err)
	_, err = dedupe.MustCompileExpr("orderID").Key([]byte(`{"orderId":"ord_7"}`))
	fmt.Println(errors.Is(err, dedupe.ErrNoKey), err)
	// Output:
	// =sord_7| <nil>
	// true dedupe: expression selected no usable key from the event: "orderID" selected null (a missing field?)
}
