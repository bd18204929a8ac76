package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Handler returns the API's handler: one Lambda behind ANY /{proxy+},
// routing on the path itself.
//
// RESTAPI resolves a greedy resource to the actual method and path, so
// "POST /orders" and "POST /refunds" are separate scopes, even though API
// Gateway reports the same resource for both, and RequireKeyOn names them
// as clients call them. An ANY resource carries the actual method, so GET
// passes through unguarded. Orders are replayed for a day, refunds for a
// week (HTTPConfig.Retention).
func Handler(g *dedupe.Guard) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	var seq atomic.Int64
	cfg := &dedupe.HTTPConfig{
		RequireKey: dedupe.RequireKeyOn("POST /orders", "POST /refunds"),
		Retention: func(route string) time.Duration {
			if route == "POST /refunds" {
				return 7 * 24 * time.Hour
			}
			return 0 // the guard's
		},
	}
	return dedupe.RESTAPI(g, cfg, func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		switch req.HTTPMethod + " " + req.Path {
		case "POST /orders":
			return jsonResponse(http.StatusCreated, fmt.Sprintf(`{"order":"o-%d"}`, seq.Add(1))), nil
		case "POST /refunds":
			return jsonResponse(http.StatusCreated, fmt.Sprintf(`{"refund":"r-%d"}`, seq.Add(1))), nil
		case "GET /health":
			return jsonResponse(http.StatusOK, `{"ok":true}`), nil
		}
		return jsonResponse(http.StatusNotFound, `{"error":"no such route"}`), nil
	})
}

func jsonResponse(status int, body string) events.APIGatewayProxyResponse {
	return events.APIGatewayProxyResponse{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: body}
}
