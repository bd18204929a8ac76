package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// newStore builds the idempotency store s.Store names, once per cold
// start: DynamoDB through db, or a Redis client or PostgreSQL pool of its
// own. For postgres it creates the table if it is missing (one
// idempotent statement); production deployments would apply
// pgstore.Migration with their migrations instead.
//
// objects is the S3 client for s.LargeResponseBucket; nil when it is empty.
func newStore(ctx context.Context, s settings, db *dynamodb.Client, objects dynamostore.S3Client) (dedupe.Store, error) {
	switch s.Store {
	case storeRedis:
		opts, err := redis.ParseURL(s.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		return redisstore.New(redis.NewClient(opts), redisstore.Options{Prefix: "dedupe:", RefIndex: true})
	case storePostgres:
		pool, err := pgxpool.New(ctx, s.DatabaseURL)
		if err != nil {
			return nil, fmt.Errorf("DATABASE_URL: %w", err)
		}
		if err := pgstore.CreateSchema(ctx, pool, ""); err != nil {
			pool.Close()
			return nil, err
		}
		return pgstore.New(pool, pgstore.Options{})
	default:
		opts := dynamostore.Options{Table: s.IdempotencyTable}
		if s.LargeResponseBucket != "" {
			opts.LargeResults = dynamostore.LargeResults{Client: objects, Bucket: s.LargeResponseBucket}
		}
		return dynamostore.New(db, opts)
	}
}
