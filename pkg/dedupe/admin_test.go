package dedupe_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestKeyOfEventIsTheAdapters checks, on every HTTP fixture, that
// KeyOfEvent and StoreKey give the key the adapter really claims.
func TestKeyOfEventIsTheAdapters(t *testing.T) {
	const prefix = "fn"
	tests := []struct {
		file string
		run  func(t *testing.T, g *dedupe.Guard, raw []byte) (claimed string, ev any)
	}{
		{"apigw-v2-jwt.json", v2}, {"apigw-v2-iam.json", v2}, {"apigw-v2-lambda-authorizer.json", v2},
		{"apigw-v1-cognito.json", v1}, {"apigw-v1-iam.json", v1}, {"apigw-v1-lambda-authorizer.json", v1},
		{"function-url-iam.json", url},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: prefix})
			claimed, ev := tt.run(t, g, raw)
			if claimed == "" {
				t.Fatal("the adapter claimed nothing")
			}
			got, err := dedupe.KeyOfEvent(nil, ev)
			if err != nil {
				t.Fatalf("KeyOfEvent: %v", err)
			}
			if key := dedupe.StoreKey(prefix, got.Scoped); key != claimed || key != g.Key(got.Scoped) {
				t.Errorf("KeyOfEvent gives %q, the adapter claimed %q", key, claimed)
			}
			if got.Scoped != dedupe.ScopeKey(got.API, got.Route, got.Principal, got.ClientKey) {
				t.Errorf("Scoped %q is not ScopeKey of its parts %+v", got.Scoped, got)
			}
		})
	}
}

func v2(t *testing.T, g *dedupe.Guard, raw []byte) (string, any) {
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	var claimed string
	h := dedupe.HTTPAPI(g, nil, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		c, _ := dedupe.ClaimFrom(ctx)
		claimed = c.Key
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	})
	h(context.Background(), ev)
	return claimed, ev
}

func v1(t *testing.T, g *dedupe.Guard, raw []byte) (string, any) {
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	var claimed string
	h := dedupe.RESTAPI(g, nil, func(ctx context.Context, _ events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		c, _ := dedupe.ClaimFrom(ctx)
		claimed = c.Key
		return events.APIGatewayProxyResponse{StatusCode: 200}, nil
	})
	h(context.Background(), ev)
	return claimed, &ev
}

func url(t *testing.T, g *dedupe.Guard, raw []byte) (string, any) {
	var ev events.LambdaFunctionURLRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	var claimed string
	h := dedupe.FunctionURL(g, nil, func(ctx context.Context, _ events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		c, _ := dedupe.ClaimFrom(ctx)
		claimed = c.Key
		return events.LambdaFunctionURLResponse{StatusCode: 200}, nil
	})
	h(context.Background(), ev)
	return claimed, ev
}

func TestProvenanceFromContext(t *testing.T) {
	lambda := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	t.Setenv("_X_AMZN_TRACE_ID", "Root=1-env")
	//lint:ignore SA1029 aws-lambda-go puts the trace header under this string key.
	runtime := context.WithValue(lambda, "x-amzn-trace-id", "Root=1-ctx")
	tests := []struct {
		name          string
		ctx           context.Context
		wantID, trace string
	}{
		{"outside Lambda", context.Background(), "", ""},
		{"Lambda, trace from the environment", lambda, "req-1", "Root=1-env"},
		{"Lambda, trace from the runtime's context", runtime, "req-1", "Root=1-ctx"},
		{"explicit", dedupe.WithTrace(dedupe.WithRequestID(runtime, "corr-9"), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
			"corr-9", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"too long is not stored", dedupe.WithTrace(lambda, string(make([]byte, dedupe.MaxTraceBytes+1))), "req-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if id, tr := dedupe.RequestIDFrom(tt.ctx), dedupe.TraceFrom(tt.ctx); id != tt.wantID || tr != tt.trace {
				t.Errorf("got %q, %q; want %q, %q", id, tr, tt.wantID, tt.trace)
			}
		})
	}
}

func TestValidRef(t *testing.T) {
	for ref, want := range map[string]bool{
		dedupe.KeyRef("x"): true, "key:0123456789ab": true, "key:0123456789AB": false,
		"key:0123456789a": false, "ref:0123456789ab": false, "": false,
	} {
		if got := dedupe.ValidRef(ref); got != want {
			t.Errorf("ValidRef(%q) = %v, want %v", ref, got, want)
		}
	}
}

// TestScopeKeySharedScope: the shared scope is principal "", which the
// key writes as "-"; a principal "-" is hashed like any other, so a
// caller who passes the "-" they see in a key gets another key.
func TestScopeKeySharedScope(t *testing.T) {
	shared := dedupe.ScopeKey("http:api/prod", "POST /payments", "", "order-42")
	if want := "http:api/prod|POST /payments|-|order-42"; shared != want {
		t.Errorf("ScopeKey with principal \"\" = %q, want %q", shared, want)
	}
	if dash := dedupe.ScopeKey("http:api/prod", "POST /payments", "-", "order-42"); dash == shared {
		t.Errorf("ScopeKey with principal \"-\" = %q, the shared scope's key", dash)
	}
}
