package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
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

// inspector is what the DynamoDB store offers beside Admin: records read
// without the response bodies it keeps in S3, whose objects it names.
type inspector interface {
	Inspect(ctx context.Context, key string, now time.Time) (dynamostore.Inspected, error)
	InspectRef(ctx context.Context, ref string, now time.Time) ([]dynamostore.Inspected, error)
}

var _ inspector = (*dynamostore.Store)(nil)

// opened is the store the flags name, as the commands use it.
type opened struct {
	store
	// name is dynamodb, redis or postgres.
	name string
	// close releases the store's connections.
	close func()
	// readObject reads the record for key again from a store that reads
	// the response bodies kept in S3 bucket (DynamoDB's LargeResults),
	// checked against the record; nil for stores that keep none.
	readObject func(ctx context.Context, key string, now time.Time, bucket string) (dedupe.Record, error)
}

// storeFlags are the flags that name a store.
type storeFlags struct {
	table, endpoint, region string
	s3Endpoint              string
	shards                  int
	keySchema               string
	redisURL, redisPrefix   string
	pgURL, pgTable          string
}

// register adds the store flags to fs.
func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.table, "table", "", "DynamoDB table (default $IDEMPOTENCY_TABLE)")
	fs.StringVar(&s.endpoint, "endpoint", "", "DynamoDB endpoint URL, for dynalite, moto or DynamoDB Local (default $AWS_ENDPOINT_URL_DYNAMODB, else AWS)")
	fs.StringVar(&s.region, "region", "", "AWS region (default from the AWS configuration)")
	fs.StringVar(&s.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL, path-style, for moto (default $AWS_ENDPOINT_URL_S3, else AWS): where show --body reads a response kept in S3")
	fs.IntVar(&s.shards, "shards", 0, "in-flight shards of the DynamoDB store (default $DEDUPE_SHARDS, else 8): as the functions use")
	fs.StringVar(&s.keySchema, "key-schema", "", "key schema of the DynamoDB table, ref (keyed by reference, tables since v0.2.0) or classic (default $DEDUPE_KEY_SCHEMA, else ref)")
	fs.StringVar(&s.redisURL, "redis", "", "Redis or Valkey URL (default $REDIS_URL when DEDUPE_STORE=redis); a Cluster's from any node, or with addr= parameters")
	fs.StringVar(&s.redisPrefix, "redis-prefix", "dedupe:", "Redis key prefix of the store (redisstore.Options.Prefix)")
	fs.StringVar(&s.pgURL, "postgres", "", "PostgreSQL URL (default $DATABASE_URL when DEDUPE_STORE=postgres)")
	fs.StringVar(&s.pgTable, "pg-table", "", "PostgreSQL table (default dedupe_records)")
}

