package redisstore_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// The wiring of a Lambda function on Redis or Valkey (ElastiCache, for
// example): build the client once at init, the store over it, and a
// guard over the store; then guard the side effect in the handler.
func Example() {
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL")) // redis://host:6379/0, rediss:// for TLS
	if err != nil {
		fmt.Println(err)
		return
	}
	client := redis.NewClient(opts) // or redis.NewClusterClient for cluster mode
	store, err := redisstore.New(client, redisstore.Options{Prefix: "dedupe:"})
	if err != nil {
		fmt.Println(err)
		return
	}
	guard := dedupe.New(store, nil)

	out, err := guard.Do(context.Background(), dedupe.Call{Key: "payment-42", Fingerprint: "sha256-of-the-request"}, func(ctx context.Context) (dedupe.Result, error) {
		// Charge the card here: it runs once per key.
		return dedupe.Result{StatusCode: 201, Body: []byte(`{"id":"pay_42"}`)}, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Result.StatusCode, out.Replayed)
}
