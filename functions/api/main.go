package main

import (
	"context"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lambda-dedupe/dedupe/functions/api/internal/payments"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// duplicateWait is how long a duplicate of a request in flight waits for
// its result (Config.Wait) before it gets 409: docs/getting-started.md
// says what it means for tok_slow.
const duplicateWait = 2 * time.Second

func main() {
	s, err := loadSettings(os.Getenv)
	if err != nil {
		log.Fatalf("api: %v", err)
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatalf("api: load AWS config: %v", err)
	}
	db := dynamodb.NewFromConfig(cfg)
	store, err := newStore(context.Background(), s, db, s3.NewFromConfig(cfg))
	if err != nil {
		log.Fatalf("api: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: s.Level}))
	api, err := payments.New(payments.Config{Repository: payments.NewDynamoRepository(db, s.PaymentsTable), Logger: logger})
	if err != nil {
		log.Fatalf("api: %v", err)
	}
	lambda.Start(api.Handler(dedupe.New(store, &dedupe.Config{
		Retention: s.Retention, Logger: logger,
		Metrics: &dedupe.EMF{W: os.Stdout}, Wait: duplicateWait, Cache: dedupe.NewCache(0, 0),
	})))
}
