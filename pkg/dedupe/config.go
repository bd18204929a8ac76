package dedupe

import (
	"context"
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

	// Logger receives one event per guarded request or message (message
	// "dedupe: request", with its outcome, the key's KeyRef, the Lambda
	// request ID, the route, and the store and handler latencies), at
	// INFO for answers that went as designed, WARN when a result could
	// not be recorded or work failed, ERROR when the store failed. It is
	// the one logger: the adapters use it too. Nil means no logging.
	Logger *slog.Logger

	// Heartbeat, when positive and the store implements LeaseExtender,
	// renews the lease every Heartbeat while the guarded function runs,
	// each time to the lease a claim at that moment would take (without a
	// context deadline: DefaultLease). Leases can then stay short where
	// there is no deadline (containers): set DefaultLease to a few
	// Heartbeats (a beat that comes after the lease ran out finds it lost). Renewals are fenced by the owner token; when one finds
	// the key taken over, the function's context is cancelled with cause
	// ErrLeaseLost. They stop, and are waited for, before the guard
	// records or releases anything. Zero means no renewal. See the README
	// section "Long work: lease renewal and a minimum hold".
	Heartbeat time.Duration

	// NewTicker returns the ticks of the heartbeat and a function that
	// stops them. Nil means time.NewTicker. Tests inject a channel they
	// send on, so no test waits for real time.
	NewTicker func(d time.Duration) (ticks <-chan time.Time, stop func())

	// MinHold is the shortest lease a claim takes, for work whose
	// outcome is unknown after a timeout (a withdrawal sent to a bank
	// that did not answer): a retry gets ErrInProgress (409 with
	// Retry-After) until MinHold after the claim, rather than running the
	// work again when the invocation's lease runs out. A function error
	// that wraps context.DeadlineExceeded or context.Canceled keeps the
	// key for the rest of its lease instead of releasing it. Zero means
	// no minimum: the lease follows the context deadline.
	MinHold time.Duration

	// LogKeys logs the stored key itself instead of its KeyRef. Keys can
	// carry personal data; leave it off in production.
	LogKeys bool

	// Metrics receives every request's Event, for example an *EMF writing
	// CloudWatch Embedded Metric Format to stdout. Nil means none.
	Metrics Emitter

	// OnOutcome, when set, is called with every request's Event after it
	// was logged and emitted: a hook for the caller's own metrics.
	OnOutcome func(context.Context, Event)

	// Tracer, when set, traces every guarded request or message (see
	// Tracer), for example dedupeotel's spans. Nil means none.
	Tracer Tracer

	// Cache, when set, keeps completed records in the execution
	// environment, so that replays it has seen cost no store call. Give
	// each Guard its own (NewCache). Nil means no cache.
	Cache *Cache

	// Wait lets a duplicate that finds its key in flight wait up to this
	// long (and never past its context's deadline less LeaseMargin) for
	// the first request to finish, and answer with its result instead of
	// ErrInProgress. It polls with strongly consistent reads on a capped
	// backoff: after 10, 20, 40, 80, 160 and 320 ms, then every 500 ms,
	// and once more when the wait ends. Its read budget is therefore at
	// most 6 reads plus 2 per second of Wait per waiting duplicate (7 for
	// 1 s, 15 for 5 s). Zero means no waiting.
	Wait time.Duration

	// Sleep pauses a waiting duplicate; it returns early with ctx's error.
	// Nil means a timer. Tests inject one to wait without sleeping.
	Sleep func(ctx context.Context, d time.Duration) error
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
	if out.NewTicker == nil {
		out.NewTicker = newTicker
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Sleep == nil {
		out.Sleep = sleep
	}
	return out
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
