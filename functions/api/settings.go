package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// The idempotency stores DEDUPE_STORE selects.
const (
	storeDynamoDB = "dynamodb"
	storePostgres = "postgres"
	storeRedis    = "redis"
)

// settings is the function's configuration.
type settings struct {
	// Store is DEDUPE_STORE: dynamodb (the default), redis or postgres.
	Store string
	// IdempotencyTable is IDEMPOTENCY_TABLE (required for dynamodb).
	IdempotencyTable string
	// RedisURL is REDIS_URL (required for redis), as redis.ParseURL
	// reads it.
	RedisURL string
	// DatabaseURL is DATABASE_URL (required for postgres), as
	// pgxpool.ParseConfig reads it.
	DatabaseURL string
	// PaymentsTable is PAYMENTS_TABLE (required).
	PaymentsTable string
	// Retention is RETENTION, a positive Go duration (default
	// dedupe.DefaultRetention).
	Retention time.Duration
	// Level is LOG_LEVEL: DEBUG, INFO, WARN or ERROR (default INFO).
	Level slog.Level
	// LargeResponseBucket is LARGE_RESPONSE_BUCKET: the S3 bucket for
	// responses too large for a DynamoDB item (dynamodb only). Empty
	// means such responses are omitted (409 on retries).
	LargeResponseBucket string
	// LargeResponseDays is LARGE_RESPONSE_EXPIRATION_DAYS, the bucket's
	// lifecycle expiry, required with LargeResponseBucket: it must
	// outlive Retention, or the function refuses to start.
	LargeResponseDays int
}

// loadSettings reads the settings through getenv (os.Getenv in main). It
// reports every invalid variable at once.
func loadSettings(getenv func(string) string) (settings, error) {
	s := settings{
		Store:               getenv("DEDUPE_STORE"),
		IdempotencyTable:    getenv("IDEMPOTENCY_TABLE"),
		RedisURL:            getenv("REDIS_URL"),
		DatabaseURL:         getenv("DATABASE_URL"),
		PaymentsTable:       getenv("PAYMENTS_TABLE"),
		LargeResponseBucket: getenv("LARGE_RESPONSE_BUCKET"),
		Retention:           dedupe.DefaultRetention,
		Level:               slog.LevelInfo,
	}
	var errs []error
	switch s.Store {
	case "":
		s.Store = storeDynamoDB
		fallthrough
	case storeDynamoDB:
		if s.IdempotencyTable == "" {
			errs = append(errs, errors.New("IDEMPOTENCY_TABLE is not set"))
		}
	case storeRedis:
		if s.RedisURL == "" {
			errs = append(errs, errors.New("REDIS_URL is not set (DEDUPE_STORE=redis)"))
		}
	case storePostgres:
		if s.DatabaseURL == "" {
			errs = append(errs, errors.New("DATABASE_URL is not set (DEDUPE_STORE=postgres)"))
		}
	default:
		errs = append(errs, fmt.Errorf("DEDUPE_STORE=%q: want dynamodb, redis or postgres", s.Store))
	}
	if s.PaymentsTable == "" {
		errs = append(errs, errors.New("PAYMENTS_TABLE is not set"))
	}
	if v := getenv("RETENTION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("RETENTION=%q: want a positive Go duration such as 24h", v))
		}
		s.Retention = d
	}
	if v := getenv("LOG_LEVEL"); v != "" {
		if err := s.Level.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want DEBUG, INFO, WARN or ERROR", v))
		}
	}
	errs = append(errs, s.checkLargeResponses(getenv("LARGE_RESPONSE_EXPIRATION_DAYS")))
	if err := errors.Join(errs...); err != nil {
		return settings{}, fmt.Errorf("invalid environment: %w", err)
	}
	return s, nil
}

// checkLargeResponses reads LARGE_RESPONSE_EXPIRATION_DAYS (days) into s
// and refuses a large-response bucket whose objects could expire before
// the records that reference them: S3 expires objects at a midnight UTC
// at least that many days after their upload, so the days must be at
// least ceil(Retention/24h)+1.
func (s *settings) checkLargeResponses(days string) error {
	if s.LargeResponseBucket == "" {
		return nil
	}
	if s.Store != storeDynamoDB {
		return fmt.Errorf("LARGE_RESPONSE_BUCKET is set, but DEDUPE_STORE=%s stores no large responses: unset it", s.Store)
	}
	n, err := strconv.Atoi(days)
	if err != nil || n < 1 {
		return fmt.Errorf("LARGE_RESPONSE_EXPIRATION_DAYS=%q: want the bucket's lifecycle expiry in days, with LARGE_RESPONSE_BUCKET", days)
	}
	s.LargeResponseDays = n
	need := int((s.Retention+24*time.Hour-1)/(24*time.Hour)) + 1
	if n < need {
		return fmt.Errorf("LARGE_RESPONSE_EXPIRATION_DAYS=%d: objects would expire before their records (RETENTION=%v); want at least %d", n, s.Retention, need)
	}
	return nil
}
