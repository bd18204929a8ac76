// Command rest-proxy is a REST API (API Gateway v1, Lambda proxy
// integration) behind one ANY /{proxy+} resource, guarded per path (see
// handler.go). Set IDEMPOTENCY_TABLE.
package main

import (
	"context"
	"log"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatalf("rest-proxy: load AWS config: %v", err)
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: os.Getenv("IDEMPOTENCY_TABLE")})
	if err != nil {
		log.Fatalf("rest-proxy: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	lambda.Start(Handler(dedupe.New(store, &dedupe.Config{Logger: logger})))
}
