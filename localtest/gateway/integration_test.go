package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestGatewayWithPool runs requests through the gateway into echofn under
// the real emulator.
func TestGatewayWithPool(t *testing.T) {
	pool, _ := newEchoPool(t, func(c *PoolConfig) { c.Function.Timeout = failTimeout })
	g, err := New(Config{
		Routes: []Route{
			{Key: "ANY /echo/{id}", Function: pool},
			{Key: "ANY /authed/{id}", Function: pool, Auth: Auth{Type: AuthJWT}},
		},
		// Far beyond the function's 1s timeout, so that a function
		// timeout reaches the client as such (500), however slowly the
		// emulator reports it.
		IntegrationTimeout: patience,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()

	t.Run("event reaches the function", func(t *testing.T) {
		req, _ := http.NewRequest("GET", srv.URL+"/authed/42?a=1&a=2", nil)
		req.Header.Set("Authorization", "Bearer "+jwtFor(map[string]any{"sub": "alice"}))
		resp, body := do(t, req)
		if resp.StatusCode != 200 || resp.Header.Get("X-Echo-Pid") == "" {
			t.Fatalf("got %d %s, want 200 from echofn", resp.StatusCode, body)
		}
		var a echoAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatal(err)
		}
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(a.Event, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.PathParameters["id"] != "42" || ev.QueryStringParameters["a"] != "1,2" || ev.RequestContext.Authorizer.JWT.Claims["sub"] != "alice" {
			t.Errorf("got event %s, want id 42, a=1,2 and sub alice", a.Event)
		}
	})

	tests := []struct {
		name       string
		query      string
		body       string
		wantStatus int
		wantBody   string
	}{
		{"handler error", "error=1", "", 500, `{"message":"Internal Server Error"}`},
		{"panic", "panic=1", "", 500, `{"message":"Internal Server Error"}`},
		{"function timeout", sleepPastTimeout, "", 500, `{"message":"Internal Server Error"}`},
		{"JSON result without statusCode", "raw=1", `{"hello":"world"}`, 200, `{"hello":"world"}`},
		{"JSON string result", "raw=1", `"hi"`, 200, `"hi"`},
		{"result object", "raw=1", `{"statusCode":418,"body":"teapot","cookies":["a=1"]}`, 418, `teapot`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/echo/1?"+tt.query, strings.NewReader(tt.body))
			resp, body := do(t, req)
			if resp.StatusCode != tt.wantStatus || string(body) != tt.wantBody {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
		})
	}

	t.Run("integration timeout", func(t *testing.T) {
		g2, err := New(Config{Routes: []Route{{Key: "GET /echo/{id}", Function: pool}}, IntegrationTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		srv2 := httptest.NewServer(g2)
		defer srv2.Close()
		// The function sleeps 800ms at least: the 300ms integration
		// timeout passes first, however fast or slow the machine.
		resp, body := do(t, mustRequest(t, "GET", srv2.URL+"/echo/1?sleep=800ms"))
		if resp.StatusCode != 503 || string(body) != `{"message":"Service Unavailable"}` {
			t.Errorf("got %d %s, want 503 Service Unavailable", resp.StatusCode, body)
		}
		// The invocation ran on; the environment comes back afterwards.
		eventually(t, "the invocation ended", func() bool { return pool.Stats().Busy == 0 })
	})

	t.Run("throttled", func(t *testing.T) {
		one, _ := newEchoPool(t, func(c *PoolConfig) {
			c.MaxConcurrency = 1
			c.Function.Timeout = heldTimeout
		})
		g3, err := New(Config{Routes: []Route{{Key: "GET /echo/{id}", Function: one}}, IntegrationTimeout: patience})
		if err != nil {
			t.Fatal(err)
		}
		srv3 := httptest.NewServer(g3)
		defer srv3.Close()
		hold, release := newHold(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.Get(srv3.URL + "/echo/1?" + hold)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
		eventually(t, "the first request busy", func() bool { return one.Stats().Busy == 1 })
		resp, body := do(t, mustRequest(t, "GET", srv3.URL+"/echo/2"))
		if resp.StatusCode != 429 || string(body) != `{"message":"Too Many Requests"}` {
			t.Errorf("got %d %s, want 429 Too Many Requests", resp.StatusCode, body)
		}
		release()
		<-done
	})
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
