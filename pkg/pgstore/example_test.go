package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// The wiring of a Lambda function on PostgreSQL (RDS, Aurora, or behind
// RDS Proxy or PgBouncer): build the pool once at init, the store over it,
// and a guard over the store; then guard the side effect in the handler.
func Example() {
	ctx := context.Background()
	// Behind a transaction pooler, add default_query_exec_mode=exec to the
	// URL (or set Options.ExecMode).
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	// Once, at deploy time, or through your migrations (pgstore.Migration).
	if err := pgstore.CreateSchema(ctx, pool, ""); err != nil {
		fmt.Println(err)
		return
	}
	store, err := pgstore.New(pool, pgstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	guard := dedupe.New(store, nil)

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

// Reap deletes expired rows and retires stranded ones; run it on a
// schedule with a deadline.
func ExampleStore_Reap() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	store, err := pgstore.New(pool, pgstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	report, err := store.Reap(ctx, pgstore.ReapOptions{
		Logger: slog.New(slog.NewJSONHandler(os.Stdout, nil)),
	})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Printf("deleted %d, retired %d stranded, truncated %v\n", report.Deleted, report.Retired, report.Truncated)
}
