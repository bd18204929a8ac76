// Command eventbridge-invoices issues one invoice per OrderPlaced event,
// however often EventBridge delivers it (see handler.go). Set
// IDEMPOTENCY_TABLE.
package main

import (
	"context"
	"fmt"
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
		log.Fatalf("eventbridge-invoices: load AWS config: %v", err)
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: os.Getenv("IDEMPOTENCY_TABLE")})
	if err != nil {
		log.Fatalf("eventbridge-invoices: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	h := &Handler{Guard: dedupe.New(store, &dedupe.Config{Logger: logger}), Log: logger,
		Issue: func(_ context.Context, o OrderPlaced) (string, error) { return fmt.Sprintf("inv-%s", o.OrderID), nil }}
	lambda.Start(h.Handle)
}
