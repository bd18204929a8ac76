package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/examples/internal/exampletest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

func request(t *testing.T, method, path, key string) events.APIGatewayProxyRequest {
	b, err := os.ReadFile("testdata/proxy-post.json")
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayProxyRequest
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	req.HTTPMethod, req.Path = method, path
	req.PathParameters = map[string]string{"proxy": path[1:]}
	if key != "" {
		req.Headers["Idempotency-Key"] = key
		req.MultiValueHeaders["Idempotency-Key"] = []string{key}
	}
	return req
}

func TestHandler(t *testing.T) {
	exampletest.ForEachStore(t, func(t *testing.T, store dedupe.Store) {
		h := Handler(dedupe.New(store, &dedupe.Config{Prefix: "rest-proxy-" + rand.Text()}))
		ctx := context.Background()
		tests := []struct {
			name, method, path, key string
			wantStatus              int
			wantBody                string
			wantReplay              bool
		}{
			{"first order", "POST", "/orders", "k-1", 201, `{"order":"o-1"}`, false},
			{"retried order replays", "POST", "/orders", "k-1", 201, `{"order":"o-1"}`, true},
			{"same key on another path is another scope", "POST", "/refunds", "k-1", 201, `{"refund":"r-2"}`, false},
			{"a key is required on /orders", "POST", "/orders", "", 400, "", false},
			{"GET passes through", "GET", "/health", "", 200, `{"ok":true}`, false},
		}
		for _, tt := range tests {
			resp, err := h(ctx, request(t, tt.method, tt.path, tt.key))
			replayed := resp.Headers[dedupe.HeaderReplayed] == "true"
			if err != nil || resp.StatusCode != tt.wantStatus || (tt.wantBody != "" && resp.Body != tt.wantBody) || replayed != tt.wantReplay {
				t.Errorf("%s: %d %s (replayed %v), %v; want %d %s (replayed %v)", tt.name, resp.StatusCode, resp.Body, replayed, err, tt.wantStatus, tt.wantBody, tt.wantReplay)
			}
		}
	})
}
