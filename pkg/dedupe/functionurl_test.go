package dedupe_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

func TestFunctionURL(t *testing.T) {
	type variant func(*events.LambdaFunctionURLRequest)
	tests := []struct {
		name   string
		cfg    *dedupe.HTTPConfig
		second variant
		status int
		runs   int
	}{
		{"same request replays", nil, func(*events.LambdaFunctionURLRequest) {}, 201, 1},
		{"re-encoded base64 JSON body replays", nil, func(e *events.LambdaFunctionURLRequest) {
			e.Body, e.IsBase64Encoded = `{"source":"tok_visa","currency":"EUR","amount":1250}`, false
		}, 201, 1},
		{"other path is another scope", nil, func(e *events.LambdaFunctionURLRequest) { e.RawPath = "/refunds" }, 201, 2},
		{"other query is 422", nil, func(e *events.LambdaFunctionURLRequest) {
			e.RawQueryString = "capture=false"
			e.QueryStringParameters = map[string]string{"capture": "false"}
		}, 422, 1},
		// Issue 9, case 2: another Function URL (an alias) is another scope.
		{"other URL domain is another scope", nil, func(e *events.LambdaFunctionURLRequest) {
			e.RequestContext.DomainName = "zz9xmpl.lambda-url.us-east-1.on.aws"
		}, 201, 2},
		{"other IAM caller runs again", nil, func(e *events.LambdaFunctionURLRequest) {
			e.RequestContext.Authorizer.IAM.UserARN = "arn:aws:sts::123456789012:assumed-role/payments-client/bob"
		}, 201, 2},
		{"configured route groups paths", &dedupe.HTTPConfig{Route: func(req any) string {
			return req.(*events.LambdaFunctionURLRequest).RequestContext.HTTP.Method + " /payments/*"
		}}, func(e *events.LambdaFunctionURLRequest) { e.RawPath = "/payments/" }, 422, 1},
		{"configured principal", &dedupe.HTTPConfig{Principal: func(req any) string {
			return "tenant:" + req.(*events.LambdaFunctionURLRequest).Headers["x-tenant"]
		}}, func(e *events.LambdaFunctionURLRequest) { e.Headers["x-tenant"] = "t2" }, 201, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first, second events.LambdaFunctionURLRequest
			fixture(t, "function-url-iam.json", &first)
			fixture(t, "function-url-iam.json", &second)
			tt.second(&second)
			runs := 0
			resp := events.LambdaFunctionURLResponse{
				StatusCode: 201,
				Headers:    map[string]string{"Content-Type": "application/json"},
				Cookies:    []string{"receipt=pay_1; Secure"},
				Body:       `{"id":"pay_1"}`,
			}
			h := dedupe.FunctionURL(dedupe.New(memstore.New(), nil), tt.cfg, func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
				runs++
				return resp, nil
			})
			if got, err := h(context.Background(), first); err != nil || !reflect.DeepEqual(got, resp) {
				t.Fatalf("first response = %+v, %v; want the handler's own", got, err)
			}
			got, err := h(context.Background(), second)
			if err != nil || got.StatusCode != tt.status || runs != tt.runs {
				t.Fatalf("second response: status %d, %v after %d runs; want %d after %d", got.StatusCode, err, runs, tt.status, tt.runs)
			}
			if tt.status == 201 && tt.runs == 1 {
				want := resp
				want.Headers = map[string]string{"Content-Type": "application/json", dedupe.HeaderReplayed: "true"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("replay = %+v, want %+v", got, want)
				}
			}
		})
	}
}
