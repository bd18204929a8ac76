package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// fakeFunction records the events it gets and answers with result or err.
type fakeFunction struct {
	mu     sync.Mutex
	events [][]byte
	result string
	err    error
	block  bool // wait for ctx to end, as a slow function would
}

func (f *fakeFunction) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	f.mu.Lock()
	f.events = append(f.events, payload)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return []byte(f.result), nil
}

func (f *fakeFunction) last(t *testing.T) events.APIGatewayV2HTTPRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.events) == 0 {
		t.Fatal("the function was not invoked")
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(f.events[len(f.events)-1], &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

var testNow = time.Date(2026, 11, 30, 12, 34, 56, 789_000_000, time.UTC)

// newTestGateway serves routes, all backed by fn, on an httptest server.
func newTestGateway(t *testing.T, fn Invoker, keys []string, edit func(*Config)) (*httptest.Server, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	cfg := Config{Now: func() time.Time { return testNow }, Logger: log.New(&syncWriter{w: logs}, "", 0)}
	for _, k := range keys {
		cfg.Routes = append(cfg.Routes, Route{Key: k, Function: fn})
	}
	if edit != nil {
		edit(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv, logs
}

// jwtFor returns an unsigned JWT carrying claims.
func jwtFor(claims map[string]any) string {
	enc := base64.RawURLEncoding
	payload, _ := json.Marshal(claims)
	return enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + ".c2lnbmF0dXJl"
}

func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestEvent(t *testing.T) {
	fn := &fakeFunction{result: `{"statusCode":204}`}
	srv, _ := newTestGateway(t, fn, []string{"POST /payments", "GET /payments/{id}", "ANY /files/{proxy+}", "$default"}, nil)

	t.Run("request context and headers", func(t *testing.T) {
		req, _ := http.NewRequest("POST", srv.URL+"/payments?b=x%20y&a=1&a=2", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "test-agent/1.0")
		req.Header.Add("X-Multi", "one")
		req.Header.Add("X-Multi", "two")
		req.Header.Add("Cookie", "a=1; b=2")
		req.Header.Set("Idempotency-Key", "k1")
		do(t, req)
		ev := fn.last(t)
		checks := []struct {
			name      string
			got, want any
		}{
			{"version", ev.Version, "2.0"},
			{"routeKey", ev.RouteKey, "POST /payments"},
			{"rawPath", ev.RawPath, "/payments"},
			{"rawQueryString", ev.RawQueryString, "b=x%20y&a=1&a=2"},
			{"query a", ev.QueryStringParameters["a"], "1,2"},
			{"query b", ev.QueryStringParameters["b"], "x y"},
			{"header x-multi", ev.Headers["x-multi"], "one,two"},
			{"header idempotency-key", ev.Headers["idempotency-key"], "k1"},
			{"header content-type", ev.Headers["content-type"], "application/json"},
			{"header content-length", ev.Headers["content-length"], "14"},
			{"header host", ev.Headers["host"], strings.TrimPrefix(srv.URL, "http://")},
			{"header x-forwarded-for", ev.Headers["x-forwarded-for"], "127.0.0.1"},
			{"header x-forwarded-proto", ev.Headers["x-forwarded-proto"], "http"},
			{"no cookie header", ev.Headers["cookie"], ""},
			{"cookies", strings.Join(ev.Cookies, "|"), "a=1|b=2"},
			{"path parameters", len(ev.PathParameters), 0},
			{"body", ev.Body, `{"amount":100}`},
			{"isBase64Encoded", ev.IsBase64Encoded, false},
			{"context routeKey", ev.RequestContext.RouteKey, "POST /payments"},
			{"stage", ev.RequestContext.Stage, "$default"},
			{"accountId", ev.RequestContext.AccountID, DefaultAccountID},
			{"apiId", ev.RequestContext.APIID, DefaultAPIID},
			{"domainName", ev.RequestContext.DomainName, strings.TrimPrefix(srv.URL, "http://")},
			{"time", ev.RequestContext.Time, "30/Nov/2026:12:34:56 +0000"},
			{"timeEpoch", ev.RequestContext.TimeEpoch, testNow.UnixMilli()},
			{"http.method", ev.RequestContext.HTTP.Method, "POST"},
			{"http.path", ev.RequestContext.HTTP.Path, "/payments"},
			{"http.protocol", ev.RequestContext.HTTP.Protocol, "HTTP/1.1"},
			{"http.sourceIp", ev.RequestContext.HTTP.SourceIP, "127.0.0.1"},
			{"http.userAgent", ev.RequestContext.HTTP.UserAgent, "test-agent/1.0"},
			{"authorizer", ev.RequestContext.Authorizer == nil, true},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
			}
		}
		if len(ev.RequestContext.RequestID) != 16 {
			t.Errorf("requestId: got %q, want 16 characters", ev.RequestContext.RequestID)
		}
	})

	t.Run("request ids are unique", func(t *testing.T) {
		seen := map[string]bool{}
		for range 20 {
			req, _ := http.NewRequest("GET", srv.URL+"/payments/1", nil)
			resp, _ := do(t, req)
			id := fn.last(t).RequestContext.RequestID
			if seen[id] {
				t.Fatalf("requestId %q repeated", id)
			}
			seen[id] = true
			if got := resp.Header.Get("Apigw-Requestid"); got != id {
				t.Errorf("Apigw-Requestid: got %q, want %q", got, id)
			}
		}
	})

	routes := []struct {
		name, method, path string
		wantRoute          string
		wantParams         map[string]string
		wantRawPath        string
	}{
		{"path variable", "GET", "/payments/pay_123", "GET /payments/{id}", map[string]string{"id": "pay_123"}, "/payments/pay_123"},
		{"path variable decoded", "GET", "/payments/a%20b", "GET /payments/{id}", map[string]string{"id": "a b"}, "/payments/a b"},
		{"greedy variable", "PUT", "/files/a/b/c.txt", "ANY /files/{proxy+}", map[string]string{"proxy": "a/b/c.txt"}, "/files/a/b/c.txt"},
		{"default", "DELETE", "/payments", "$default", nil, "/payments"},
		{"default for unknown path", "GET", "/nowhere", "$default", nil, "/nowhere"},
	}
	for _, tt := range routes {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			do(t, req)
			ev := fn.last(t)
			if ev.RouteKey != tt.wantRoute || ev.RawPath != tt.wantRawPath {
				t.Errorf("got route %q rawPath %q, want %q %q", ev.RouteKey, ev.RawPath, tt.wantRoute, tt.wantRawPath)
			}
			if fmt.Sprint(ev.PathParameters) != fmt.Sprint(tt.wantParams) {
				t.Errorf("got pathParameters %v, want %v", ev.PathParameters, tt.wantParams)
			}
		})
	}

	bodies := []struct {
		name        string
		contentType string
		body        []byte
		wantBase64  bool
	}{
		{"json text", "application/json", []byte(`{"a":"é"}`), false},
		{"plain text", "text/plain; charset=utf-8", []byte("hello"), false},
		// Unless text/* or application/json, AWS base64-encodes the body.
		{"no content type", "", []byte("a=b"), true},
		{"vendor json", "application/problem+json", []byte(`{}`), true},
		{"form post", "application/x-www-form-urlencoded", []byte("a=b"), true},
		{"xml", "application/xml", []byte("<a/>"), true},
		{"binary type", "image/png", []byte("\x89PNG\r\n"), true},
		{"octet stream even if UTF-8", "application/octet-stream", []byte("text"), true},
		{"invalid UTF-8 in a text type", "text/plain", []byte{0xff, 0xfe, 'a'}, true},
	}
	for _, tt := range bodies {
		t.Run("body "+tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/payments", bytes.NewReader(tt.body))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			do(t, req)
			ev := fn.last(t)
			if ev.IsBase64Encoded != tt.wantBase64 {
				t.Fatalf("got isBase64Encoded %v, want %v", ev.IsBase64Encoded, tt.wantBase64)
			}
			got := []byte(ev.Body)
			if ev.IsBase64Encoded {
				got, _ = base64.StdEncoding.DecodeString(ev.Body)
			}
			if !bytes.Equal(got, tt.body) {
				t.Errorf("got body %q, want %q", got, tt.body)
			}
		})
	}
}

