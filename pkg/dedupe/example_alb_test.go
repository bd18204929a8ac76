package dedupe_test

import (
	"context"
	"crypto/ecdsa"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// Wrap the handler of an ALB target group whose listener authenticates
// users: the caller is the user the load balancer signed for, verified,
// and a forged token is refused before anything runs.
func ExampleALB() {
	charges := 0
	createPayment := func(ctx context.Context, req events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		charges++
		return events.ALBTargetGroupResponse{
			StatusCode:        201,
			StatusDescription: "201 Created",
			Headers:           map[string]string{"Content-Type": "application/json"},
			Body:              fmt.Sprintf(`{"id":"pay_%d"}`, charges),
		}, nil
	}

	g := dedupe.New(memstore.New(), nil)
	handler := dedupe.ALB(g, &dedupe.HTTPConfig{
		ALBAuth: &dedupe.ALBAuth{
			LoadBalancerARN: "arn:aws:elasticloadbalancing:us-east-2:123456789012:loadbalancer/app/payments/50dc6c495c0c9188",
			// Nil fetches the keys from ALB's regional endpoint. Here
			// the tokens are signed with a test key (userToken, in
			// alb_test.go), which this returns.
			PublicKey: func(_ context.Context, kid string) (*ecdsa.PublicKey, error) {
				if kid != testALBKid {
					return nil, nil
				}
				return &testALBKey().PublicKey, nil
			},
		},
	}, createPayment)
	// lambda.Start(handler)

	req := events.ALBTargetGroupRequest{
		HTTPMethod: "POST",
		Path:       "/payments",
		Headers: map[string]string{
			"idempotency-key":  "order-42",
			"x-amzn-oidc-data": userToken("alice"), // as the load balancer signs it
		},
		Body: `{"amount":1250,"currency":"EUR"}`,
		RequestContext: events.ALBTargetGroupRequestContext{ELB: events.ELBContext{
			TargetGroupArn: "arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/payments/6d0ecf831eec9f09",
		}},
	}
	first, _ := handler(context.Background(), req)
	retry, _ := handler(context.Background(), req)
	fmt.Println(first.StatusCode, first.Body)
	fmt.Println(retry.StatusCode, retry.Body, "replayed:", retry.Headers["Idempotent-Replayed"])

	req.Headers["x-amzn-oidc-data"] = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJtYWxsb3J5In0." // alg none
	forged, _ := handler(context.Background(), req)
	fmt.Println(forged.StatusDescription, "charges:", charges)
	// Output:
	// 201 {"id":"pay_1"}
	// 201 {"id":"pay_1"} replayed: true
	// 401 Unauthorized charges: 1
}
