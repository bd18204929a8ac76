package main

import (
	"errors"
	"fmt"
	"log/slog"
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
}

// loadSettings reads the settings through getenv (os.Getenv in main). It
// reports every invalid variable at once.
func loadSettings(getenv func(string) string) (settings, error) {
	s := settings{
		Store:            getenv("DEDUPE_STORE"),
		IdempotencyTable: getenv("IDEMPOTENCY_TABLE"),
		RedisURL:         getenv("REDIS_URL"),
		DatabaseURL:      getenv("DATABASE_URL"),
		PaymentsTable:    getenv("PAYMENTS_TABLE"),
		Retention:        dedupe.DefaultRetention,
		Level:            slog.LevelInfo,
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
	if err := errors.Join(errs...); err != nil {
		return settings{}, fmt.Errorf("invalid environment: %w", err)
	}
	return s, nil
}
