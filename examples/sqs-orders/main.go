// Command sqs-orders is an SQS consumer that ships each order once, keyed
// by the order ID in the message body (see handler.go). Set
// IDEMPOTENCY_TABLE, and give its SQS event source mapping
// FunctionResponseTypes [ReportBatchItemFailures], which Handler's
// ReportBatchItemFailures asserts (in SAM, on the function's SQS event:
// FunctionResponseTypes: [ReportBatchItemFailures]).
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
		log.Fatalf("sqs-orders: load AWS config: %v", err)
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: os.Getenv("IDEMPOTENCY_TABLE")})
	if err != nil {
		log.Fatalf("sqs-orders: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	h := &Handler{Guard: dedupe.New(store, &dedupe.Config{Logger: logger}), Ship: logShipment(logger),
		ReportBatchItemFailures: true} // the mapping reports them: see the package doc
	lambda.Start(h.Lambda())
}

// logShipment stands in for the real shipping call.
func logShipment(l *slog.Logger) func(context.Context, Order) error {
	return func(_ context.Context, o Order) error {
		l.Info("shipping", "order", o.ID, "items", len(o.Items))
		return nil
	}
}
