package dedupe_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// The behaviour table again, through pkg/dynamostore on the test endpoint
// (AWS_ENDPOINT_URL_DYNAMODB: skipped without it, failed in CI), on an
// idempotency table created from template.yaml. These tests import the AWS
// SDK; the package itself does not.

// dynamoBackend creates the template's idempotency table once per test,
// skipping t without an endpoint, and returns a backend whose stores share
// it; every scenario's guard has a prefix of its own.
func dynamoBackend(t *testing.T, opts dynamostore.Options) backend {
	t.Helper()
	client := dynamotest.Client(t)
	opts.Table = dynamotest.CreateTables(t, client, "IdempotencyTable")["IdempotencyTable"]
	return backend{"dynamostore", func(st *testing.T) (dedupe.Store, func() int) {
		s, err := dynamostore.New(client, opts)
		if err != nil {
			st.Fatal(err)
		}
		return s, nil
	}}
}

func TestHTTPBehaviourDynamoDB(t *testing.T) {
	runBehaviours(t, dynamoBackend(t, dynamostore.Options{}))
}

func TestHTTPConcurrentDuplicatesDynamoDB(t *testing.T) {
	runConcurrentDuplicates(t, dynamoBackend(t, dynamostore.Options{}))
}

// TestHTTPResultTooLargeDynamoDB needs no fault injection: the store's own
// item size limit omits the result, and the retry gets the documented 409.
func TestHTTPResultTooLargeDynamoDB(t *testing.T) {
	b := dynamoBackend(t, dynamostore.Options{MaxItemBytes: 4096, CompressAbove: -1})
	store, _ := b.new(t)
	runs := 0
	big := strings.Repeat("x", 8192)
	h := dedupe.HTTPAPI(dedupe.New(store, &dedupe.Config{Prefix: "big-" + rand.Text()}), nil,
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: big}, nil
		})
	var req events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-jwt.json", &req)
	first, err := h(context.Background(), req)
	if err != nil || first.StatusCode != 200 || first.Body != big {
		t.Fatalf("first = %d (%d bytes), %v; want the real 200", first.StatusCode, len(first.Body), err)
	}
	again, err := h(context.Background(), req)
	var p dedupe.Problem
	if err == nil {
		err = json.Unmarshal([]byte(again.Body), &p)
	}
	if err != nil || again.StatusCode != 409 || p.Type != dedupe.ProblemResultUnavailable || runs != 1 {
		t.Errorf("retry = %d %q, %v after %d runs; want a 409 %s after 1", again.StatusCode, again.Body, err, runs, dedupe.ProblemResultUnavailable)
	}
}

func TestReuseDynamoDB(t *testing.T) {
	runReuse(t, dynamoBackend(t, dynamostore.Options{}))
}

func TestLeaseRenewalDynamoDB(t *testing.T) {
	runLease(t, dynamoBackend(t, dynamostore.Options{}))
}
