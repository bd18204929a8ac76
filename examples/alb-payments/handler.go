package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Handler returns the target group's handler. The listener authenticates
// users (template.yaml), so the caller is the user the load balancer
// signed for (auth: dedupe verifies the signature before it scopes a key
// by it); a key is required on POST /payments. The target group sends
// multi-value headers, and dedupe answers in the same form.
func Handler(g *dedupe.Guard, auth *dedupe.ALBAuth) func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
	var seq atomic.Int64
	cfg := &dedupe.HTTPConfig{
		ALBAuth:    auth,
		RequireKey: dedupe.RequireKeyOn("POST /payments"),
	}
	return dedupe.ALB(g, cfg, func(ctx context.Context, req events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		switch req.HTTPMethod + " " + req.Path {
		case "POST /payments":
			return response(http.StatusCreated, fmt.Sprintf(`{"payment":"pay-%d"}`, seq.Add(1))), nil
		case "GET /health":
			return response(http.StatusOK, `{"ok":true}`), nil
		}
		return response(http.StatusNotFound, `{"error":"no such route"}`), nil
	})
}

// response is a JSON answer in the multi-value form the target group
// uses (lambda.multi_value_headers.enabled in template.yaml).
func response(status int, body string) events.ALBTargetGroupResponse {
	return events.ALBTargetGroupResponse{
		StatusCode:        status,
		StatusDescription: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}},
		Body:              body,
	}
}
