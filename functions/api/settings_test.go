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
		{"defaults", base, settings{IdempotencyTable: "idem", PaymentsTable: "payments", Retention: 24 * time.Hour, Level: slog.LevelInfo}, nil},
		{"all set", map[string]string{"IDEMPOTENCY_TABLE": "i", "PAYMENTS_TABLE": "p", "RETENTION": "90m", "LOG_LEVEL": "debug"},
			settings{IdempotencyTable: "i", PaymentsTable: "p", Retention: 90 * time.Minute, Level: slog.LevelDebug}, nil},
		{"nothing set", map[string]string{}, settings{}, []string{"IDEMPOTENCY_TABLE", "PAYMENTS_TABLE"}},
		{"bad values", map[string]string{"IDEMPOTENCY_TABLE": "i", "PAYMENTS_TABLE": "p", "RETENTION": "-1h", "LOG_LEVEL": "LOUD"},
			settings{}, []string{"RETENTION", "LOG_LEVEL"}},
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
