package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// store is an opened store: the guard's contract and the operator's.
type store interface {
	dedupe.Store
	dedupe.Admin
}

// storeFlags are the flags that name a store.
type storeFlags struct {
	table, endpoint, region string
	shards                  int
	redisURL, redisPrefix   string
	pgURL, pgTable          string
}

// register adds the store flags to fs.
func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.table, "table", "", "DynamoDB table (default $IDEMPOTENCY_TABLE)")
	fs.StringVar(&s.endpoint, "endpoint", "", "DynamoDB endpoint URL, for dynalite, moto or DynamoDB Local (default $AWS_ENDPOINT_URL_DYNAMODB, else AWS)")
	fs.StringVar(&s.region, "region", "", "AWS region (default from the AWS configuration)")
	fs.IntVar(&s.shards, "shards", 0, "in-flight shards of the DynamoDB store (default $DEDUPE_SHARDS, else 8): as the functions use")
	fs.StringVar(&s.redisURL, "redis", "", "Redis or Valkey URL (default $REDIS_URL when DEDUPE_STORE=redis)")
	fs.StringVar(&s.redisPrefix, "redis-prefix", "dedupe:", "Redis key prefix of the store (redisstore.Options.Prefix)")
	fs.StringVar(&s.pgURL, "postgres", "", "PostgreSQL URL (default $DATABASE_URL when DEDUPE_STORE=postgres)")
	fs.StringVar(&s.pgTable, "pg-table", "", "PostgreSQL table (default dedupe_records)")
}

// open opens the store the flags, else the environment, name; close
// releases its connections.
func (s *storeFlags) open(ctx context.Context, env *Env) (st store, name string, close func(), err error) {
	named := 0
	for _, v := range []string{s.table, s.redisURL, s.pgURL} {
		if v != "" {
			named++
		}
	}
	if named > 1 {
		return nil, "", nil, fail(ExitUsage, "name one store: --table, --redis or --postgres")
	}
	if named == 0 {
		switch env.Getenv("DEDUPE_STORE") {
		case "redis":
			s.redisURL = env.Getenv("REDIS_URL")
		case "postgres":
			s.pgURL = env.Getenv("DATABASE_URL")
		case "", "dynamodb":
			s.table = env.Getenv("IDEMPOTENCY_TABLE")
		}
		if s.table == "" && s.redisURL == "" && s.pgURL == "" {
			return nil, "", nil, fail(ExitUsage, "no store: pass --table, --redis or --postgres (or set DEDUPE_STORE and IDEMPOTENCY_TABLE, REDIS_URL or DATABASE_URL as the functions do)")
		}
	}
	switch {
	case s.redisURL != "":
		opts, err := redis.ParseURL(s.redisURL)
		if err != nil {
			return nil, "", nil, fail(ExitUsage, "--redis: %w", err)
		}
		c := redis.NewClient(opts)
		st, err := redisstore.New(c, redisstore.Options{Prefix: s.redisPrefix})
		if err != nil {
			c.Close()
			return nil, "", nil, err
		}
		return st, "redis", func() { c.Close() }, nil
	case s.pgURL != "":
		pool, err := pgxpool.New(ctx, s.pgURL)
		if err != nil {
			return nil, "", nil, fail(ExitUsage, "--postgres: %w", err)
		}
		st, err := pgstore.New(pool, pgstore.Options{Table: s.pgTable})
		if err != nil {
			pool.Close()
			return nil, "", nil, err
		}
		return st, "postgres", pool.Close, nil
	}
	var opts []func(*config.LoadOptions) error
	if s.region != "" {
		opts = append(opts, config.WithRegion(s.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, "", nil, fmt.Errorf("load AWS config: %w", err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if s.endpoint != "" {
			o.BaseEndpoint = &s.endpoint
		}
	})
	shards := s.shards
	if shards == 0 {
		if v := env.Getenv("DEDUPE_SHARDS"); v != "" {
			if _, err := fmt.Sscan(v, &shards); err != nil || shards <= 0 {
				return nil, "", nil, fail(ExitUsage, "DEDUPE_SHARDS=%q: want a positive integer", v)
			}
		}
	}
	ds, err := dynamostore.New(client, dynamostore.Options{Table: s.table, Shards: shards})
	if err != nil {
		return nil, "", nil, fail(ExitUsage, "%w", err)
	}
	return ds, "dynamodb", func() {}, nil
}
