package dedupe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// The HTTP benchmarks measure the adapter's own overhead around a trivial
// handler, with memstore as the store (no I/O): key parsing, scoping,
// fingerprinting a small JSON body, the event translation and, for a
// replay, the response rebuilt from the stored result.

func benchHTTPAPI(b *testing.B) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), events.APIGatewayV2HTTPRequest) {
	var req events.APIGatewayV2HTTPRequest
	fixture(b, "apigw-v2-jwt.json", &req)
	resp := events.APIGatewayV2HTTPResponse{
		StatusCode: 201,
		Headers:    map[string]string{"Content-Type": "application/json", "Location": "/payments/pay_1"},
		Body:       `{"id":"pay_1","amount":1250,"currency":"EUR","source":"tok_visa","status":"succeeded"}`,
	}
	h := dedupe.HTTPAPI(dedupe.New(memstore.New(), nil), nil, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return resp, nil
	})
	return h, req
}

func BenchmarkHTTPAPIReplay(b *testing.B) {
	h, req := benchHTTPAPI(b)
	ctx := context.Background()
	h(ctx, req)
	b.ReportAllocs()
	for b.Loop() {
		if r, _ := h(ctx, req); r.Headers[dedupe.HeaderReplayed] != "true" {
			b.Fatal("not a replay")
		}
	}
}

func BenchmarkHTTPAPIFresh(b *testing.B) {
	h, req := benchHTTPAPI(b)
	ctx := context.Background()
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req.Headers["idempotency-key"] = keys[i]
		if r, _ := h(ctx, req); r.StatusCode != 201 || r.Headers[dedupe.HeaderReplayed] != "" {
			b.Fatal("not a fresh run")
		}
	}
}

func BenchmarkHTTPAPIUnguarded(b *testing.B) {
	h, req := benchHTTPAPI(b)
	req.RequestContext.HTTP.Method = "GET"
	req.RouteKey = "GET /payments"
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h(ctx, req)
	}
}

func BenchmarkMiddlewareReplay(b *testing.B) {
	h := dedupe.Middleware(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{SharedScope: true})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		w.Write([]byte(`{"id":"pay_1"}`))
	}))
	const body = `{"amount":1250,"currency":"EUR","source":"tok_visa"}`
	send := func() {
		req := httptest.NewRequest("POST", "/payments", strings.NewReader(body))
		req.Header.Set(dedupe.HeaderIdempotencyKey, "k")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	send()
	b.ReportAllocs()
	for b.Loop() {
		send()
	}
}

func BenchmarkCanonicalJSON(b *testing.B) {
	body := []byte(`{"source":"tok_visa","metadata":{"order":"ord_1001","lines":[1,2,3]},"currency":"EUR","amount":1250}`)
	b.ReportAllocs()
	for b.Loop() {
		dedupe.CanonicalJSON(body)
	}
}
