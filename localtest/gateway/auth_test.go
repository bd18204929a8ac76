package gateway

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// sigV4 is an Authorization header of the form curl --aws-sigv4 and
// awscurl send, for access key id.
func sigV4(id string) string {
	return "AWS4-HMAC-SHA256 Credential=" + id + "/20260101/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123456789abcdef"
}

// TestAuthorizerOnlyWhereDeclared: claims and identities reach a function
// only on a route whose authorizer the template declares, exactly as in
// AWS. On a route without one, a bearer token or a signature is a header
// like any other: no requestContext.authorizer, so nothing scopes keys by
// caller locally that would not in AWS.
func TestAuthorizerOnlyWhereDeclared(t *testing.T) {
	fn := &fakeFunction{result: `{"statusCode":200}`}
	srv, _ := newTestGateway(t, fn, []string{"GET /open", "GET /iam", "GET /jwt", "GET /jwt-iss"}, func(c *Config) {
		c.Routes[1].Auth = Auth{Type: AuthIAM}
		c.Routes[2].Auth = Auth{Type: AuthJWT}
		c.Routes[3].Auth = Auth{Type: AuthJWT, Issuer: "https://issuer.example", Audience: []string{"payments"}}
	})
	alice := "Bearer " + jwtFor(map[string]any{"iss": "https://issuer.example", "sub": "alice", "aud": "payments"})
	tests := []struct {
		name, path, auth string
		wantStatus       int
		want             func(*events.APIGatewayV2HTTPRequestContextAuthorizerDescription) bool
	}{
		{"open route, no credentials", "/open", "", 200, isNil},
		{"open route ignores a bearer token", "/open", alice, 200, isNil},
		{"open route ignores a signature", "/open", sigV4("AKIDALICE"), 200, isNil},
		{"open route ignores a malformed token", "/open", "Bearer abc", 200, isNil},
		{"IAM route, unsigned", "/iam", "", 403, nil},
		{"IAM route, a bearer token", "/iam", alice, 403, nil},
		{"IAM route, credential for another service", "/iam", strings.Replace(sigV4("AKIDALICE"), "execute-api", "s3", 1), 403, nil},
		{"IAM route, no signature", "/iam", strings.TrimSuffix(sigV4("AKIDALICE"), "0123456789abcdef"), 403, nil},
		{"IAM route, host not signed", "/iam", strings.Replace(sigV4("AKIDALICE"), "host;", "", 1), 403, nil},
		{"IAM route, signed", "/iam", sigV4("AKIDALICE"), 200, func(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) bool {
			return a != nil && a.JWT == nil && a.IAM != nil && a.IAM.AccessKey == "AKIDALICE" && a.IAM.UserARN == "arn:aws:iam::"+DefaultAccountID+":user/AKIDALICE"
		}},
		{"JWT route, no token", "/jwt", "", 401, nil},
		{"JWT route, a signature", "/jwt", sigV4("AKIDALICE"), 401, nil},
		{"JWT route, a token", "/jwt", alice, 200, func(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) bool {
			return a != nil && a.IAM == nil && a.JWT != nil && a.JWT.Claims["sub"] == "alice"
		}},
		{"JWT route, issuer and audience", "/jwt-iss", alice, 200, func(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) bool {
			return a != nil && a.JWT != nil && a.JWT.Claims["sub"] == "alice"
		}},
		{"JWT route, another issuer", "/jwt-iss", "Bearer " + jwtFor(map[string]any{"iss": "https://evil.example", "sub": "alice", "aud": "payments"}), 401, nil},
		{"JWT route, another audience", "/jwt-iss", "Bearer " + jwtFor(map[string]any{"iss": "https://issuer.example", "sub": "alice", "aud": "other"}), 401, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn.mu.Lock()
			fn.events = nil
			fn.mu.Unlock()
			req, _ := http.NewRequest("GET", srv.URL+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, body := do(t, req)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantStatus != 200 {
				if len(fn.events) != 0 {
					t.Error("function invoked for a refused request")
				}
				return
			}
			ev := fn.last(t)
			if !tt.want(ev.RequestContext.Authorizer) {
				t.Errorf("got authorizer %+v, want it to match", ev.RequestContext.Authorizer)
			}
			if tt.auth != "" && ev.Headers["authorization"] != tt.auth {
				t.Errorf("got authorization header %q, want it passed on", ev.Headers["authorization"])
			}
		})
	}
}

func isNil(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) bool { return a == nil }

// TestAuthorizerNotEmulated: a Lambda authorizer cannot be mirrored, so a
// route that declares one is refused at construction rather than served
// open.
func TestAuthorizerNotEmulated(t *testing.T) {
	_, err := New(Config{Routes: []Route{{Key: "GET /x", Function: &fakeFunction{}, Auth: Auth{Type: "REQUEST"}}}})
	if !errors.Is(err, ErrRoute) || !strings.Contains(err.Error(), "not emulated") {
		t.Errorf("got %v, want ErrRoute naming the authorizer type", err)
	}
}

// TestRepeatedHeadersJoined: API Gateway joins a repeated header's values
// with "," and no space (payload format 2.0: "value1,value2").
func TestRepeatedHeadersJoined(t *testing.T) {
	fn := &fakeFunction{result: `{"statusCode":200}`}
	srv, _ := newTestGateway(t, fn, []string{"GET /h"}, nil)
	req, _ := http.NewRequest("GET", srv.URL+"/h", nil)
	req.Header.Add("Idempotency-Key", "a")
	req.Header.Add("Idempotency-Key", "b")
	req.Header.Add("X-Three", "1")
	req.Header.Add("X-Three", "2")
	req.Header.Add("X-Three", "3")
	do(t, req)
	ev := fn.last(t)
	for name, want := range map[string]string{"idempotency-key": "a,b", "x-three": "1,2,3"} {
		if got := ev.Headers[name]; got != want {
			t.Errorf("header %s: got %q, want %q", name, got, want)
		}
	}
}
