package dedupe_test

import (
	"context"
	"encoding/base64"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// The tests in this file pin decisions of apigw.go that mutation testing
// (make mutate PKG=./pkg/dedupe) found no test of the package noticing.

// restHandler returns a RESTAPI handler over a fresh memstore that answers
// 201 with its run count, and the events its guard reported.
func restHandler(cfg *dedupe.HTTPConfig) (func(events.APIGatewayProxyRequest) events.APIGatewayProxyResponse, *[]dedupe.Event) {
	var seen []dedupe.Event
	runs := 0
	g := dedupe.New(memstore.New(), &dedupe.Config{OnOutcome: func(_ context.Context, ev dedupe.Event) { seen = append(seen, ev) }})
	h := dedupe.RESTAPI(g, cfg, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs++
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: strconv.Itoa(runs)}, nil
	})
	return func(ev events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
		resp, err := h(context.Background(), ev)
		if err != nil {
			panic(err)
		}
		return resp
	}, &seen
}

// httpAPIHandler is restHandler for HTTPAPI.
func httpAPIHandler(cfg *dedupe.HTTPConfig) (func(events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse, *[]dedupe.Event) {
	var seen []dedupe.Event
	runs := 0
	g := dedupe.New(memstore.New(), &dedupe.Config{OnOutcome: func(_ context.Context, ev dedupe.Event) { seen = append(seen, ev) }})
	h := dedupe.HTTPAPI(g, cfg, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: strconv.Itoa(runs)}, nil
	})
	return func(ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
		resp, err := h(context.Background(), ev)
		if err != nil {
			panic(err)
		}
		return resp
	}, &seen
}

// TestRESTAPITemplatedResource: behind a templated resource
// ("/orders/{id}"), the route is the template, not the actual path. So
// RequireKeyOn("PUT /orders/{id}") requires a key on every id, and the key
// is scoped by the template: reused on another id, it is the same key with
// another request (422), not a fresh run.
func TestRESTAPITemplatedResource(t *testing.T) {
	send, _ := restHandler(&dedupe.HTTPConfig{RequireKey: dedupe.RequireKeyOn("PUT /orders/{id}")})
	req := func(id, key string) events.APIGatewayProxyRequest {
		var ev events.APIGatewayProxyRequest
		fixture(t, "apigw-v1-lambda-authorizer.json", &ev)
		if ev.Resource != "/orders/{id}" || ev.HTTPMethod != "PUT" {
			t.Fatalf("fixture: %s %s, want PUT /orders/{id}", ev.HTTPMethod, ev.Resource)
		}
		ev.Path, ev.PathParameters = "/orders/"+id, map[string]string{"id": id}
		delete(ev.Headers, "idempotency-key")
		delete(ev.MultiValueHeaders, "idempotency-key")
		if key != "" {
			ev.Headers["idempotency-key"], ev.MultiValueHeaders["idempotency-key"] = key, []string{key}
		}
		return ev
	}
	for i, s := range []struct {
		id, key string
		status  int
		body    string
	}{
		{"ord_1", "", 400, ""},
		{"ord_1", "k", 201, "1"},
		{"ord_2", "", 400, ""},
		{"ord_2", "k", 422, ""},
		{"ord_1", "k", 201, "1"},
	} {
		resp := send(req(s.id, s.key))
		if resp.StatusCode != s.status || (s.body != "" && resp.Body != s.body) {
			t.Errorf("step %d: PUT /orders/%s key %q: %d %q, want %d %q", i+1, s.id, s.key, resp.StatusCode, resp.Body, s.status, s.body)
		}
	}
}

// TestEventRouteIsTheMatchedRoute: Event.Route is the route the API
// matched (the REST resource, the HTTP API route key, an ANY route with
// the actual method), and RouteNone only for an event that names none.
func TestEventRouteIsTheMatchedRoute(t *testing.T) {
	t.Run("REST API", func(t *testing.T) {
		send, seen := restHandler(nil)
		var ev events.APIGatewayProxyRequest
		fixture(t, "apigw-v1-lambda-authorizer.json", &ev)
		send(ev)
		ev.Resource = ""
		send(ev)
		if len(*seen) != 2 || (*seen)[0].Route != "PUT /orders/{id}" || (*seen)[1].Route != "PUT "+dedupe.RouteNone {
			t.Errorf("routes %v, want PUT /orders/{id}, then PUT %s", routes(*seen), dedupe.RouteNone)
		}
	})
	t.Run("HTTP API", func(t *testing.T) {
		send, seen := httpAPIHandler(nil)
		var ev events.APIGatewayV2HTTPRequest
		fixture(t, "apigw-v2-jwt.json", &ev)
		send(ev)
		ev.RouteKey, ev.RequestContext.RouteKey = "", ""
		ev.Headers["idempotency-key"] += "-2"
		send(ev)
		// An ANY route is labelled with the actual method.
		ev.RouteKey, ev.RequestContext.RouteKey = "ANY /payments", "ANY /payments"
		ev.Headers["idempotency-key"] += "-3"
		send(ev)
		if len(*seen) != 3 || (*seen)[0].Route != "POST /payments" || (*seen)[1].Route != "POST "+dedupe.RouteNone || (*seen)[2].Route != "POST /payments" {
			t.Errorf("routes %v, want POST /payments, POST %s, POST /payments", routes(*seen), dedupe.RouteNone)
		}
	})
}

