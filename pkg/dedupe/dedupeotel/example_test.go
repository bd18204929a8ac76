package dedupeotel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupeotel"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// createPayment is the function's own handler.
func createPayment(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: `{"id":"pay_1"}`}, nil
}

// The wiring of a Lambda function: providers, a Telemetry as the guard's
// Tracer and Metrics, and a handler that flushes both providers before the
// invocation ends. In production the exporters are OTLP ones (to the ADOT
// collector layer, say) and the store is dynamostore; here they are in
// memory so that the example can print what was exported.
func Example() {
	// At init.
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans))
	reader := sdkmetric.NewManualReader() // production: sdkmetric.NewPeriodicReader(exporter)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel, err := dedupeotel.New(&dedupeotel.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		panic(err)
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "payments", Tracer: tel, Metrics: tel})
	handler := dedupeotel.Flushed(
		dedupe.HTTPAPI(g, &dedupe.HTTPConfig{RequireKey: dedupe.RequireKeyOn("POST /payments")}, createPayment),
		tp.ForceFlush, mp.ForceFlush)
	// lambda.Start(handler)

	req := events.APIGatewayV2HTTPRequest{
		RouteKey: "POST /payments",
		Headers:  map[string]string{"idempotency-key": "order-42"},
		Body:     `{"amount":1250}`,
	}
	req.RequestContext.HTTP.Method = "POST"
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "user-1"}},
	}
	for range 2 { // the client's retry is replayed
		handler(context.Background(), req)
	}

	// Flushed has exported every span before each invocation returned.
	for _, s := range spans.GetSpans() {
		if s.Parent.IsValid() {
			continue // the claim, handler and complete children
		}
		fmt.Println(s.Name, s.Status.Code)
		for _, a := range s.Attributes {
			if a.Key == dedupeotel.AttrOutcome {
				fmt.Println("  outcome:", a.Value.AsString())
			}
		}
	}
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, p := range sum.DataPoints {
				o, _ := p.Attributes.Value(dedupeotel.AttrOutcome)
				fmt.Printf("%s{outcome=%s} %d\n", m.Name, o.AsString(), p.Value)
			}
		}
	}
	// Unordered output:
	// dedupe POST /payments Unset
	//   outcome: executed
	// dedupe POST /payments Unset
	//   outcome: replayed
	// dedupe.outcome{outcome=executed} 1
	// dedupe.outcome{outcome=replayed} 1
}

// The application's propagator, baggage included, may be given: records
// keep its traceparent alone. One that writes no trace context a record
// can hold is refused.
func ExampleNew_propagator() {
	_, err := dedupeotel.New(&dedupeotel.Config{
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.Baggage{}, propagation.TraceContext{}),
	})
	fmt.Println(err)
	_, err = dedupeotel.New(&dedupeotel.Config{Propagator: propagation.Baggage{}})
	fmt.Println(errors.Is(err, dedupeotel.ErrPropagator))
	// Output:
	// <nil>
	// true
}
