package main

import (
	"context"
	"log"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

func main() {
	s, err := loadSettings(os.Getenv)
	if err != nil {
		log.Fatalf("reaper: %v", err)
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatalf("reaper: load AWS config: %v", err)
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: s.Table, Shards: s.Shards})
	if err != nil {
		log.Fatalf("reaper: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: s.Level}))
	lambda.Start(newHandler(store, s, logger, os.Stdout, lambdacontext.FunctionName).Handle)
}
