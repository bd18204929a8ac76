// Command container is a net/http server for a container (ECS, App
// Runner, or Lambda behind the Lambda Web Adapter) guarded by
// dedupe.Middleware, with short leases renewed while a request runs (see
// handler.go). Set IDEMPOTENCY_TABLE; PORT defaults to 8080.
package main

import (
	"context"
	"log"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatalf("container: load AWS config: %v", err)
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: os.Getenv("IDEMPOTENCY_TABLE")})
	if err != nil {
		log.Fatalf("container: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	// No invocation deadline here: a 30 s lease, renewed every 10 s while
	// a request runs, frees a crashed request's key within 30 s.
	g := dedupe.New(store, &dedupe.Config{Prefix: "jobs-api", DefaultLease: 30 * time.Second, Heartbeat: 10 * time.Second, Logger: logger})
	addr := ":" + os.Getenv("PORT")
	if addr == ":" {
		addr = ":8080"
	}
	log.Fatal(http.ListenAndServe(addr, NewServer(g, logger)))
}
