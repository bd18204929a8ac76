package dedupe_test

import (
	"context"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

func TestDefaultPrincipal(t *testing.T) {
	v2 := func(name string) any {
		var ev events.APIGatewayV2HTTPRequest
		fixture(t, name, &ev)
		return &ev
	}
	v1 := func(name string) any {
		var ev events.APIGatewayProxyRequest
		fixture(t, name, &ev)
		return &ev
	}
	url := func(name string) any {
		var ev events.LambdaFunctionURLRequest
		fixture(t, name, &ev)
		return &ev
	}
	const iss = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Xmpl4bc12"
	const v1iss = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Xmpl9de34"
	noAuth := v2("apigw-v2-jwt.json").(*events.APIGatewayV2HTTPRequest)
	noAuth.RequestContext.Authorizer = nil
	urlNone := url("function-url-iam.json").(*events.LambdaFunctionURLRequest)
	urlNone.RequestContext.Authorizer = nil
	v1Pool := v1("apigw-v1-iam.json").(*events.APIGatewayProxyRequest)
	v1Pool.RequestContext.Identity = events.APIGatewayRequestIdentity{CognitoIdentityID: "us-east-1:5f1e3c2a-xmpl", UserArn: "arn:aws:sts::123456789012:assumed-role/Cognito_Auth/CognitoIdentityCredentials"}
	v1Key := v1("apigw-v1-iam.json").(*events.APIGatewayProxyRequest)
	v1Key.RequestContext.Identity = events.APIGatewayRequestIdentity{APIKeyID: "k3xmpl9a1b"}

	tests := []struct {
		name string
		req  any
		want string
	}{
		{"HTTP API JWT authorizer", v2("apigw-v2-jwt.json"), "jwt:" + strconv.Itoa(len(iss)) + ":" + iss + "user-alice"},
		{"HTTP API Lambda authorizer", v2("apigw-v2-lambda-authorizer.json"), "lambda:tenant-17/user-342"},
		{"HTTP API IAM", v2("apigw-v2-iam.json"), "iam:arn:aws:sts::123456789012:assumed-role/uploader/uploader-session"},
		{"HTTP API without authorizer", noAuth, ""},
		{"REST API Cognito user pool", v1("apigw-v1-cognito.json"), "jwt:" + strconv.Itoa(len(v1iss)) + ":" + v1iss + "user-alice"},
		{"REST API Lambda authorizer", v1("apigw-v1-lambda-authorizer.json"), "lambda:tenant-17/user-342"},
		{"REST API IAM user", v1("apigw-v1-iam.json"), "iam:arn:aws:iam::123456789012:user/uploader"},
		{"REST API Cognito identity", v1Pool, "cognito-identity:us-east-1:5f1e3c2a-xmpl"},
		{"REST API key", v1Key, "apikey:k3xmpl9a1b"},
		{"Function URL IAM", url("function-url-iam.json"), "iam:arn:aws:sts::123456789012:assumed-role/payments-client/alice"},
		{"Function URL auth NONE", urlNone, ""},
		{"net/http", httptest.NewRequest("POST", "/payments", nil), ""},
		{"unknown type", "nope", ""},
		// Issue 9, case 1: a value, not a pointer, is read the same.
		{"HTTP API event by value", *v2("apigw-v2-lambda-authorizer.json").(*events.APIGatewayV2HTTPRequest), "lambda:tenant-17/user-342"},
		{"REST API event by value", *v1("apigw-v1-lambda-authorizer.json").(*events.APIGatewayProxyRequest), "lambda:tenant-17/user-342"},
		{"Function URL event by value", *url("function-url-iam.json").(*events.LambdaFunctionURLRequest), "iam:arn:aws:sts::123456789012:assumed-role/payments-client/alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dedupe.DefaultPrincipal(tt.req); got != tt.want {
				t.Errorf("DefaultPrincipal = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHTTPAPIReplayEvent checks the replayed event itself, not only what a
// client sees: base64 flag, cookies field, headers.
func TestHTTPAPIReplayEvent(t *testing.T) {
	var ev events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-iam.json", &ev) // $default route, base64 PNG body
	runs := 0
	first := events.APIGatewayV2HTTPResponse{
		StatusCode:      201,
		Headers:         map[string]string{"Content-Type": "image/png", "ETag": `"v1"`},
		Cookies:         []string{"upload=9921; Secure", "seen=1"},
		Body:            "iVBORw0KGgoAAAANSUhEUg==",
		IsBase64Encoded: true,
	}
	h := dedupe.HTTPAPI(dedupe.New(memstore.New(), nil), nil, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		if req.Body != ev.Body || !req.IsBase64Encoded {
			t.Errorf("handler got body %q (base64 %v), want the event's", req.Body, req.IsBase64Encoded)
		}
		return first, nil
	})
	got, err := h(context.Background(), ev)
	if err != nil || !reflect.DeepEqual(got, first) {
		t.Fatalf("fresh response = %+v, %v; want the handler's own %+v", got, err, first)
	}
	replay, err := h(context.Background(), ev)
	want := first
	want.Headers = map[string]string{"Content-Type": "image/png", "ETag": `"v1"`, dedupe.HeaderReplayed: "true"}
	if err != nil || runs != 1 || !reflect.DeepEqual(replay, want) {
		t.Errorf("replay = %+v, %v after %d runs; want %+v after 1", replay, err, runs, want)
	}
}

// TestHTTPAPIStoredText checks that a text body is replayed as text, even
// one that would only survive JSON as base64: exactly as first sent.
func TestHTTPAPIStoredText(t *testing.T) {
	var ev events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-jwt.json", &ev)
	for _, tt := range []struct {
		name   string
		body   string
		base64 bool
	}{
		{"utf-8 text", `{"id":"pay_1","note":"café ☕"}`, false},
		{"empty", "", false},
		{"base64 without padding kept verbatim", "aGk", true},
		{"base64 with padding", "aGk=", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: tt.body, IsBase64Encoded: tt.base64}
			h := dedupe.HTTPAPI(dedupe.New(memstore.New(), nil), nil, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return resp, nil
			})
			if _, err := h(context.Background(), ev); err != nil {
				t.Fatalf("first request: %v", err)
			}
			replay, err := h(context.Background(), ev)
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if replay.Body != tt.body || replay.IsBase64Encoded != tt.base64 || replay.Headers[dedupe.HeaderReplayed] != "true" {
				t.Errorf("replay body %q base64 %v (%v), want %q base64 %v", replay.Body, replay.IsBase64Encoded, replay.Headers, tt.body, tt.base64)
			}
		})
	}
}

// TestAPIGatewayTargets checks how the route key, path parameters and query
// scope and fingerprint requests.
func TestAPIGatewayTargets(t *testing.T) {
	type variant func(*events.APIGatewayV2HTTPRequest)
	tests := []struct {
		name     string
		fixture  string
		routeKey string // of both requests; "" keeps the fixture's
		second   variant
		status   int // of the second request; the first is always fresh
		runs     int
	}{
		{"same request replays", "apigw-v2-lambda-authorizer.json", "", func(*events.APIGatewayV2HTTPRequest) {}, 200, 1},
		{"other path parameter is 422", "apigw-v2-lambda-authorizer.json", "", func(e *events.APIGatewayV2HTTPRequest) {
			e.PathParameters = map[string]string{"id": "ord_1002"}
			e.RawPath = "/orders/ord_1002"
		}, 422, 1},
		{"other query is 422", "apigw-v2-lambda-authorizer.json", "", func(e *events.APIGatewayV2HTTPRequest) {
			e.RawQueryString = "notify=email"
			e.QueryStringParameters = map[string]string{"notify": "email"}
		}, 422, 1},
		// Issue 9, case 7: API Gateway joins repeated parameters with
		// commas; the raw query string tells them apart.
		{"repeated parameter and a comma value are 422", "apigw-v2-lambda-authorizer.json", "", func(e *events.APIGatewayV2HTTPRequest) {
			e.RawQueryString = "to=a%2Cb"
			e.QueryStringParameters = map[string]string{"to": "a,b"}
		}, 422, 1},
		// Issue 9, case 2: stages and APIs in front of one function.
		{"other stage is another scope", "apigw-v2-lambda-authorizer.json", "", func(e *events.APIGatewayV2HTTPRequest) {
			e.RequestContext.Stage = "v2"
		}, 200, 2},
		{"other API is another scope", "apigw-v2-lambda-authorizer.json", "", func(e *events.APIGatewayV2HTTPRequest) {
			e.RequestContext.APIID = "otherapi1"
		}, 200, 2},
		// Issue 9, case 10: a greedy route scopes by the actual path.
		{"greedy route is scoped by the actual path", "apigw-v2-iam.json", "POST /{proxy+}", func(e *events.APIGatewayV2HTTPRequest) {
			e.RawPath = "/uploads/other.png"
		}, 200, 2},
		{"greedy route, same path replays", "apigw-v2-iam.json", "POST /{proxy+}", func(*events.APIGatewayV2HTTPRequest) {}, 200, 1},
		// Issue 9, case 1: AWS's simple-response authorizer context.
		{"simple authorizer, other user runs again", "apigw-v2-lambda-simple.json", "", func(e *events.APIGatewayV2HTTPRequest) {
			e.RequestContext.Authorizer.Lambda["userId"] = "u-2002"
		}, 200, 2},
		{"simple authorizer, same user replays", "apigw-v2-lambda-simple.json", "", func(*events.APIGatewayV2HTTPRequest) {}, 200, 1},
		{"other principal runs again", "apigw-v2-lambda-authorizer.json", "", func(e *events.APIGatewayV2HTTPRequest) {
			e.RequestContext.Authorizer.Lambda["principalId"] = "tenant-18/user-342"
		}, 200, 2},
		{"$default route, same path replays", "apigw-v2-iam.json", "", func(*events.APIGatewayV2HTTPRequest) {}, 200, 1},
		{"$default route is scoped by raw path", "apigw-v2-iam.json", "", func(e *events.APIGatewayV2HTTPRequest) {
			e.RawPath = "/uploads/banner.png"
		}, 200, 2},
		{"ANY route is scoped by the actual method", "apigw-v2-iam.json", "ANY /uploads/{file}", func(e *events.APIGatewayV2HTTPRequest) {
			e.RequestContext.HTTP.Method = "PUT"
		}, 200, 2},
		{"ANY route, same method replays", "apigw-v2-iam.json", "ANY /uploads/{file}", func(*events.APIGatewayV2HTTPRequest) {}, 200, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first, second events.APIGatewayV2HTTPRequest
			fixture(t, tt.fixture, &first)
			fixture(t, tt.fixture, &second)
			if tt.routeKey != "" {
				first.RouteKey, second.RouteKey = tt.routeKey, tt.routeKey
			}
			if tt.name == "repeated parameter and a comma value are 422" {
				first.RawQueryString = "to=a&to=b"
				first.QueryStringParameters = map[string]string{"to": "a,b"}
			}
			tt.second(&second)
			runs := 0
			h := dedupe.HTTPAPI(dedupe.New(memstore.New(), nil), nil, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs++
				return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "ok"}, nil
			})
			if r, _ := h(context.Background(), first); r.StatusCode != 200 {
				t.Fatalf("first request: status %d, want 200", r.StatusCode)
			}
			r, err := h(context.Background(), second)
			if err != nil || r.StatusCode != tt.status || runs != tt.runs {
				t.Errorf("second request: status %d, %v after %d runs; want %d after %d", r.StatusCode, err, runs, tt.status, tt.runs)
			}
		})
	}
}

