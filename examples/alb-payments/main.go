// Command alb-payments is a payments function behind an Application Load
// Balancer whose HTTPS listener authenticates users with Amazon Cognito
// (template.yaml). Set IDEMPOTENCY_TABLE and LOAD_BALANCER_ARN.
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
		log.Fatalf("alb-payments: load AWS config: %v", err)
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: os.Getenv("IDEMPOTENCY_TABLE")})
	if err != nil {
		log.Fatalf("alb-payments: %v", err)
	}
	g := dedupe.New(store, &dedupe.Config{Logger: slog.New(slog.NewJSONHandler(os.Stdout, nil))})
	lambda.Start(Handler(g, &dedupe.ALBAuth{LoadBalancerARN: os.Getenv("LOAD_BALANCER_ARN")}))
}
