package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

func TestTransient(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("exec: %w", &pgconn.PgError{Code: code}) }
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"eof", io.ErrUnexpectedEOF, true},
		{"deadline", context.DeadlineExceeded, true},
		{"serialization_failure", pg("40001"), true},
		{"deadlock_detected", pg("40P01"), true},
		{"too_many_connections", pg("53300"), true},
		{"admin_shutdown", pg("57P01"), true},
		{"cannot_connect_now", pg("57P03"), true},
		{"connection_failure", pg("08006"), true},
		{"statement_timeout", pg("57014"), true},
		{"canceled", context.Canceled, false},
		{"unique_violation", pg("23505"), false},
		{"undefined_table", pg("42P01"), false},
		{"invalid_password", pg("28P01"), false},
		{"character_not_in_repertoire", pg("22021"), false},
		{"other", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pgstore.Transient(tt.err); got != tt.want {
				t.Errorf("transient(%v): got %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