func TestRESTAPIMultiValue(t *testing.T) {
	var ev events.APIGatewayProxyRequest
	fixture(t, "apigw-v1-lambda-authorizer.json", &ev)
	runs := 0
	first := events.APIGatewayProxyResponse{
		StatusCode:        200,
		Headers:           map[string]string{"Content-Type": "application/json", "X-Version": "1", "Vary": "Origin"},
		MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1", "b=2"}, "X-Version": {"1", "2"}},
		Body:              `{"status":"shipped"}`,
	}
	h := dedupe.RESTAPI(dedupe.New(memstore.New(), nil), nil, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs++
		return first, nil
	})
	if got, err := h(context.Background(), ev); err != nil || !reflect.DeepEqual(got, first) {
		t.Fatalf("fresh response = %+v, %v; want the handler's own", got, err)
	}
	replay, _ := h(context.Background(), ev)
	want := events.APIGatewayProxyResponse{
		StatusCode:        200,
		Headers:           map[string]string{"Content-Type": "application/json", "Vary": "Origin", dedupe.HeaderReplayed: "true"},
		MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1", "b=2"}, "X-Version": {"1", "2"}},
		Body:              `{"status":"shipped"}`,
	}
	if runs != 1 || !reflect.DeepEqual(replay, want) {
		t.Errorf("replay = %+v after %d runs, want %+v after 1", replay, runs, want)
	}

	// Path parameters and multi-value query parameters are fingerprinted.
	for _, change := range []func(*events.APIGatewayProxyRequest){
		func(e *events.APIGatewayProxyRequest) { e.PathParameters = map[string]string{"id": "ord_1002"} },
		func(e *events.APIGatewayProxyRequest) {
			e.MultiValueQueryStringParameters = map[string][]string{"notify": {"sms", "email"}}
		},
	} {
		var other events.APIGatewayProxyRequest
		fixture(t, "apigw-v1-lambda-authorizer.json", &other)
		change(&other)
		if r, _ := h(context.Background(), other); r.StatusCode != 422 {
			t.Errorf("changed request: status %d, want 422", r.StatusCode)
		}
	}
}

