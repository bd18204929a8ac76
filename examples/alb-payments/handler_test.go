package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"gopkg.in/yaml.v3"

	"github.com/lambda-dedupe/dedupe/examples/internal/exampletest"
	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

const loadBalancer = "arn:aws:elasticloadbalancing:us-east-2:123456789012:loadbalancer/app/alb-payments/50dc6c495c0c9188"

// signer stands in for the load balancer: it signs user claims as ALB
// does, and is the key source the handler verifies them with.
type signer struct{ key *ecdsa.PrivateKey }

func newSigner(t *testing.T) signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{k}
}

func (s signer) auth() *dedupe.ALBAuth {
	return &dedupe.ALBAuth{LoadBalancerARN: loadBalancer, PublicKey: func(_ context.Context, kid string) (*ecdsa.PublicKey, error) {
		if kid == "k1" {
			return &s.key.PublicKey, nil
		}
		return nil, nil
	}}
}

// token is the x-amzn-oidc-data ALB sends for user sub: ES256, base64url
// parts with their padding.
func (s signer) token(sub string) string {
	enc := func(v any) string { b, _ := json.Marshal(v); return base64.URLEncoding.EncodeToString(b) }
	input := enc(map[string]any{"alg": "ES256", "kid": "k1", "signer": loadBalancer, "iss": "https://cognito-idp.us-east-2.amazonaws.com/us-east-2_example",
		"exp": time.Now().Add(time.Minute).Unix()}) + "." + enc(map[string]any{"sub": sub})
	sum := sha256.Sum256([]byte(input))
	r, sig, _ := ecdsa.Sign(rand.Reader, s.key, sum[:])
	raw := make([]byte, 64)
	r.FillBytes(raw[:32])
	sig.FillBytes(raw[32:])
	return input + "." + base64.URLEncoding.EncodeToString(raw)
}

func request(t *testing.T, method, path, user string, keys ...string) events.ALBTargetGroupRequest {
	b, err := os.ReadFile("testdata/alb-post.json")
	if err != nil {
		t.Fatal(err)
	}
	var req events.ALBTargetGroupRequest
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	req.HTTPMethod, req.Path = method, path
	if len(keys) > 0 {
		req.MultiValueHeaders["idempotency-key"] = keys
	}
	if user != "" {
		req.MultiValueHeaders["x-amzn-oidc-data"] = []string{user}
	}
	return req
}

func TestHandler(t *testing.T) {
	exampletest.ForEachStore(t, func(t *testing.T, store dedupe.Store) {
		s := newSigner(t)
		h := Handler(dedupe.New(store, &dedupe.Config{Prefix: "alb-payments-" + rand.Text()}), s.auth())
		alice, bob := s.token("alice"), s.token("bob")
		forged := newSigner(t).token("alice")
		tests := []struct {
			name       string
			req        events.ALBTargetGroupRequest
			wantStatus int
			wantBody   string
			wantReplay bool
		}{
			{"first payment", request(t, "POST", "/payments", alice, "k-1"), 201, `{"payment":"pay-1"}`, false},
			{"retried payment replays", request(t, "POST", "/payments", alice, "k-1"), 201, `{"payment":"pay-1"}`, true},
			{"another user's key is another scope", request(t, "POST", "/payments", bob, "k-1"), 201, `{"payment":"pay-2"}`, false},
			{"claims signed by another key are refused", request(t, "POST", "/payments", forged, "k-1"), 401, "", false},
			{"a key is required", request(t, "POST", "/payments", alice), 400, "", false},
			{"two keys are refused", request(t, "POST", "/payments", alice, "k-1", "k-2"), 400, "", false},
			{"GET passes through", request(t, "GET", "/health", ""), 200, `{"ok":true}`, false},
		}
		for _, tt := range tests {
			resp, err := h(context.Background(), tt.req)
			replayed := len(resp.MultiValueHeaders[dedupe.HeaderReplayed]) == 1
			if err != nil || resp.StatusCode != tt.wantStatus || (tt.wantBody != "" && resp.Body != tt.wantBody) || replayed != tt.wantReplay || len(resp.Headers) > 0 {
				t.Errorf("%s: %d %s %v (replayed %v), %v; want %d %s (replayed %v), multi-value headers only",
					tt.name, resp.StatusCode, resp.Body, resp.Headers, replayed, err, tt.wantStatus, tt.wantBody, tt.wantReplay)
			}
		}
	})
}

// TestTemplate lints template.yaml with cfn-lint and dedupe's rules, and
// holds it to what Handler assumes: a Lambda target group with
// multi-value headers, the invoke permission for Elastic Load Balancing
// on it, a listener that authenticates before it forwards, and the load
// balancer's ARN in LOAD_BALANCER_ARN.
func TestTemplate(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "examples", "alb-payments", "template.yaml")
	if err := infra.Lint(t.Context(), root, path); errors.Is(err, infra.ErrToolMissing) && os.Getenv("CI") == "" {
		t.Log(err) // the structure is checked below all the same
	} else if err != nil {
		t.Error(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Resources map[string]struct {
			Type       string         `yaml:"Type"`
			DependsOn  any            `yaml:"DependsOn"`
			Properties map[string]any `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	res := func(name, typ string) map[string]any {
		r, ok := tpl.Resources[name]
		if !ok || r.Type != typ {
			t.Fatalf("resource %s: %+v, want a %s", name, r, typ)
		}
		return r.Properties
	}
	tg := res("TargetGroup", "AWS::ElasticLoadBalancingV2::TargetGroup")
	perm := res("InvokePermission", "AWS::Lambda::Permission")
	fn := res("PaymentsFunction", "AWS::Serverless::Function")
	listener := res("Listener", "AWS::ElasticLoadBalancingV2::Listener")
	multi := false
	for _, a := range tg["TargetGroupAttributes"].([]any) {
		a := a.(map[string]any)
		multi = multi || (a["Key"] == "lambda.multi_value_headers.enabled" && a["Value"] == "true")
	}
	if tg["TargetType"] != "lambda" || !multi || tpl.Resources["TargetGroup"].DependsOn != "InvokePermission" {
		t.Errorf("target group %v: want TargetType lambda, multi-value headers, DependsOn InvokePermission", tg)
	}
	if perm["Action"] != "lambda:InvokeFunction" || perm["Principal"] != "elasticloadbalancing.amazonaws.com" || perm["SourceArn"] == nil {
		t.Errorf("permission %v: want lambda:InvokeFunction for elasticloadbalancing.amazonaws.com, limited by SourceArn", perm)
	}
	env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
	if env["LOAD_BALANCER_ARN"] != "LoadBalancer" || env["IDEMPOTENCY_TABLE"] != "IdempotencyTable" {
		t.Errorf("function environment %v: want LOAD_BALANCER_ARN !Ref LoadBalancer, IDEMPOTENCY_TABLE !Ref IdempotencyTable", env)
	}
	actions := listener["DefaultActions"].([]any)
	if len(actions) != 2 || actions[0].(map[string]any)["Type"] != "authenticate-cognito" || actions[1].(map[string]any)["Type"] != "forward" ||
		listener["Protocol"] != "HTTPS" {
		t.Errorf("listener %v: want HTTPS, authenticate-cognito, then forward", listener)
	}
}