// TestHTTPAPIRouteKeyFromEitherField: an HTTP API event that names its
// route key in only one of its two fields (RouteKey, RequestContext.RouteKey;
// API Gateway sets both, a hand-built event may not) is routed and labelled
// by it: RequireKeyOn applies and Event.Route names it.
func TestHTTPAPIRouteKeyFromEitherField(t *testing.T) {
	for _, field := range []string{"RouteKey", "RequestContext.RouteKey"} {
		t.Run(field, func(t *testing.T) {
			send, seen := httpAPIHandler(&dedupe.HTTPConfig{RequireKey: dedupe.RequireKeyOn("POST /payments")})
			var ev events.APIGatewayV2HTTPRequest
			fixture(t, "apigw-v2-jwt.json", &ev)
			if field == "RouteKey" {
				ev.RequestContext.RouteKey = ""
			} else {
				ev.RouteKey = ""
			}
			ev.RawPath = "/raw"
			send(ev)
			if len(*seen) != 1 || (*seen)[0].Route != "POST /payments" {
				t.Errorf("routes %v, want POST /payments", routes(*seen))
			}
			delete(ev.Headers, "idempotency-key")
			if resp := send(ev); resp.StatusCode != 400 {
				t.Errorf("without a key: %d, want 400 (RequireKeyOn)", resp.StatusCode)
			}
		})
	}
}

func routes(evs []dedupe.Event) []string {
	var rs []string
	for _, ev := range evs {
		rs = append(rs, ev.Route)
	}
	return rs
}

// TestRESTAPISingleValueMaps: an event that carries its query or headers
// only in the single-value maps (as a hand-built or proxied event may) is
// fingerprinted by them: the same key with another query or another
// value of a fingerprinted header is another request (422), and a header
// sent empty differs from one not sent.
func TestRESTAPISingleValueMaps(t *testing.T) {
	base := func() events.APIGatewayProxyRequest {
		var ev events.APIGatewayProxyRequest
		fixture(t, "apigw-v1-lambda-authorizer.json", &ev)
		ev.MultiValueQueryStringParameters = nil
		ev.MultiValueHeaders = nil
		ev.QueryStringParameters = map[string]string{"notify": "sms"}
		ev.Headers = map[string]string{"Idempotency-Key": "k"}
		return ev
	}
	tests := []struct {
		name         string
		first, again func(*events.APIGatewayProxyRequest)
	}{
		{"query", func(*events.APIGatewayProxyRequest) {},
			func(ev *events.APIGatewayProxyRequest) { ev.QueryStringParameters["notify"] = "email" }},
		{"header value", func(ev *events.APIGatewayProxyRequest) { ev.Headers["X-Tenant"] = "a" },
			func(ev *events.APIGatewayProxyRequest) { ev.Headers["X-Tenant"] = "b" }},
		{"header empty, then absent", func(ev *events.APIGatewayProxyRequest) { ev.Headers["X-Tenant"] = "" },
			func(*events.APIGatewayProxyRequest) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			send, _ := restHandler(&dedupe.HTTPConfig{FingerprintHeaders: []string{"X-Tenant"}})
			first, again := base(), base()
			tt.first(&first)
			tt.again(&again)
			if resp := send(first); resp.StatusCode != 201 {
				t.Fatalf("first: %d, want 201", resp.StatusCode)
			}
			if resp := send(first); resp.StatusCode != 201 || resp.Body != "1" {
				t.Errorf("retry: %d %q, want the replay 201 \"1\"", resp.StatusCode, resp.Body)
			}
			if resp := send(again); resp.StatusCode != 422 {
				t.Errorf("other request, same key: %d %q, want 422", resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestHTTPAPIEmptyCookie: with the Cookie header fingerprinted, a payload
// 2.0 request with an empty cookie differs from one with none.
func TestHTTPAPIEmptyCookie(t *testing.T) {
	send, _ := httpAPIHandler(&dedupe.HTTPConfig{FingerprintHeaders: []string{"Cookie"}})
	var ev events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-jwt.json", &ev)
	ev.Cookies = nil
	delete(ev.Headers, "cookie")
	if resp := send(ev); resp.StatusCode != 201 {
		t.Fatalf("first: %d, want 201", resp.StatusCode)
	}
	ev.Cookies = []string{""}
	if resp := send(ev); resp.StatusCode != 422 {
		t.Errorf("empty cookie after none, same key: %d %q, want 422", resp.StatusCode, resp.Body)
	}
}

// TestUnlimitedBase64Body: MaxBodyBytes negative means no limit, for a
// base64-encoded body too: a body over the default limit runs and is
// replayed, never 413.
func TestUnlimitedBase64Body(t *testing.T) {
	send, _ := restHandler(&dedupe.HTTPConfig{MaxBodyBytes: -1})
	var ev events.APIGatewayProxyRequest
	fixture(t, "apigw-v1-lambda-authorizer.json", &ev)
	ev.Body = base64.StdEncoding.EncodeToString(make([]byte, dedupe.DefaultMaxBodyBytes+1))
	ev.IsBase64Encoded = true
	for i := range 2 {
		if resp := send(ev); resp.StatusCode != 201 || resp.Body != "1" {
			t.Errorf("request %d: %d %q, want 201 \"1\"", i+1, resp.StatusCode, resp.Body)
		}
	}
}