// TestDefaultPrincipalNeverShares checks issue 9, case 1: whatever shape
// an authorizer gives its identity, two callers never share a principal,
// and a request that carries an authorizer identity never gets the shared
// scope (""). Issue 17, case 1: a context or token without an identity
// field has no principal at all, whatever else it carries.
func TestDefaultPrincipalNeverShares(t *testing.T) {
	v2Lambda := func(ctx map[string]any) any {
		return &events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: ctx}}}
	}
	v2JWT := func(claims map[string]string) any {
		return &events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims}}}}
	}
	v2IAM := func(iam events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) any {
		return &events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &iam}}}
	}
	v1Auth := func(auth map[string]any) any {
		return events.APIGatewayProxyRequest{RequestContext: events.APIGatewayProxyRequestContext{Authorizer: auth}}
	}
	pairs := []struct {
		name string
		a, b any
	}{
		{"simple response userId", v2Lambda(map[string]any{"userId": "u1"}), v2Lambda(map[string]any{"userId": "u2"})},
		{"numeric id", v2Lambda(map[string]any{"accountId": 41}), v2Lambda(map[string]any{"accountId": 42})},
		{"same user, other tenant", v2Lambda(map[string]any{"userId": "u1", "tenantId": "t1"}), v2Lambda(map[string]any{"userId": "u1", "tenantId": "t2"})},
		{"constant principalId, tenant beside it", v2Lambda(map[string]any{"principalId": "user", "tenantId": "t1"}), v2Lambda(map[string]any{"principalId": "user", "tenantId": "t2"})},
		{"JWT without sub (client credentials)", v2JWT(map[string]string{"iss": "i", "client_id": "c1"}), v2JWT(map[string]string{"iss": "i", "client_id": "c2"})},
		{"JWT issuers", v2JWT(map[string]string{"iss": "i1", "sub": "s"}), v2JWT(map[string]string{"iss": "i2", "sub": "s"})},
		{"REST claims as map[string]string", v1Auth(map[string]any{"claims": map[string]string{"sub": "a"}}), v1Auth(map[string]any{"claims": map[string]string{"sub": "b"}})},
		{"REST claims as a JSON string", v1Auth(map[string]any{"claims": `{"sub":"a"}`}), v1Auth(map[string]any{"claims": `{"sub":"b"}`})},
		// A subject beside another identity field identifies the pair,
		// never the subject alone.
		{"same sub, other tenant", v2Lambda(map[string]any{"sub": "alice", "tenantId": "t1"}), v2Lambda(map[string]any{"sub": "alice", "tenantId": "t2"})},
		{"id fields holding objects", v2Lambda(map[string]any{"userId": map[string]any{"n": 1}}), v2Lambda(map[string]any{"userId": map[string]any{"n": 2}})},
		{"id fields holding lists", v2Lambda(map[string]any{"userId": []any{"a"}}), v2Lambda(map[string]any{"userId": []any{"b"}})},
		{"IAM callers known by their caller id only", v2IAM(events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{CallerID: "AIDA1"}),
			v2IAM(events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{CallerID: "AIDA2"})},
		{"Lambda and IAM identities", v2Lambda(map[string]any{"principalId": "arn:aws:iam::1:user/u"}), &events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/u"}}}}},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			a, b := dedupe.DefaultPrincipal(p.a), dedupe.DefaultPrincipal(p.b)
			if a == "" || b == "" || a == b {
				t.Errorf("DefaultPrincipal = %q and %q, want two different, non-empty principals", a, b)
			}
		})
	}

	// What must not change between a caller's retries.
	same := []struct {
		name string
		a, b any
	}{
		{"id fields beside volatile ones", v2Lambda(map[string]any{"userId": "u1", "issuedAt": 1}), v2Lambda(map[string]any{"userId": "u1", "issuedAt": 2})},
	}
	for _, p := range same {
		t.Run(p.name, func(t *testing.T) {
			if a, b := dedupe.DefaultPrincipal(p.a), dedupe.DefaultPrincipal(p.b); a == "" || a != b {
				t.Errorf("DefaultPrincipal = %q and %q, want the same non-empty principal", a, b)
			}
		})
	}

	// No identity at all: the shared scope, which the adapters refuse
	// unless HTTPConfig.SharedScope is set.
	for name, req := range map[string]any{
		"empty simple-response context":     v2Lambda(map[string]any{}),
		"REST authorizer with latency only": v1Auth(map[string]any{"integrationLatency": 3}),
		// Issue 17, case 1: what identifies no caller is no principal.
		"context without id fields":        v2Lambda(map[string]any{"role": "buyer", "plan": "pro"}),
		"context with a volatile value":    v2Lambda(map[string]any{"role": "buyer", "authTime": 1764590000}),
		"nested context":                   v2Lambda(map[string]any{"who": map[string]any{"u": "1"}}),
		"empty id field":                   v2Lambda(map[string]any{"userId": "", "plan": "pro"}),
		"id field holding an empty object": v2Lambda(map[string]any{"userId": map[string]any{}, "plan": "pro"}),
		"id field holding an empty list":   v2Lambda(map[string]any{"userId": []any{}, "plan": "pro"}),
		"IAM authorizer naming no one":     v2IAM(events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccountID: "123456789012"}),
		"JWT with neither sub nor client":  v2JWT(map[string]string{"iss": "i", "scope": "orders:write", "iat": "1"}),
		"REST context without principalId": v1Auth(map[string]any{"team": "a", "integrationLatency": 3}),
	} {
		if got := dedupe.DefaultPrincipal(req); got != "" {
			t.Errorf("%s: DefaultPrincipal = %q, want \"\"", name, got)
		}
	}
}

