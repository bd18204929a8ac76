package dedupe_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// The ALB benchmarks measure the adapter's overhead as the HTTP ones do,
// with the identity rule as the only difference: verified user claims
// (ALBAuth: one ES256 verification per guarded request, the key cached)
// against SharedScope (no identity at all).

func benchALB(b *testing.B, cfg *dedupe.HTTPConfig) (func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), events.ALBTargetGroupRequest) {
	var req events.ALBTargetGroupRequest
	fixture(b, "alb-target-group.json", &req)
	req.Headers["x-amzn-oidc-data"] = userToken("alice")
	resp := events.ALBTargetGroupResponse{
		StatusCode: 201, StatusDescription: "201 Created",
		Headers: map[string]string{"Content-Type": "application/json", "Location": "/payments/pay_1"},
		Body:    `{"id":"pay_1","amount":1250,"currency":"EUR","source":"tok_visa","status":"succeeded"}`,
	}
	h := dedupe.ALB(dedupe.New(memstore.New(), nil), cfg, func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		return resp, nil
	})
	return h, req
}

func benchALBReplay(b *testing.B, cfg *dedupe.HTTPConfig) {
	h, req := benchALB(b, cfg)
	ctx := context.Background()
	h(ctx, req)
	b.ReportAllocs()
	for b.Loop() {
		if r, _ := h(ctx, req); r.Headers[dedupe.HeaderReplayed] != "true" {
			b.Fatalf("not a replay: %d", r.StatusCode)
		}
	}
}

func BenchmarkALBReplayVerified(b *testing.B) {
	benchALBReplay(b, &dedupe.HTTPConfig{ALBAuth: testALBAuth()})
}

func BenchmarkALBReplayShared(b *testing.B) {
	benchALBReplay(b, &dedupe.HTTPConfig{SharedScope: true, Logger: discardLogger()})
}
