package dynamostore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// The wiring of a Lambda function: build the SDK client once at init
// (config.LoadDefaultConfig honours AWS_ENDPOINT_URL_DYNAMODB for local
// runs), the store over it, and a guard over the store; then guard the
// side effect in the handler.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Println("load AWS config:", err)
		return
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{
		Table: os.Getenv("IDEMPOTENCY_TABLE"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	guard := dedupe.New(store, nil)

	// In the handler: the key comes from the request (an Idempotency-Key
	// header, an SQS message id), the fingerprint from its content.
	out, err := guard.Do(ctx, dedupe.Call{Key: "payment-42", Fingerprint: "sha256-of-the-request"}, func(ctx context.Context) (dedupe.Result, error) {
		// Charge the card here: it runs once per key.
		return dedupe.Result{StatusCode: 201, Body: []byte(`{"id":"pay_42"}`)}, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Result.StatusCode, out.Replayed)
}

// Reap clears in-flight records whose invocation died; run it on a
// schedule (functions/reaper does) with a deadline.
func ExampleStore_Reap() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Println("load AWS config:", err)
		return
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{
		Table: os.Getenv("IDEMPOTENCY_TABLE"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	report, err := store.Reap(ctx, dynamostore.ReapOptions{
		Grace:  30 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(os.Stdout, nil)),
	})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Printf("found %d, cleared %d, skipped %d, truncated %v\n",
		report.Found, report.Cleared, report.Skipped, report.Truncated)
}
