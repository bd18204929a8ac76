package dedupe_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// Logs, metrics and spans name a route by its template, never by the
// client's path: a Function URL has no routes, so every request is "POST
// (no route)". The key is still scoped by the path.
func ExampleRouteNone() {
	var routes []string
	g := dedupe.New(memstore.New(), &dedupe.Config{
		Prefix:    "fn",
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnOutcome: func(_ context.Context, ev dedupe.Event) { routes = append(routes, ev.Route) },
	})
	h := dedupe.FunctionURL(g, &dedupe.HTTPConfig{SharedScope: true},
		func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
			return events.LambdaFunctionURLResponse{StatusCode: 201}, nil
		})
	for _, path := range []string{"/users/alice@example.com", "/users/bob@example.com"} {
		req := events.LambdaFunctionURLRequest{RawPath: path, Headers: map[string]string{"idempotency-key": "k1"}}
		req.RequestContext.HTTP.Method = "POST"
		resp, _ := h(context.Background(), req)
		fmt.Println(resp.StatusCode) // two paths, two scopes: both run
	}
	fmt.Println(routes)
	// Output:
	// 201
	// 201
	// [POST (no route) POST (no route)]
}
