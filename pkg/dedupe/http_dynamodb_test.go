package dedupe_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// The behaviour table again, through pkg/dynamostore on the test endpoint
// (AWS_ENDPOINT_URL_DYNAMODB: skipped without it, failed in CI), on an
// idempotency table created from template.yaml. These tests import the AWS
// SDK; the package itself does not.

// dynamoTable creates the template's idempotency table once per test and
// returns a client and its name.
func dynamoTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(dynalite.Endpoint(t)),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "x", Source: "test"}, nil
		}),
	})
	name := "dedupe-http-" + strings.ToLower(rand.Text()[:10])
	path, err := infra.FindTemplate()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := infra.LoadWithOptions(path, &infra.Options{Names: map[string]string{"IdempotencyTable": name}})
	if err != nil {
		t.Fatal(err)
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tables, func(tb infra.Table) bool { return tb.LogicalID == "IdempotencyTable" })
	if i < 0 {
		t.Fatalf("template %s declares no IdempotencyTable", path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := infra.EnsureTables(ctx, client, tables[i:i+1]); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return client, name
}

// dynamoBackend creates a table, skipping t without an endpoint, and
// returns a backend whose stores share it; every scenario's guard has a
// prefix of its own.
func dynamoBackend(t *testing.T, opts dynamostore.Options) backend {
	client, table := dynamoTable(t)
	opts.Table = table
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
