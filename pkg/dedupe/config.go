package dedupe

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Defaults and limits.
const (
	// Defaults New applies for zero fields of Config.
	DefaultRetention   = 24 * time.Hour
	DefaultLease       = 5 * time.Minute
	DefaultMaxLease    = 15 * time.Minute
	DefaultLeaseMargin = 2 * time.Second

	// MinRetention is the shortest retention a guard accepts
	// (Config.Retention, Call.Retention, HTTPConfig.Retention,
	// HandlerConfig.Retention): a record kept for less would let a
	// client's ordinary retry run the work again.
	MinRetention = time.Minute

	// Defaults of NewCache for zero arguments.
	DefaultCacheEntries = 1024
	DefaultCacheBytes   = 4 << 20

	// DefaultMaxBodyBytes is the request body limit of the HTTP
	// adapters when HTTPConfig.MaxBodyBytes is zero: 1 MiB.
	DefaultMaxBodyBytes = 1 << 20

	// EMFNamespace is the CloudWatch namespace EMF writes to by
	// default.
	EMFNamespace = "Dedupe"

	// MaxKeyLength is the longest idempotency key ParseKey accepts, in
	// bytes (every accepted byte is one printable ASCII character).
	MaxKeyLength = 255

	// MaxStoreKeyBytes is the longest key, in bytes, that every Store
	// accepts: DynamoDB's limit for a string partition key. Guard.Key
	// never returns a longer one.
	MaxStoreKeyBytes = 2048

	// MaxTraceBytes bounds what the guard stores of a request ID or a
	// trace context; longer values are not stored at all (a cut trace
	// header would name the wrong trace).
	MaxTraceBytes = 512
)

// Config configures a Guard. The zero value (or a nil *Config) is valid
// inside Lambda and means: keys prefixed with $AWS_LAMBDA_FUNCTION_NAME,
// completed records kept for DefaultRetention, leases derived from the
// context deadline, fail closed, the real clock, and warnings and errors
// logged to stderr. Outside Lambda (no AWS_LAMBDA_FUNCTION_NAME) set
// Prefix: New refuses an empty one. New refuses every value it cannot
// honour by panicking with a message that names the option and the fix
// (see New); docs/options.md lists every refusal.
type Config struct {
	// Prefix namespaces every key, so services sharing a table never
	// collide. Empty means the value of AWS_LAMBDA_FUNCTION_NAME, read once
	// by New; if that is empty too, New refuses the Config unless
	// Unprefixed is set.
	Prefix string

	// Unprefixed stores keys without any prefix when Prefix is empty and
	// AWS_LAMBDA_FUNCTION_NAME is unset: the guard then shares its key
	// space with every other unprefixed guard on the store. Set it only
	// when a single service owns the whole store. It is refused together
	// with a non-empty Prefix.
	Unprefixed bool

	// Retention is how long a completed record is replayed, and the
	// lifetime of an in-progress record beyond its lease. Zero means
	// DefaultRetention; a value below MinRetention (negative included) is
	// refused.
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
	// the one logger: the adapters use it too. Nil means WARN and above
	// as text on stderr (on Lambda, the function's CloudWatch log), so a
	// refusal or a lost record is never silent; pass
	// slog.New(slog.DiscardHandler) to log nothing.
	Logger *slog.Logger

	// Heartbeat, when positive, renews the lease every Heartbeat while the guarded function runs,
	// each time to the lease a claim at that moment would take (without a
	// context deadline: DefaultLease). Leases can then stay short where
	// there is no deadline (containers): set DefaultLease to a few
	// Heartbeats (a beat that comes after the lease ran out finds it lost). Renewals are fenced by the owner token; when one finds
	// the key taken over, the function's context is cancelled with cause
	// ErrLeaseLost. They stop, and are waited for, before the guard
	// records or releases anything. Zero means no renewal. New refuses a
	// positive Heartbeat on a store that does not implement
	// LeaseExtender, and a negative one. See the README
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
	// no minimum: the lease follows the context deadline. Middleware
	// treats a handler whose request context ended, or that answered 504
	// Gateway Timeout, as such an error (see Middleware).
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

// refuse panics with a refusal of New: the option and the fix.
func refuse(format string, args ...any) {
	panic(fmt.Sprintf("dedupe: "+format, args...))
}

// withDefaults returns a copy of c with every zero field defaulted, and
// panics (see New) on a value no guard over store can honour.
func (c *Config) withDefaults(store Store) Config {
	var out Config
	if c != nil {
		out = *c
	}
	if store == nil {
		refuse("New: the store is nil: pass a Store (memstore.New(), dynamostore.New(...))")
	}
	switch {
	case out.Prefix != "" && out.Unprefixed:
		refuse("Config.Unprefixed is set together with Config.Prefix %q: set one of them", out.Prefix)
	case out.Prefix == "" && !out.Unprefixed:
		out.Prefix = os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
		if out.Prefix == "" {
			refuse("Config.Prefix is empty and AWS_LAMBDA_FUNCTION_NAME is unset: set Config.Prefix to a name unique to this service on its store (or Config.Unprefixed to share one unprefixed key space deliberately)")
		}
	}
	if out.Retention < 0 || (out.Retention > 0 && out.Retention < MinRetention) {
		refuse("Config.Retention is %v: set it to at least %v (MinRetention), or 0 for %v", out.Retention, MinRetention, DefaultRetention)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"DefaultLease", out.DefaultLease}, {"MaxLease", out.MaxLease}, {"LeaseMargin", out.LeaseMargin},
		{"Heartbeat", out.Heartbeat}, {"MinHold", out.MinHold}, {"Wait", out.Wait},
	} {
		if d.v < 0 {
			refuse("Config.%s is negative (%v): set it to 0 for its default, or a positive duration", d.name, d.v)
		}
	}
	if out.Heartbeat > 0 {
		if _, ok := store.(LeaseExtender); !ok {
			refuse("Config.Heartbeat is set but the store (%T) cannot extend a lease (no LeaseExtender): unset Heartbeat, or use a store that implements LeaseExtender", store)
		}
	}
	if out.Retention == 0 {
		out.Retention = DefaultRetention
	}
	if out.DefaultLease == 0 {
		out.DefaultLease = DefaultLease
	}
	if out.MaxLease == 0 {
		out.MaxLease = DefaultMaxLease
	}
	if out.LeaseMargin == 0 {
		out.LeaseMargin = DefaultLeaseMargin
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.NewTicker == nil {
		out.NewTicker = newTicker
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
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
