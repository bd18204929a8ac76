package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Errors of this package. Failures of the Store methods wrap the sentinels
// of package dedupe instead (dedupe.ErrLeaseLost, dedupe.ErrNotFound,
// dedupe.ErrStoreUnavailable, dedupe.ErrResultTooLarge,
// dedupe.ErrKeyRejected).
var (
	// ErrInvalidOptions reports a nil client or Options that New or
	// CreateSchema cannot use, such as a table name that needs quoting.
	ErrInvalidOptions = errors.New("pgstore: invalid options")

	// ErrMalformedRecord reports a stored row the store cannot decode: an
	// unknown status, or corrupt headers.
	ErrMalformedRecord = errors.New("pgstore: malformed record")
)

// transientCodes are the SQLSTATEs that mean "try again later".
var transientCodes = map[string]bool{
	"40001": true, // serialization_failure
	"40P01": true, // deadlock_detected
	"53000": true, // insufficient_resources
	"53300": true, // too_many_connections
	"55P03": true, // lock_not_available (lock_timeout)
	"57014": true, // query_canceled (statement_timeout)
	"57P01": true, // admin_shutdown
	"57P02": true, // crash_shutdown
	"57P03": true, // cannot_connect_now (starting up, in recovery)
}

// wrapErr prefixes err from operation op on key with context, adding
// dedupe.ErrStoreUnavailable when the failure is transient. It never
// quotes the key (dedupe.KeyRef).
func wrapErr(op, key string, err error) error {
	return wrap(fmt.Sprintf("pgstore: %s %s", op, dedupe.KeyRef(key)), err)
}

// wrap prefixes err, adding dedupe.ErrStoreUnavailable when transient.
func wrap(prefix string, err error) error {
	if transient(err) {
		return fmt.Errorf("%s: %w: %w", prefix, dedupe.ErrStoreUnavailable, err)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// transient reports whether err is a failure worth retrying later: a
// connection that could not be made or broke (refused, reset, EOF, class
// 08), a timeout or deadline (a pool with no free connection included),
// or one of transientCodes. A canceled context is not: the caller gave
// up.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientCodes[pgErr.Code] || strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	switch {
	case errors.As(err, &connectErr),
		errors.Is(err, context.DeadlineExceeded),
		pgconn.Timeout(err),
		pgconn.SafeToRetry(err),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}
