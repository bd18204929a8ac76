package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLoadSettings(t *testing.T) {
	base := map[string]string{"IDEMPOTENCY_TABLE": "idem", "PAYMENTS_TABLE": "payments"}
	tests := []struct {
		name    string
		env     map[string]string
		want    settings
		wantErr []string // substrings of the error
	}{
		{"defaults", base, settings{Store: "dynamodb", IdempotencyTable: "idem", PaymentsTable: "payments", Retention: 24 * time.Hour, Level: slog.LevelInfo}, nil},
		{"all set", map[string]string{"IDEMPOTENCY_TABLE": "i", "PAYMENTS_TABLE": "p", "RETENTION": "90m", "LOG_LEVEL": "debug"},
			settings{Store: "dynamodb", IdempotencyTable: "i", PaymentsTable: "p", Retention: 90 * time.Minute, Level: slog.LevelDebug}, nil},
		{"redis", map[string]string{"DEDUPE_STORE": "redis", "REDIS_URL": "redis://127.0.0.1:6379/0", "PAYMENTS_TABLE": "p"},
			settings{Store: "redis", RedisURL: "redis://127.0.0.1:6379/0", PaymentsTable: "p", Retention: 24 * time.Hour, Level: slog.LevelInfo}, nil},
		{"postgres", map[string]string{"DEDUPE_STORE": "postgres", "DATABASE_URL": "postgres://u@127.0.0.1/db", "PAYMENTS_TABLE": "p"},
			settings{Store: "postgres", DatabaseURL: "postgres://u@127.0.0.1/db", PaymentsTable: "p", Retention: 24 * time.Hour, Level: slog.LevelInfo}, nil},
		{"redis without URL", map[string]string{"DEDUPE_STORE": "redis", "PAYMENTS_TABLE": "p"}, settings{}, []string{"REDIS_URL"}},
		{"postgres without URL", map[string]string{"DEDUPE_STORE": "postgres", "PAYMENTS_TABLE": "p"}, settings{}, []string{"DATABASE_URL"}},
		{"unknown store", map[string]string{"DEDUPE_STORE": "mongo", "PAYMENTS_TABLE": "p"}, settings{}, []string{"DEDUPE_STORE"}},
		{"nothing set", map[string]string{}, settings{}, []string{"IDEMPOTENCY_TABLE", "PAYMENTS_TABLE"}},
		{"bad values", map[string]string{"IDEMPOTENCY_TABLE": "i", "PAYMENTS_TABLE": "p", "RETENTION": "-1h", "LOG_LEVEL": "LOUD"},
			settings{}, []string{"RETENTION", "LOG_LEVEL"}},
		{"large responses", map[string]string{"IDEMPOTENCY_TABLE": "i", "PAYMENTS_TABLE": "p", "LARGE_RESPONSE_BUCKET": "b", "LARGE_RESPONSE_EXPIRATION_DAYS": "2"},
			settings{Store: "dynamodb", IdempotencyTable: "i", PaymentsTable: "p", Retention: 24 * time.Hour, Level: slog.LevelInfo,
				LargeResponseBucket: "b", LargeResponseDays: 2}, nil},
		{"large responses expire before their records", map[string]string{"IDEMPOTENCY_TABLE": "i", "PAYMENTS_TABLE": "p",
			"LARGE_RESPONSE_BUCKET": "b", "LARGE_RESPONSE_EXPIRATION_DAYS": "2", "RETENTION": "25h"}, settings{}, []string{"LARGE_RESPONSE_EXPIRATION_DAYS", "at least 3"}},
		{"large responses without days", map[string]string{"IDEMPOTENCY_TABLE": "i", "PAYMENTS_TABLE": "p", "LARGE_RESPONSE_BUCKET": "b"},
			settings{}, []string{"LARGE_RESPONSE_EXPIRATION_DAYS"}},
		{"large responses on redis", map[string]string{"DEDUPE_STORE": "redis", "REDIS_URL": "redis://x", "PAYMENTS_TABLE": "p",
			"LARGE_RESPONSE_BUCKET": "b", "LARGE_RESPONSE_EXPIRATION_DAYS": "2"}, settings{}, []string{"LARGE_RESPONSE_BUCKET", "redis"}},
		{"retention not a duration", map[string]string{"IDEMPOTENCY_TABLE": "i", "PAYMENTS_TABLE": "p", "RETENTION": "1 day"},
			settings{}, []string{"RETENTION"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadSettings(func(k string) string { return tt.env[k] })
			if tt.wantErr == nil {
				if err != nil || got != tt.want {
					t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, want an error naming %v", got, tt.wantErr)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
		})
	}
}
