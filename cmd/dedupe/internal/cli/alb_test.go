package cli_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/cmd/dedupe/internal/cli"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestKeyOfALBEvent: key --event recognizes an ALB event (which also
// has an httpMethod, as REST API events do) and prints the key the ALB
// adapter claims, with --shared, and with --alb-auth from the signed
// user claims.
func TestKeyOfALBEvent(t *testing.T) {
	const prefix = "payments-fn"
	const lb = "arn:aws:elasticloadbalancing:us-east-2:123456789012:loadbalancer/app/payments/50dc6c495c0c9188"
	raw, err := os.ReadFile("testdata/alb-order-42.json")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signed := func() []byte {
		var ev map[string]any
		json.Unmarshal(raw, &ev)
		enc := func(v any) string { b, _ := json.Marshal(v); return base64.URLEncoding.EncodeToString(b) }
		input := enc(map[string]any{"alg": "ES256", "kid": "k1", "signer": lb, "iss": "https://idp.example.com", "exp": 4102444800}) +
			"." + enc(map[string]any{"sub": "alice"})
		sum := sha256.Sum256([]byte(input))
		r, s, _ := ecdsa.Sign(rand.Reader, key, sum[:])
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		ev["multiValueHeaders"].(map[string]any)["x-amzn-oidc-data"] = []string{input + "." + base64.URLEncoding.EncodeToString(sig)}
		b, _ := json.Marshal(ev)
		return b
	}()
	authPath := filepath.Join(t.TempDir(), "alb-auth.json")
	if err := os.WriteFile(authPath, signed, 0o600); err != nil {
		t.Fatal(err)
	}
	claimed := func(cfg *dedupe.HTTPConfig, data []byte) string {
		var ev events.ALBTargetGroupRequest
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		var got string
		g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: prefix})
		h := dedupe.ALB(g, cfg, func(ctx context.Context, _ events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			c, _ := dedupe.ClaimFrom(ctx)
			got = c.Key
			return events.ALBTargetGroupResponse{StatusCode: 201}, nil
		})
		if resp, _ := h(context.Background(), ev); resp.StatusCode != 201 {
			t.Fatalf("the adapter answered %d", resp.StatusCode)
		}
		return got
	}
	auth := &dedupe.HTTPConfig{ALBAuth: &dedupe.ALBAuth{LoadBalancerARN: lb, PublicKey: func(context.Context, string) (*ecdsa.PublicKey, error) {
		return &key.PublicKey, nil
	}}}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"shared", []string{"--event", "testdata/alb-order-42.json", "--shared"}, claimed(&dedupe.HTTPConfig{SharedScope: true}, raw)},
		{"shared, type given", []string{"--event", "testdata/alb-order-42.json", "--event-type", "alb", "--shared"}, claimed(&dedupe.HTTPConfig{SharedScope: true}, raw)},
		{"alb-auth", []string{"--event", authPath, "--alb-auth", lb}, claimed(auth, signed)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, "", append([]string{"key", "--prefix", prefix, "-o", "json"}, tc.args...)...)
			if code != cli.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got struct{ StoredKey, API, Route, ClientKey string }
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got.StoredKey != tc.want || got.API != "alb:arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/payments/6d0ecf831eec9f09" ||
				got.Route != "POST /payments" || got.ClientKey != "order-42" {
				t.Errorf("key = %+v, want stored key %q", got, tc.want)
			}
		})
	}
	// No identity rule is no key; --alb-auth on another event is a usage
	// error.
	if code, _, _ := run(t, "", "key", "--prefix", prefix, "--event", "testdata/alb-order-42.json"); code != cli.ExitError {
		t.Errorf("ALB event without --shared or --alb-auth: exit %d, want %d", code, cli.ExitError)
	}
	if code, _, _ := run(t, "", "key", "--prefix", prefix, "--event", "testdata/order-42.json", "--alb-auth", lb); code != cli.ExitUsage {
		t.Errorf("--alb-auth on an HTTP API event: exit %d, want %d", code, cli.ExitUsage)
	}
}
