package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// Wrap an HTTP API handler: a retry with the same Idempotency-Key gets the
// first response back, and the payment is charged once.
func ExampleHTTPAPI() {
	charges := 0
	createPayment := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		charges++
		return events.APIGatewayV2HTTPResponse{
			StatusCode: 201,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       fmt.Sprintf(`{"id":"pay_%d"}`, charges),
		}, nil
	}

	// At init: one guard per function (use dynamostore in production).
	g := dedupe.New(memstore.New(), nil)
	handler := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{
		RequireKey: dedupe.RequireKeyOn("POST /payments"),
	}, createPayment)
	// lambda.Start(handler)

	req := events.APIGatewayV2HTTPRequest{
		RouteKey: "POST /payments",
		Headers:  map[string]string{"idempotency-key": `"order-42"`},
		Body:     `{"amount":1250,"currency":"EUR","source":"tok_visa"}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			APIID: "a1b2c3", Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
			// The caller, as the JWT authorizer identified it: keys are
			// scoped by it (a request with no identity is refused unless
			// HTTPConfig.SharedScope is set).
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{
					Claims: map[string]string{"iss": "https://issuer.example", "sub": "user-alice"},
				},
			},
		},
	}
	first, _ := handler(context.Background(), req)
	retry, _ := handler(context.Background(), req)
	fmt.Println(first.StatusCode, first.Body)
	fmt.Println(retry.StatusCode, retry.Body, "replayed:", retry.Headers["Idempotent-Replayed"])

	delete(req.Headers, "idempotency-key")
	missing, _ := handler(context.Background(), req)
	fmt.Println(missing.StatusCode, missing.Headers["Content-Type"])
	fmt.Println("charges:", charges)
	// Output:
	// 201 {"id":"pay_1"}
	// 201 {"id":"pay_1"} replayed: true
	// 400 application/problem+json
	// charges: 1
}

// Wrap the handlers registered on a ServeMux, so keys are scoped by the
// matched pattern, and tell the middleware who the caller is.
func ExampleMiddleware() {
	idempotent := dedupe.Middleware(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{
		Principal: func(req any) string {
			return req.(*http.Request).Header.Get("X-User") // set by your auth middleware
		},
	})
	n := 0
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d\n", n)
	})))

	for range 2 {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"sku":"A-1"}`))
		req.Header.Set("Idempotency-Key", "cart-7")
		req.Header.Set("X-User", "alice")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		fmt.Printf("%d %q replayed=%q\n", rec.Code, body, rec.Header().Get("Idempotent-Replayed"))
	}
	// Output:
	// 201 "order 1\n" replayed=""
	// 201 "order 1\n" replayed="true"
}

// Process an SQS batch exactly once per message. A failed message fails
// the whole batch (ErrBatchFailed), which is safe whether or not the event
// source mapping reports batch item failures: SQS delivers every message
// again, and the one already processed is a duplicate then.
func ExampleSQS() {
	g := dedupe.New(memstore.New(), nil)
	down := true
	handler := dedupe.SQS(g, nil, func(ctx context.Context, m events.SQSMessage) error {
		if down && m.MessageId == "m-2" {
			return errors.New("warehouse unavailable")
		}
		fmt.Println("processing", m.Body)
		return nil
	}) // lambda.Start(handler)
	arn := "arn:aws:sqs:eu-west-1:123456789012:orders"
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", EventSourceARN: arn, Body: `{"orderId":"ord_1001"}`},
		{MessageId: "m-2", EventSourceARN: arn, Body: `{"orderId":"ord_1002"}`},
	}}
	_, err := handler(context.Background(), ev)
	fmt.Println("batch failed:", errors.Is(err, dedupe.ErrBatchFailed))
	down = false
	_, err = handler(context.Background(), ev) // SQS delivered both again
	fmt.Println("batch failed:", err != nil)
	// Output:
	// processing {"orderId":"ord_1001"}
	// batch failed: true
	// processing {"orderId":"ord_1002"}
	// batch failed: false
}

// With FunctionResponseTypes [ReportBatchItemFailures] on the event source
// mapping, say so in the config: only the failed messages are reported,
// in a partial batch response, and delivered again.
func ExampleSQSConfig_reportBatchItemFailures() {
	g := dedupe.New(memstore.New(), nil)
	cfg := &dedupe.SQSConfig{ReportBatchItemFailures: true} // the mapping reports them
	arn := "arn:aws:sqs:eu-west-1:123456789012:orders"
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", EventSourceARN: arn, Body: `{"orderId":"ord_1001"}`},
		{MessageId: "m-2", EventSourceARN: arn, Body: `{"orderId":"ord_1002"}`},
	}}
	resp, err := dedupe.SQS(g, cfg, func(_ context.Context, m events.SQSMessage) error {
		if m.MessageId == "m-2" {
			return errors.New("warehouse unavailable")
		}
		return nil
	})(context.Background(), ev)
	fmt.Println(resp.BatchItemFailures[0].ItemIdentifier, err)
	// Output:
	// m-2 <nil>
}

func ExampleParseKey() {
	for _, v := range []string{`"8e03978e-40d5"`, `8e03978e-40d5`, `"a\"b"`, ``, `"open`} {
		key, err := dedupe.ParseKey(v)
		fmt.Printf("%-16s -> %q %v\n", v, key, err != nil)
	}
	// Output:
	// "8e03978e-40d5"  -> "8e03978e-40d5" false
	// 8e03978e-40d5    -> "8e03978e-40d5" false
	// "a\"b"           -> "a\"b" false
	//                  -> "" true
	// "open            -> "" true
}

func ExampleCanonicalJSON() {
	a, _ := dedupe.CanonicalJSON([]byte(`{"currency": "EUR", "amount": 1250}`))
	b, _ := dedupe.CanonicalJSON([]byte("{\n  \"amount\": 1250,\n  \"currency\": \"\\u0045UR\"\n}"))
	c, _ := dedupe.CanonicalJSON([]byte(`{"amount": 1250.0, "currency": "EUR"}`))
	fmt.Println(string(a))
	fmt.Println(string(a) == string(b), string(a) == string(c))
	// Output:
	// {"amount":1250,"currency":"EUR"}
	// true false
}
