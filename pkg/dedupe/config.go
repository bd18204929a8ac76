package dedupe

import (
	"log/slog"
	"os"
	"time"
)

// Defaults applied by New for zero fields of Config.
const (
	DefaultRetention   = 24 * time.Hour
	DefaultLease       = 5 * time.Minute
	DefaultMaxLease    = 15 * time.Minute
	DefaultLeaseMargin = 2 * time.Second
)

// Config configures a Guard. The zero value (or a nil *Config) is valid and
// means: keys prefixed with $AWS_LAMBDA_FUNCTION_NAME, completed records kept
// for DefaultRetention, leases derived from the context deadline, fail
// closed, the real clock, and no logging.
type Config struct {
	// Prefix namespaces every key, so functions sharing a table never
	// collide. Empty means the value of AWS_LAMBDA_FUNCTION_NAME, read once
	// by New; if that is empty too, keys are used unprefixed.
	Prefix string

	// Retention is how long a completed record is replayed, and the
	// lifetime of an in-progress record beyond its lease. Zero means
	// DefaultRetention.
	Retention time.Duration

	// DefaultLease is the lease taken when the context has no deadline.
	// Zero means DefaultLease.
	DefaultLease time.Duration

	// MaxLease caps the part of the lease derived from the context
	// deadline; LeaseMargin is added after the cap. Zero means
	// DefaultMaxLease.
	MaxLease time.Duration

	// LeaseMargin is added to the time left until the context deadline, so
	// a lease outlives the invocation that holds it by a small margin.
	// Zero means DefaultLeaseMargin.
	LeaseMargin time.Duration

	// FailOpen lets the function run without a claim when the store fails
	// transiently (ErrStoreUnavailable: throttling, timeouts, an
	// unreachable endpoint). The guard then returns the function's result
	// with an error wrapping ErrRanUnguarded. Permanent store errors never
	// fail open. The default, false, fails closed: the function does not
	// run and the store error is returned.
	FailOpen bool

	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	// Logger receives warnings (lost leases, failed releases). Nil means
	// no logging.
	Logger *slog.Logger
}

// withDefaults returns a copy of c with every zero field defaulted.
func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Prefix == "" {
		out.Prefix = os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	}
	if out.Retention <= 0 {
		out.Retention = DefaultRetention
	}
	if out.DefaultLease <= 0 {
		out.DefaultLease = DefaultLease
	}
	if out.MaxLease <= 0 {
		out.MaxLease = DefaultMaxLease
	}
	if out.LeaseMargin <= 0 {
		out.LeaseMargin = DefaultLeaseMargin
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}
