// Command activity-payment is a workflow activity (a Step Functions task)
// that captures a payment once per workflow step, passing its key to the
// payment processor (see handler.go). Set IDEMPOTENCY_TABLE.
package main

import (
	"context"
	"log"
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
		log.Fatalf("activity-payment: load AWS config: %v", err)
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: os.Getenv("IDEMPOTENCY_TABLE")})
	if err != nil {
		log.Fatalf("activity-payment: %v", err)
	}
	h := &Handler{Guard: dedupe.New(store, nil), Processor: NewFakeProcessor()}
	lambda.Start(h.Handle)
}
