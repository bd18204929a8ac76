package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/gateway"
)

// A Gateway turns HTTP requests into HTTP API (payload 2.0) events. Here the
// function is an in-process stand-in; `make run` puts a *Pool there, which
// runs the real bootstrap under the Runtime Interface Emulator.
func Example() {
	getPayment := gateway.InvokerFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		return json.Marshal(events.APIGatewayV2HTTPResponse{
			StatusCode: 200,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       fmt.Sprintf(`{"route":%q,"id":%q}`, ev.RouteKey, ev.PathParameters["id"]),
		})
	})
	g, err := gateway.New(gateway.Config{
		Routes: []gateway.Route{{Key: "GET /payments/{id}", Function: getPayment}},
	})
	if err != nil {
		panic(err)
	}

	for _, path := range []string{"/payments/pay_123", "/refunds/1"} {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 200 {"route":"GET /payments/{id}","id":"pay_123"}
	// 404 {"message":"Not Found"}
}

// A Pool runs a function's bootstrap under the emulator, one process per
// concurrent invocation, and replaces environments that time out or crash.
func ExamplePool() {
	pool, err := gateway.NewPool(gateway.PoolConfig{
		RIE: "build/bin/aws-lambda-rie",
		Function: gateway.Function{
			Name:      "ApiFunction",
			Bootstrap: "build/local/api/bootstrap",
			Timeout:   10e9, // 10 s, as in template.yaml
			Env:       map[string]string{"PAYMENTS_TABLE": "PaymentsTable"},
		},
		MaxConcurrency: 16,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	result, err := pool.Invoke(context.Background(), []byte(`{"rawPath":"/payments"}`))
	fmt.Println(string(result), err)
}

// NewStack runs a template's functions and HTTP API: the routes and
// schedules come from infra.Functions, the bootstraps from a build
// directory (make build-local writes build/local/<name>/bootstrap).
func ExampleNewStack() {
	tpl, err := infra.Load("template.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		fmt.Println(err)
		return
	}
	stack, err := gateway.NewStack(gateway.StackConfig{
		Functions:    fns,
		BootstrapDir: "build/local",
		RIE:          "build/bin/aws-lambda-rie",
		Env:          map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000"},
		Output:       os.Stdout,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stack.Close()
	for _, r := range stack.Routes() {
		fmt.Println(r.Key, "->", r.Function)
	}
	_ = http.ListenAndServe("127.0.0.1:3000", stack.Gateway)
}