// open opens the store the flags, else the environment, name.
func (s *storeFlags) open(ctx context.Context, env *Env) (*opened, error) {
	named := 0
	for _, v := range []string{s.table, s.redisURL, s.pgURL} {
		if v != "" {
			named++
		}
	}
	if named > 1 {
		return nil, fail(ExitUsage, "name one store: --table, --redis or --postgres")
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
			return nil, fail(ExitUsage, "no store: pass --table, --redis or --postgres (or set DEDUPE_STORE and IDEMPOTENCY_TABLE, REDIS_URL or DATABASE_URL as the functions do)")
		}
	}
	switch {
	case s.redisURL != "":
		c, err := redisClient(ctx, s.redisURL)
		if err != nil {
			return nil, err
		}
		st, err := redisstore.New(c, redisstore.Options{Prefix: s.redisPrefix})
		if err != nil {
			c.Close()
			return nil, err
		}
		return &opened{store: st, name: "redis", close: func() { c.Close() }}, nil
	case s.pgURL != "":
		pool, err := pgxpool.New(ctx, s.pgURL)
		if err != nil {
			return nil, fail(ExitUsage, "--postgres: %w", err)
		}
		st, err := pgstore.New(pool, pgstore.Options{Table: s.pgTable})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &opened{store: st, name: "postgres", close: pool.Close}, nil
	}
	var opts []func(*config.LoadOptions) error
	if s.region != "" {
		opts = append(opts, config.WithRegion(s.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
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
				return nil, fail(ExitUsage, "DEDUPE_SHARDS=%q: want a positive integer", v)
			}
		}
	}
	// The functions' stores refuse a global table in eventual
	// consistency with a DescribeTable at their cold start; the
	// command's writes are fenced conditional writes like theirs, and
	// its policy (IdempotencyOperatorPolicy) grants no DescribeTable.
	// Nor does it read the key schema: --key-schema names it. On the
	// wrong one DynamoDB refuses every call (ValidationException: the
	// provided key element does not match the schema), touching nothing.
	schema := s.keySchema
	if schema == "" {
		schema = env.Getenv("DEDUPE_KEY_SCHEMA")
	}
	var keySchema dynamostore.KeySchema
	switch schema {
	case "", "ref":
		keySchema = dynamostore.KeySchemaByRef
	case "classic":
		keySchema = dynamostore.KeySchemaClassic
	default:
		return nil, fail(ExitUsage, "--key-schema (or $DEDUPE_KEY_SCHEMA) %q: want ref or classic (template.yaml's IdempotencyTableKeySchema)", schema)
	}
	base := dynamostore.Options{Table: s.table, Shards: shards, GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: keySchema}
	ds, err := dynamostore.New(client, base)
	if err != nil {
		return nil, fail(ExitUsage, "%w", err)
	}
	s3Endpoint := s.s3Endpoint
	if s3Endpoint == "" {
		s3Endpoint = env.Getenv("AWS_ENDPOINT_URL_S3")
	}
	readObject := func(ctx context.Context, key string, now time.Time, bucket string) (dedupe.Record, error) {
		objects := s3.NewFromConfig(cfg, func(o *s3.Options) {
			if s3Endpoint != "" {
				o.BaseEndpoint, o.UsePathStyle = &s3Endpoint, true
			}
		})
		opts := base
		opts.LargeResults = dynamostore.LargeResults{Client: objects, Bucket: bucket}
		rs, err := dynamostore.New(client, opts)
		if err != nil {
			return dedupe.Record{}, err
		}
		return rs.Get(ctx, key, now)
	}
	return &opened{store: ds, name: "dynamodb", close: func() {}, readObject: readObject}, nil
}

// redisClient returns the client of the Redis or Valkey deployment url
// names: a *redis.ClusterClient for a cluster URL (redis.ParseClusterURL:
// addr= parameters), or for the URL of one node whose INFO cluster says
// cluster_enabled:1, so that every command reaches every node (through a
// client of one node, a ref in another slot would fail and inflight
// would see that node only); else a *redis.Client.
func redisClient(ctx context.Context, url string) (interface {
	redisstore.Client
	Close() error
}, error) {
	cluster := func() (*redis.ClusterClient, error) {
		opts, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, fail(ExitUsage, "--redis: %w", err)
		}
		return redis.NewClusterClient(opts), nil
	}
	if u, err := neturl.Parse(url); err == nil && u.Query().Has("addr") {
		return cluster()
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fail(ExitUsage, "--redis: %w", err)
	}
	c := redis.NewClient(opts)
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// A node that refuses INFO is taken as it is; redisstore.New then
	// reads its eviction policy, and reports a server it cannot reach.
	if info, err := c.Info(ictx, "cluster").Result(); err == nil && strings.Contains(info, "cluster_enabled:1") {
		c.Close()
		return cluster()
	}
	return c, nil
}

// wrongKeySchema reports whether err is DynamoDB refusing a request whose
// key does not have the table's shape (a ValidationException about the
// key schema), what every call and Query answers when --key-schema names the other
// schema than the table's.
func wrongKeySchema(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	// DynamoDB and dynalite: "The provided key element does not match the
	// schema" (GetItem, UpdateItem), "Query condition missed key schema
	// element: pk", and on a table keyed by reference read as classic,
	// "The table does not have the specified index: ref"; moto answers
	// that last one with ResourceNotFoundException "Invalid index".
	m := strings.ToLower(api.ErrorMessage())
	switch api.ErrorCode() {
	case "ValidationException":
		return strings.Contains(m, "key element") || strings.Contains(m, "key schema") || strings.Contains(m, "specified index")
	case "ResourceNotFoundException":
		return strings.Contains(m, "invalid index")
	}
	return false
}
