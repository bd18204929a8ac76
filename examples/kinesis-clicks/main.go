// Command kinesis-clicks counts each click event once from a Kinesis
// stream (see handler.go). Set IDEMPOTENCY_TABLE, and give its Kinesis
// event source mapping FunctionResponseTypes [ReportBatchItemFailures],
// which Handler's ReportBatchItemFailures asserts.
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
		log.Fatalf("kinesis-clicks: load AWS config: %v", err)
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: os.Getenv("IDEMPOTENCY_TABLE")})
	if err != nil {
		log.Fatalf("kinesis-clicks: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	h := &Handler{Guard: dedupe.New(store, &dedupe.Config{Logger: logger}),
		Count:                   func(_ context.Context, c Click) error { logger.Info("click", "id", c.ID, "page", c.Page); return nil },
		ReportBatchItemFailures: true} // the mapping reports them: see the package doc
	lambda.Start(h.Lambda())
}
