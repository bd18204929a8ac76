package dedupetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// The ALB adapter in CheckConfigs: the jwt and cognito principal sources
// are a listener that authenticates (HTTPConfig.ALBAuth, user claims
// signed with a key of the request's own), func is HTTPConfig.Principal,
// and iam and lambda-id are x-amzn-oidc-* headers a client forged, which
// must never identify anyone.

// albLoadBalancer is the load balancer that signs the user claims.
const albLoadBalancer = "arn:aws:elasticloadbalancing:eu-west-1:111122223333:loadbalancer/app/orders/0123456789abcdef"

// albRuleSet sets cfg's identity rule for ALB as the history drew it, and
// reports whether it has one, with how the load balancer signs a user's
// claims (nil without ALBAuth); without one, it checks that ALB refuses
// the configuration at construction.
func (h *configHistory) albRuleSet(cfg *dedupe.HTTPConfig, svc *configService) (func(sub string) string, bool) {
	var sign func(string) string
	if h.principal == "jwt" || h.principal == "cognito" {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			h.violate("generate a key: %v", err)
			return nil, false
		}
		cfg.ALBAuth = &dedupe.ALBAuth{LoadBalancerARN: albLoadBalancer, PublicKey: func(_ context.Context, kid string) (*ecdsa.PublicKey, error) {
			if kid == "k1" {
				return &key.PublicKey, nil
			}
			return nil, nil
		}}
		sign = func(sub string) string { return albClaims(key, sub, h.now().Add(time.Hour)) }
	}
	if cfg.ALBAuth == nil && cfg.Principal == nil && !cfg.SharedScope {
		defer func() {
			if r := recover(); r == nil {
				h.violate("ALB without ALBAuth, Principal or SharedScope was accepted")
			}
		}()
		dedupe.ALB(svc.guard, cfg, nil)
		return nil, false
	}
	return sign, true
}

// sendALB sends r as an ALB target group request (single-value headers)
// and returns the answer.
func (h *configHistory) sendALB(r request, id string, svc *configService, cfg *dedupe.HTTPConfig, headers map[string]string, body string, sign func(string) string) (int, string, bool) {
	ev := events.ALBTargetGroupRequest{HTTPMethod: "POST", Path: "/orders", Headers: maps.Clone(headers), Body: body,
		RequestContext: events.ALBTargetGroupRequestContext{ELB: events.ELBContext{
			TargetGroupArn: "arn:aws:elasticloadbalancing:eu-west-1:111122223333:targetgroup/" + r.stage + "/0123456789abcdef"}}}
	switch h.principal {
	case "jwt", "cognito":
		ev.Headers["x-amzn-oidc-data"] = sign(r.tenant)
		ev.Headers["x-amzn-oidc-identity"] = r.tenant
	case "iam", "lambda-id":
		forger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		ev.Headers["x-amzn-oidc-data"] = albClaims(forger, r.tenant, h.now().Add(time.Hour))
		ev.Headers["x-amzn-oidc-identity"] = r.tenant
	}
	resp, err := dedupe.ALB(svc.guard, cfg, func(ctx context.Context, _ events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		return events.ALBTargetGroupResponse{StatusCode: 201, StatusDescription: "201 Created", Body: h.charge(ctx, id, r.variant)}, nil
	})(context.Background(), ev)
	if err != nil {
		h.violate("%s: ALB error %v", id, err)
	}
	return resp.StatusCode, resp.Body, resp.Headers[dedupe.HeaderReplayed] == "true"
}

// albClaims is x-amzn-oidc-data for user sub as albLoadBalancer signs it
// with key: ES256, base64url parts with their padding.
func albClaims(key *ecdsa.PrivateKey, sub string, exp time.Time) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.URLEncoding.EncodeToString(b)
	}
	input := enc(map[string]any{"alg": "ES256", "kid": "k1", "signer": albLoadBalancer, "iss": "https://idp", "exp": exp.Unix()}) +
		"." + enc(map[string]any{"sub": sub})
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		return ""
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + base64.URLEncoding.EncodeToString(sig)
}
