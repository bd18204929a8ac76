package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// Responses too large for an item go to S3 and replay byte for byte; the
// store refuses, at construction, a global table whose claims two Regions
// could both win.
func ExampleLargeResults() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fmt.Println("load AWS config:", err)
		return
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{
		Table: os.Getenv("IDEMPOTENCY_TABLE"),
		LargeResults: dynamostore.LargeResults{
			Client: s3.NewFromConfig(cfg),
			Bucket: os.Getenv("LARGE_RESPONSE_BUCKET"),
		},
	})
	if errors.Is(err, dynamostore.ErrInvalidOptions) {
		fmt.Println("refused:", err) // e.g. an MREC global table, or a bucket without a client
		return
	}
	_ = store
}

// Lean: no in-flight index entry, 2 write units per fresh request instead
// of 4, for a deployment without the reaper.
func ExampleOptions_lean() {
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	_, err := dynamostore.New(client, dynamostore.Options{
		Table:        "idempotency",
		Lean:         true,
		Shards:       8, // meaningless without the index: refused
		GlobalTables: dynamostore.GlobalTablesUnchecked,
	})
	fmt.Println(errors.Is(err, dynamostore.ErrInvalidOptions))
	// Output: true
}