func TestJWT(t *testing.T) {
	fn := &fakeFunction{result: `{"statusCode":200}`}
	srv, _ := newTestGateway(t, fn, []string{"POST /payments"}, func(c *Config) { c.Routes[0].Auth = Auth{Type: AuthJWT} })
	tests := []struct {
		name       string
		auth       string
		wantStatus int
		wantClaims map[string]string
		wantScopes []string
	}{
		{
			name:       "claims as strings, scopes from scope",
			auth:       "Bearer " + jwtFor(map[string]any{"sub": "alice", "iat": 1700000000, "exp": testNow.Unix() + 60, "groups": []string{"a", "b"}, "email_verified": true, "scope": "payments:write payments:read"}),
			wantStatus: 200,
			wantClaims: map[string]string{"sub": "alice", "iat": "1700000000", "exp": fmt.Sprint(testNow.Unix() + 60), "groups": "[a b]", "email_verified": "true", "scope": "payments:write payments:read"},
			wantScopes: []string{"payments:write", "payments:read"},
		},
		{
			name:       "scopes from scp",
			auth:       "bearer " + jwtFor(map[string]any{"sub": "bob", "scp": []string{"x"}}),
			wantStatus: 200,
			wantClaims: map[string]string{"sub": "bob", "scp": "[x]"},
			wantScopes: []string{"x"},
		},
		{name: "no token", auth: "", wantStatus: 401},
		{name: "basic auth", auth: "Basic dTpw", wantStatus: 401},
		{name: "not a JWT", auth: "Bearer abc", wantStatus: 401},
		{name: "payload not JSON", auth: "Bearer a.bm90IGpzb24.c", wantStatus: 401},
		{name: "expired", auth: "Bearer " + jwtFor(map[string]any{"sub": "carol", "exp": testNow.Unix() - 1}), wantStatus: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn.mu.Lock()
			fn.events = nil
			fn.mu.Unlock()
			req, _ := http.NewRequest("POST", srv.URL+"/payments", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, body := do(t, req)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantStatus == 401 {
				if string(body) != `{"message":"Unauthorized"}` {
					t.Errorf("got body %s, want the Unauthorized message", body)
				}
				if len(fn.events) != 0 {
					t.Error("function invoked for a refused token")
				}
				return
			}
			az := fn.last(t).RequestContext.Authorizer
			if tt.wantClaims == nil {
				if az != nil {
					t.Errorf("got authorizer %+v, want none", az)
				}
				return
			}
			if az == nil || az.JWT == nil {
				t.Fatal("got no authorizer.jwt")
			}
			if fmt.Sprint(az.JWT.Claims) != fmt.Sprint(tt.wantClaims) {
				t.Errorf("got claims %v, want %v", az.JWT.Claims, tt.wantClaims)
			}
			if fmt.Sprint(az.JWT.Scopes) != fmt.Sprint(tt.wantScopes) {
				t.Errorf("got scopes %v, want %v", az.JWT.Scopes, tt.wantScopes)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	keys := []string{"GET /payments", "POST /payments", "GET /payments/{id}", "GET /payments/summary", "ANY /payments/{id}", "GET /a/{x}/c", "GET /a/{proxy+}", "GET /"}
	tests := []struct {
		method, path string
		want         string // route key, or "" for 404
	}{
		{"GET", "/payments", "GET /payments"},
		{"POST", "/payments", "POST /payments"},
		{"DELETE", "/payments", ""},
		{"GET", "/payments/", ""},
		{"GET", "/payments/p1", "GET /payments/{id}"},
		{"GET", "/payments/summary", "GET /payments/summary"},
		{"PATCH", "/payments/p1", "ANY /payments/{id}"},
		{"GET", "/payments/p1/refunds", ""},
		{"GET", "/a/b/c", "GET /a/{x}/c"},
		{"GET", "/a/b/d", "GET /a/{proxy+}"},
		{"GET", "/a/b", "GET /a/{proxy+}"},
		{"GET", "/", "GET /"},
		{"GET", "/unknown", ""},
	}
	rt, err := newRouteTable(func() []Route {
		var rs []Route
		for _, k := range keys {
			rs = append(rs, Route{Key: k, Function: &fakeFunction{}})
		}
		return rs
	}())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			got, _ := rt.lookup(tt.method, tt.path)
			gotKey := ""
			if got != nil {
				gotKey = got.key
			}
			if gotKey != tt.want {
				t.Errorf("got %q, want %q", gotKey, tt.want)
			}
		})
	}

	t.Run("unknown route answers 404", func(t *testing.T) {
		fn := &fakeFunction{result: `{"statusCode":200}`}
		srv, _ := newTestGateway(t, fn, []string{"GET /payments"}, nil)
		req, _ := http.NewRequest("GET", srv.URL+"/nope", nil)
		resp, body := do(t, req)
		if resp.StatusCode != 404 || string(body) != `{"message":"Not Found"}` {
			t.Errorf("got %d %s, want 404 Not Found", resp.StatusCode, body)
		}
	})

	bad := []string{"GET payments", "get /payments", "/payments", "GET /a//b", "GET /{proxy+}/x", "GET /a{b}", "GET /{}"}
	for _, k := range bad {
		t.Run("invalid "+k, func(t *testing.T) {
			if _, err := New(Config{Routes: []Route{{Key: k, Function: &fakeFunction{}}}}); err == nil {
				t.Errorf("got no error for route %q, want ErrRoute", k)
			}
		})
	}
	t.Run("duplicate", func(t *testing.T) {
		fn := &fakeFunction{}
		if _, err := New(Config{Routes: []Route{{Key: "GET /a", Function: fn}, {Key: "GET /a", Function: fn}}}); err == nil {
			t.Error("got no error for a duplicate route, want ErrRoute")
		}
	})
}

func TestResponseMapping(t *testing.T) {
	tests := []struct {
		name        string
		result      string
		wantStatus  int
		wantHeaders map[string][]string
		wantBody    string
	}{
		{
			name:        "response object",
			result:      `{"statusCode":201,"headers":{"content-type":"application/json","idempotent-replayed":"true"},"body":"{\"id\":\"p1\"}"}`,
			wantStatus:  201,
			wantHeaders: map[string][]string{"Content-Type": {"application/json"}, "Idempotent-Replayed": {"true"}},
			wantBody:    `{"id":"p1"}`,
		},
		{
			name:        "cookies; multiValueHeaders ignored as in payload 2.0",
			result:      `{"statusCode":200,"headers":{"x-a":"1,2"},"multiValueHeaders":{"x-a":["3"],"x-b":["3","4"]},"cookies":["s=1; HttpOnly","t=2"],"body":"ok"}`,
			wantStatus:  200,
			wantHeaders: map[string][]string{"X-A": {"1,2"}, "X-B": nil, "Set-Cookie": {"s=1; HttpOnly", "t=2"}},
			wantBody:    "ok",
		},
		{
			name:        "base64 body decoded",
			result:      `{"statusCode":200,"headers":{"content-type":"application/octet-stream"},"body":"AAEC/w==","isBase64Encoded":true}`,
			wantStatus:  200,
			wantHeaders: map[string][]string{"Content-Type": {"application/octet-stream"}},
			wantBody:    "\x00\x01\x02\xff",
		},
		{
			name:        "no content type is not sniffed",
			result:      `{"statusCode":202,"body":"<html>"}`,
			wantStatus:  202,
			wantHeaders: map[string][]string{"Content-Type": nil},
			wantBody:    "<html>",
		},
		{
			name:        "JSON without statusCode is inferred",
			result:      `{"id":"p1","amount":100}`,
			wantStatus:  200,
			wantHeaders: map[string][]string{"Content-Type": {"application/json"}},
			wantBody:    `{"id":"p1","amount":100}`,
		},
		{
			name:        "JSON string is the body as is",
			result:      `"hello"`,
			wantStatus:  200,
			wantHeaders: map[string][]string{"Content-Type": {"application/json"}},
			wantBody:    `"hello"`,
		},
		{
			name:        "statusCode of the wrong type",
			result:      `{"statusCode":"201","body":"x"}`,
			wantStatus:  500,
			wantHeaders: map[string][]string{"Content-Type": {"application/json"}},
			wantBody:    `{"message":"Internal Server Error"}`,
		},
		{
			name:       "invalid base64 body",
			result:     `{"statusCode":200,"body":"***","isBase64Encoded":true}`,
			wantStatus: 500,
			wantBody:   `{"message":"Internal Server Error"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newTestGateway(t, &fakeFunction{result: tt.result}, []string{"$default"}, nil)
			req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
			resp, body := do(t, req)
			if resp.StatusCode != tt.wantStatus || string(body) != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			for name, want := range tt.wantHeaders {
				if got := resp.Header.Values(name); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("header %s: got %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestInvokeFailures(t *testing.T) {
	tests := []struct {
		name       string
		fn         *fakeFunction
		wantStatus int
		wantBody   string
	}{
		{"function error", &fakeFunction{err: &FunctionError{Function: "f", Type: "errorString", Message: "boom"}}, 500, `{"message":"Internal Server Error"}`},
		{"function timeout", &fakeFunction{err: &FunctionError{Function: "f", Type: ErrorTypeTimeout}}, 500, `{"message":"Internal Server Error"}`},
		{"throttled", &fakeFunction{err: fmt.Errorf("wrapped: %w", ErrThrottled)}, 429, `{"message":"Too Many Requests"}`},
		{"integration timeout", &fakeFunction{block: true}, 503, `{"message":"Service Unavailable"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Only a blocked function meets the short timeout: one that
			// answers at once must not race it on a busy machine.
			timeout := DefaultIntegrationTimeout
			if tt.fn.block {
				timeout = 50 * time.Millisecond
			}
			srv, _ := newTestGateway(t, tt.fn, []string{"POST /payments"}, func(c *Config) { c.IntegrationTimeout = timeout })
			req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader("{}"))
			resp, body := do(t, req)
			if resp.StatusCode != tt.wantStatus || string(body) != tt.wantBody {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got content-type %q, want application/json", ct)
			}
		})
	}

	t.Run("route timeout overrides the gateway's", func(t *testing.T) {
		fn := &fakeFunction{block: true}
		g, err := New(Config{Routes: []Route{{Key: "GET /slow", Function: fn, Timeout: 20 * time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		start := time.Now()
		g.ServeHTTP(rec, httptest.NewRequest("GET", "/slow", nil))
		if rec.Code != 503 || time.Since(start) > 10*time.Second {
			t.Errorf("got %d after %v, want 503 after the route's 20ms", rec.Code, time.Since(start))
		}
	})

	t.Run("body too large", func(t *testing.T) {
		fn := &fakeFunction{result: `{"statusCode":200}`}
		srv, _ := newTestGateway(t, fn, []string{"POST /payments"}, func(c *Config) { c.MaxBodyBytes = 10 })
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(strings.Repeat("x", 11)))
		resp, _ := do(t, req)
		if resp.StatusCode != 413 || len(fn.events) != 0 {
			t.Errorf("got %d with %d invocations, want 413 and none", resp.StatusCode, len(fn.events))
		}
	})
}

func TestRequestLog(t *testing.T) {
	fn := &fakeFunction{result: `{"statusCode":201,"headers":{"Idempotent-Replayed":"true"}}`}
	srv, logs := newTestGateway(t, fn, []string{"GET /payments/{id}"}, nil)
	req, _ := http.NewRequest("GET", srv.URL+"/payments/p1?x=1", nil)
	do(t, req)
	fn.result = `{"statusCode":200}`
	do(t, req)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d log lines %q, want the authorizer note and one line per request", len(lines), lines)
	}
	if !strings.Contains(lines[0], "WITHOUT verifying signatures") {
		t.Errorf("got %q, want the note that signatures are not verified", lines[0])
	}
	for i, want := range []string{`GET /payments/p1?x=1 route="GET /payments/{id}" status=201 latency=`, `replayed=yes`} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line 1 (%d): got %q, want it to contain %q", i, lines[1], want)
		}
	}
	if !strings.Contains(lines[2], "status=200") || !strings.Contains(lines[2], "replayed=no") {
		t.Errorf("got %q, want status=200 replayed=no", lines[2])
	}
}