// TestRESTAPIGreedyResource checks issue 9, case 10: behind "/{proxy+}"
// (with an ANY method), the route is the actual method and path, so
// RequireKeyOn keeps requiring a key and each path is its own scope.
func TestRESTAPIGreedyResource(t *testing.T) {
	runs := 0
	h := dedupe.RESTAPI(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{
		RequireKey: dedupe.RequireKeyOn("POST /orders"),
	}, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs++
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: strconv.Itoa(runs)}, nil
	})
	send := func(method, path, key string) events.APIGatewayProxyResponse {
		var ev events.APIGatewayProxyRequest
		fixture(t, "apigw-v1-lambda-authorizer.json", &ev)
		ev.Resource, ev.RequestContext.ResourcePath = "/{proxy+}", "/{proxy+}"
		ev.HTTPMethod, ev.RequestContext.HTTPMethod = method, method
		ev.Path = path
		ev.PathParameters = map[string]string{"proxy": strings.TrimPrefix(path, "/")}
		ev.Headers = map[string]string{}
		ev.MultiValueHeaders = map[string][]string{}
		if key != "" {
			ev.Headers["Idempotency-Key"] = key
			ev.MultiValueHeaders["Idempotency-Key"] = []string{key}
		}
		resp, err := h(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	steps := []struct {
		method, path, key string
		status            int
		body              string
		runs              int
	}{
		{"POST", "/orders", "", 400, "", 0},
		{"POST", "/orders", "k", 201, "1", 1},
		{"POST", "/orders", "k", 201, "1", 1},
		{"POST", "/refunds", "k", 201, "2", 2},
		{"PUT", "/orders", "k", 201, "3", 3},
		{"POST", "/refunds", "", 201, "4", 4},
	}
	for i, s := range steps {
		resp := send(s.method, s.path, s.key)
		if resp.StatusCode != s.status || (s.body != "" && resp.Body != s.body) || runs != s.runs {
			t.Errorf("step %d %s %s key %q: %d %q after %d runs, want %d %q after %d", i+1, s.method, s.path, s.key, resp.StatusCode, resp.Body, runs, s.status, s.body, s.runs)
		}
	}
}

// TestHTTPAPICookieFingerprint checks issue 9, case 7: payload 2.0 moves
// cookies out of the headers, and FingerprintHeaders{"Cookie"} still
// fingerprints them.
func TestHTTPAPICookieFingerprint(t *testing.T) {
	runs := 0
	h := dedupe.HTTPAPI(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{FingerprintHeaders: []string{"Cookie"}},
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "ok"}, nil
		})
	send := func(cookies ...string) int {
		var ev events.APIGatewayV2HTTPRequest
		fixture(t, "apigw-v2-jwt.json", &ev)
		ev.Cookies = cookies
		resp, err := h(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	if got := send("session=a"); got != 200 {
		t.Fatalf("first: %d, want 200", got)
	}
	if got := send("session=a"); got != 200 || runs != 1 {
		t.Errorf("same cookie: %d after %d runs, want a 200 replay after 1", got, runs)
	}
	if got := send("session=b"); got != 422 || runs != 1 {
		t.Errorf("other cookie: %d after %d runs, want 422 after 1", got, runs)
	}
}

// TestRESTAPIStageScope checks issue 9, case 2 for REST APIs: the same key
// on another stage or API runs there, instead of replaying this one.
func TestRESTAPIStageScope(t *testing.T) {
	runs := 0
	h := dedupe.RESTAPI(dedupe.New(memstore.New(), nil), nil, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs++
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: strconv.Itoa(runs)}, nil
	})
	for i, s := range []struct{ api, stage, want string }{
		{"w7hmxmplf6", "dev", "1"}, {"w7hmxmplf6", "prod", "2"}, {"other0api", "prod", "3"}, {"w7hmxmplf6", "dev", "1"},
	} {
		var ev events.APIGatewayProxyRequest
		fixture(t, "apigw-v1-lambda-authorizer.json", &ev)
		ev.RequestContext.APIID, ev.RequestContext.Stage = s.api, s.stage
		resp, err := h(context.Background(), ev)
		if err != nil || resp.Body != s.want {
			t.Errorf("request %d (%s/%s) = %q, %v; want %q", i+1, s.api, s.stage, resp.Body, err, s.want)
		}
	}
}
