package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// settings is the reaper's configuration.
type settings struct {
	// Table is the idempotency table (IDEMPOTENCY_TABLE, required).
	Table string
	// Shards is the store's shard count (REAPER_SHARDS, a positive
	// integer; default dynamostore.DefaultShards).
	Shards int
	// Grace is how long past its lease a record must be before it is
	// cleared (REAPER_GRACE, a Go duration; default
	// dynamostore.DefaultReapGrace).
	Grace time.Duration
	// WarnAge is the age above which a cleared record is logged as a
	// warning (REAPER_WARN_AGE, a Go duration; default
	// dynamostore.DefaultReapWarnAge).
	WarnAge time.Duration
	// Level is the minimum log level (LOG_LEVEL: DEBUG, INFO, WARN or
	// ERROR; default INFO).
	Level slog.Level
}

// loadSettings reads the settings through getenv (os.Getenv in main). It
// reports every invalid variable at once.
func loadSettings(getenv func(string) string) (settings, error) {
	s := settings{
		Table:   getenv("IDEMPOTENCY_TABLE"),
		Shards:  dynamostore.DefaultShards,
		Grace:   dynamostore.DefaultReapGrace,
		WarnAge: dynamostore.DefaultReapWarnAge,
		Level:   slog.LevelInfo,
	}
	var errs []error
	if s.Table == "" {
		errs = append(errs, errors.New("IDEMPOTENCY_TABLE is not set"))
	}
	if v := getenv("REAPER_SHARDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("REAPER_SHARDS=%q: want a positive integer", v))
		}
		s.Shards = n
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"REAPER_GRACE", &s.Grace}, {"REAPER_WARN_AGE", &s.WarnAge}} {
		v := getenv(d.name)
		if v == "" {
			continue
		}
		dur, err := time.ParseDuration(v)
		if err != nil || dur <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive Go duration such as 30s", d.name, v))
		}
		*d.dst = dur
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
