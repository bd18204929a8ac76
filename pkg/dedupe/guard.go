package dedupe

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// claimAttempts bounds how often the guard claims again when the record it
// collided with vanished or became free between the write and the read.
const claimAttempts = 3

// completeAttempts bounds how often the guard retries Complete after a
// transient store failure. The work has already run, so losing its result
// would let a retry repeat it once the lease runs out.
const completeAttempts = 3

// Func is the work a Guard protects. It runs at most once per key while the
// record lives; its Result is stored and replayed to duplicates.
type Func func(ctx context.Context) (Result, error)

// Call describes one guarded call.
type Call struct {
	// Key is the idempotency key, before the guard's prefix. Never empty.
	Key string
	// Fingerprint identifies the request; a duplicate with a different
	// fingerprint is refused with ErrFingerprintMismatch.
	Fingerprint string
	// Keep decides whether a successful result is stored. A result it
	// rejects releases the key so that a retry runs again (HTTP uses it to
	// release 5xx answers). Nil keeps every result.
	Keep func(Result) bool
	// Retention overrides Config.Retention for this call: how long its
	// completed record is replayed. Zero means the guard's; a value below
	// MinRetention (negative included) refuses the call with
	// ErrInvalidRetention before anything is claimed.
	Retention time.Duration
}

// Outcome is what a guarded call produced.
type Outcome struct {
	// Result is the function's result, or the stored one when Replayed.
	Result Result
	// Replayed reports that Result came from the store: the function did
	// not run in this call.
	Replayed bool
	// Stored reports that this call ran the function and recorded its
	// result for replay.
	Stored bool
	// Record is the record claimed (fresh run) or found (duplicate).
	// After a fresh run it is the IN_PROGRESS record as claimed (no
	// result, the claim's lease), not the completed one.
	Record Record
}

// Guard gives a function exactly-once effects over at-least-once delivery.
// A Guard is safe for concurrent use; create one per function at init.
//
// The life of one key, for a fresh request and its retries:
//
//	claim        fn runs            complete
//	  |----------------------------->|
//	  |<-------- lease -------->|    |                   expires_at
//	  IN_PROGRESS: retries get   |   COMPLETED: retries get the replay
//	  ErrInProgress (409)        |   |------------------------->|
//	                             |                               free again
//	  if fn outlives its lease (say, the invocation timed out), the key is
//	  free at lease end: the next claim takes it over with a new token,
//	  and the old owner's late Complete fails with ErrLeaseLost.
//
// If fn fails, panics, or returns a result Call.Keep rejects, the key is
// released at once so that the caller's retry runs again.
type Guard struct {
	store Store
	cfg   Config
}

// New returns a Guard over store. A nil cfg means the zero Config.
//
// New refuses a configuration it cannot honour by panicking, as
// http.ServeMux.Handle refuses a bad pattern, so the mistake surfaces at
// init rather than as a silent downgrade: a nil store; an empty Prefix
// outside Lambda without Unprefixed; a Retention below MinRetention; a
// negative duration; a Heartbeat on a store that is not a LeaseExtender.
// The panic message starts with "dedupe: ", names the option and says
// how to fix it; docs/options.md lists every one.
func New(store Store, cfg *Config) *Guard {
	return &Guard{store: store, cfg: cfg.withDefaults(store)}
}

// Now returns the guard's clock reading.
func (g *Guard) Now() time.Time { return g.cfg.Now() }

// Key returns the key the store sees for key: the guard's prefix, "#" and
// key, shortened when it is longer than 1024 bytes to its first 960 bytes
// plus "#sha256:" and the SHA-256 of the whole, so that it always fits a
// store (MaxStoreKeyBytes) and two different keys never share a record.
//
// With Config.Unprefixed the prefix is empty and the key is used as is.
func (g *Guard) Key(key string) string {
	if g.cfg.Prefix == "" {
		return boundKey(key)
	}
	return boundKey(g.cfg.Prefix + "#" + key)
}

// Do claims call.Key and runs fn once, or answers a duplicate.
//
// The key must be non-empty valid UTF-8; anything else returns
// ErrInvalidKey and runs nothing. Keys of any length are accepted (see
// Key).
//
// On a fresh key it runs fn and stores its result (Outcome.Stored). If fn
// returns an error or panics, the key is released and the error returned
// (a panic is re-raised after the release).
//
// On a duplicate it never runs fn. It returns the stored result with
// Outcome.Replayed set; a *ConflictError wrapping ErrInProgress while the
// first call still holds its lease, or wrapping ErrFingerprintMismatch
// when the fingerprint differs (also after the first call's lease ran
// out: only the same request may take a stranded key over); or
// ErrResultOmitted when the first result was not kept.
//
// When the store fails on the claim, Do fails closed: fn does not run and
// the error is returned. A failure that left the store without an answer
// about the key wraps ErrStoreUnavailable; with Config.FailOpen, and only
// for such a failure, fn runs unguarded and its result comes back with an
// error wrapping ErrRanUnguarded. Any other store error (ErrKeyRejected, a
// malformed record) never runs fn. Neither does an answer that came with
// an error (see Store): a COMPLETED record whose result cannot be read is
// refused with ErrFingerprintMismatch when the fingerprint differs, else
// returned as ErrResultUnreadable (retry later) or ErrResultOmitted (never
// replayable); evidence of a concurrent writer is a *ConflictError
// wrapping ErrInProgress.
//
// When fn succeeded but its result could not be recorded, Do returns the
// result with an error wrapping ErrNotStored (lease lost, store down) or
// ErrResultTooLarge (recorded as completed without the result). Once fn
// has succeeded the key is never released for a reason of the guard's
// own; only Call.Keep may ask for that.
func (g *Guard) Do(ctx context.Context, call Call, fn Func) (Outcome, error) {
	var ev Event
	out, err := g.observe(ctx, &ev, func(ctx context.Context) (Outcome, error) { return g.do(ctx, call, fn, &ev) })
	return out, err
}

// observe runs do and emits ev once it is filled in, also when do panics
// (a panicking function, re-raised after its release).
func (g *Guard) observe(ctx context.Context, ev *Event, do func(context.Context) (Outcome, error)) (Outcome, error) {
	ctx = g.startTrace(ctx, ev)
	done := false
	defer func() {
		if !done {
			ev.Outcome = OutcomeReleased
			g.emit(ctx, *ev)
		}
	}()
	out, err := do(ctx)
	done = true
	g.emit(ctx, *ev)
	return out, err
}

// timed runs one store call and accounts for it in ev.
func timed[T any](ev *Event, call func() (T, error)) (T, error) {
	start := time.Now()
	v, err := call()
	ev.StoreCalls++
	ev.StoreLatency += time.Since(start)
	return v, err
}

// do is Do, filling in ev (all but its emission).
func (g *Guard) do(ctx context.Context, call Call, fn Func, ev *Event) (Outcome, error) {
	if call.Key == "" || !utf8.ValidString(call.Key) {
		ev.Outcome, ev.Err = OutcomeInvalidKey, ErrInvalidKey
		return Outcome{}, ErrInvalidKey
	}
	if call.Retention < 0 || (call.Retention > 0 && call.Retention < MinRetention) {
		err := fmt.Errorf("%w: %v is below %v", ErrInvalidRetention, call.Retention, MinRetention)
		ev.Outcome, ev.Err = OutcomeInvalidRequest, err
		return Outcome{}, err
	}
	key := g.Key(call.Key)
	ev.Key = KeyRef(key)
	if g.cfg.LogKeys {
		ev.Key = key
	}
	if c := g.cfg.Cache; c != nil {
		if rec, ok := c.get(key, g.cfg.Now()); ok {
			ev.Cached = true
			return g.duplicate(call, rec, ev)
		}
	}
	token := rand.Text()

	var waited time.Duration
	for attempt := 0; ; attempt++ {
		now := g.cfg.Now()
		leaseUntil := now.Add(g.lease(ctx, now))
		claim, err := timed(ev, func() (ClaimResult, error) {
			return g.store.Claim(ctx, ClaimRequest{
				Key:         key,
				Fingerprint: call.Fingerprint,
				Token:       token,
				Now:         now,
				LeaseUntil:  leaseUntil,
				ExpiresAt:   leaseUntil.Add(g.retention(call)),
				RequestID:   requestIDFrom(ctx),
				Trace:       traceFrom(ctx),
			})
		})
		if err != nil {
			err = fmt.Errorf("claim %s: %w", KeyRef(key), err)
			if out, err, ok := g.answered(call, key, claim.Record, err, ev); ok {
				return out, err
			}
			return g.storeFailed(ctx, key, token, fn, err, ev)
		}
		rec := claim.Record
		if !claim.Acquired && rec.Key != "" && rec.Token == token && rec.Status == StatusInProgress {
			// Our own earlier attempt was applied and its answer lost: the
			// record is ours. (Stores report this as acquired; this guards
			// against one that does not.)
			claim.Acquired = true
		}
		switch {
		case claim.Acquired:
			return g.execute(ctx, call, key, token, claim.Record, fn, ev)
		case rec.Key == "" || rec.FreeFor(now, call.Fingerprint, token):
			// The record changed between the write and the read: claim
			// again, a bounded number of times.
			if attempt+1 >= claimAttempts {
				// Other writers kept changing the record: evidence of a
				// concurrent writer, an answer (never ErrStoreUnavailable,
				// on which FailOpen would run fn beside them).
				err := fmt.Errorf("claim %s: record changed under %d attempts: %w", KeyRef(key), claimAttempts, ErrInProgress)
				out, err, _ := g.answered(call, key, rec, err, ev)
				return out, err
			}
			continue
		case rec.Status == StatusInProgress && rec.Fingerprint == call.Fingerprint && waited == 0 && g.cfg.Wait > 0:
			done, w, werr := g.wait(ctx, key, call, token, &rec, ev)
			waited = max(w, 1)
			ev.Waited = w
			if werr != nil {
				out, err, _ := g.answered(call, key, rec, fmt.Errorf("wait %s: %w", KeyRef(key), werr), ev)
				return out, err
			}
			if done {
				out, err := g.duplicate(call, rec, ev)
				if err == nil {
					ev.Outcome = OutcomeWaited
				}
				return out, err
			}
			if rec.Key == "" || rec.FreeFor(g.cfg.Now(), call.Fingerprint, token) {
				continue // released or gone while we waited: claim it
			}
			return g.duplicate(call, rec, ev)
		}
		if rec.Status == StatusCompleted && g.cfg.Cache != nil {
			g.cfg.Cache.put(rec)
		}
		return g.duplicate(call, rec, ev)
	}
}

// answered answers a call from a store error that carries an answer
// about the key (see Store): a COMPLETED record whose result cannot be
// read (ErrResultUnreadable, ErrResultOmitted), or evidence of a
// concurrent writer (ErrInProgress). rec is the record the store
// returned with the error, zero when it had none. The fingerprints are
// compared first, so a different request gets the mismatch whatever
// failed after. It reports false for any other error; fn never runs for
// one it answers.
func (g *Guard) answered(call Call, key string, rec Record, err error, ev *Event) (Outcome, error, bool) {
	unreadable, omitted, inFlight := errors.Is(err, ErrResultUnreadable), errors.Is(err, ErrResultOmitted), errors.Is(err, ErrInProgress)
	if !unreadable && !omitted && !inFlight {
		return Outcome{}, nil, false
	}
	ev.Err = err
	// A record the store read carries its owner; one that only names the
	// key (a writer seen, its record not read) has nothing to compare.
	if rec.Token != "" && rec.Fingerprint != call.Fingerprint {
		out, cerr := g.duplicate(call, rec, ev)
		return out, cerr, true
	}
	switch {
	case inFlight || rec.Status == StatusInProgress:
		if rec.Key == "" {
			rec = Record{Key: key, Status: StatusInProgress}
		}
		ev.OriginalRequestID, ev.OriginalTrace = rec.RequestID, rec.Trace
		ev.Outcome = OutcomeInProgress
		if !errors.Is(err, ErrInProgress) {
			err = fmt.Errorf("%w: %w", ErrInProgress, err)
		}
		return Outcome{Record: rec}, &ConflictError{Err: err, Record: rec}, true
	case omitted:
		ev.OriginalRequestID, ev.OriginalTrace = rec.RequestID, rec.Trace
		ev.Outcome = OutcomeTooLarge
		return Outcome{Replayed: true, Record: rec}, err, true
	}
	ev.OriginalRequestID, ev.OriginalTrace = rec.RequestID, rec.Trace
	ev.Outcome = OutcomeStoreError
	return Outcome{Record: rec}, err, true
}

// duplicate answers a call whose key is held by rec.
func (g *Guard) duplicate(call Call, rec Record, ev *Event) (Outcome, error) {
	ev.OriginalRequestID = rec.RequestID
	ev.OriginalTrace = rec.Trace
	switch {
	case rec.Fingerprint != call.Fingerprint:
		ev.Outcome = OutcomeMismatch
		return Outcome{Record: rec}, &ConflictError{Err: ErrFingerprintMismatch, Record: rec}
	case rec.Status == StatusInProgress:
		ev.Outcome = OutcomeInProgress
		return Outcome{Record: rec}, &ConflictError{Err: ErrInProgress, Record: rec}
	case rec.ResultOmitted || rec.Result == nil:
		ev.Outcome = OutcomeTooLarge
		return Outcome{Replayed: true, Record: rec}, fmt.Errorf("replay %s: %w", KeyRef(rec.Key), ErrResultOmitted)
	}
	// Stores (and the cache) hand out records that share no memory with
	// them, so the stored result is the caller's to keep.
	ev.Outcome = OutcomeReplayed
	return Outcome{Result: *rec.Result, Replayed: true, Record: rec}, nil
}

// A waiting duplicate (Config.Wait) polls on a capped backoff: it pauses
// firstWaitDelay, then twice as long each time up to maxWaitDelay, and
// reads the record after every pause. Its last pause is cut short so that
// it reads once more exactly when its budget ends.
//
//	claim found in flight
//	 |10|20| 40 | 80 |  160  |   320   |  500  |  500  | ... |rest|
//	    r  r    r    r       r         r       r       r     r    r
//	 reads: 6 in the first 630 ms, then 2 a second: at most 6 + 2/s of Wait
const (
	firstWaitDelay = 10 * time.Millisecond
	maxWaitDelay   = 500 * time.Millisecond
)

// wait polls the record for key, with strongly consistent reads on the
// backoff drawn above, until the first request completes or lets go of
// the key, or Config.Wait has passed, or the context's deadline less the
// lease margin is reached (so the answer still gets out), whichever is
// first. It reports done when *rec is COMPLETED, and how long it paused;
// *rec is the last record read (zero when the record is gone). When a
// read found the record COMPLETED but could not read its result, it
// returns that read's error (ErrResultUnreadable or ErrResultOmitted),
// with *rec the record without it.
func (g *Guard) wait(ctx context.Context, key string, call Call, token string, rec *Record, ev *Event) (done bool, waited time.Duration, err error) {
	start := g.cfg.Now()
	end := start.Add(g.cfg.Wait)
	if deadline, ok := ctx.Deadline(); ok {
		if d := deadline.Add(-g.cfg.LeaseMargin); d.Before(end) {
			end = d
		}
	}
	// The budget is kept twice: by the clock (reads take time too) and by
	// the pauses taken (a clock that does not move cannot stall us).
	budget := end.Sub(start)
	for delay := firstWaitDelay; waited < budget; delay = min(2*delay, maxWaitDelay) {
		d := min(delay, budget-waited, end.Sub(g.cfg.Now()))
		if d <= 0 {
			return false, waited, nil
		}
		if err := g.cfg.Sleep(ctx, d); err != nil {
			return false, waited, nil
		}
		waited += d
		now := g.cfg.Now()
		got, err := timed(ev, func() (Record, error) { return g.store.Get(ctx, key, now) })
		switch {
		case errors.Is(err, ErrNotFound):
			*rec = Record{}
			return false, waited, nil
		case got.Key != "" && (errors.Is(err, ErrResultUnreadable) || errors.Is(err, ErrResultOmitted)):
			*rec = got
			return true, waited, err
		case err != nil:
			return false, waited, nil // answer with what we had
		}
		*rec = got
		switch {
		case got.Status == StatusCompleted:
			return true, waited, nil
		case got.FreeFor(now, call.Fingerprint, token):
			return false, waited, nil
		}
	}
	return false, waited, nil
}

// execute runs fn as the owner of key and records what it produced.
func (g *Guard) execute(ctx context.Context, call Call, key, token string, rec Record, fn Func, ev *Event) (Outcome, error) {
	start := time.Now()
	ev.HandlerStart = start
	life := rec.Life()
	if life == "" {
		life = token // a store that returned no record: this claim starts the life
	}
	claim := Claim{Key: key, Ref: KeyRef(key), Token: token, Life: life, LeaseUntil: rec.LeaseExpiresAt}
	result, err := g.invoke(withClaim(ctx, claim), key, token, g.withHeartbeat(call, key, token, fn), ev)
	ev.HandlerLatency = time.Since(start)
	var unencodable *unencodableError
	omit := errors.As(err, &unencodable)
	if err != nil && !omit && g.holds(err) {
		// Config.MinHold: the work's outcome is unknown; keep the key
		// until its lease ends rather than let a retry repeat it now.
		ev.Outcome, ev.Err = OutcomeHeld, err
		return Outcome{Record: rec}, err
	}
	if err != nil && !omit {
		ev.Outcome, ev.Err = OutcomeReleased, err
		if rerr := g.release(ctx, key, token, ev); rerr != nil {
			ev.Err = errors.Join(err, rerr)
			return Outcome{Record: rec}, errors.Join(err, rerr)
		}
		return Outcome{Record: rec}, err
	}
	out := Outcome{Result: result, Record: rec}
	if !omit && call.Keep != nil && !call.Keep(result) {
		ev.Outcome = OutcomeReleased
		if rerr := g.release(ctx, key, token, ev); rerr != nil {
			ev.Err = rerr
		}
		return out, nil
	}

	// The work is done: finish recording it even if the caller's context
	// has been cancelled, or a retry would repeat it after the lease.
	cctx := context.WithoutCancel(ctx)
	var now time.Time
	for attempt := 1; ; attempt++ {
		now = g.cfg.Now()
		_, err = timed(ev, func() (struct{}, error) {
			return struct{}{}, g.store.Complete(cctx, CompleteRequest{
				Key:        key,
				Token:      token,
				Result:     result,
				Now:        now,
				ExpiresAt:  now.Add(g.retention(call)),
				OmitResult: omit,
				RequestID:  requestIDFrom(ctx),
				Trace:      traceFrom(ctx),
			})
		})
		if err == nil || !errors.Is(err, ErrStoreUnavailable) || attempt == completeAttempts {
			break
		}
	}
	switch {
	case err == nil && omit:
		err = fmt.Errorf("complete %s: %w: %w", KeyRef(key), ErrResultUnencodable, unencodable.err)
		ev.Outcome, ev.Err = OutcomeNotStored, err
		return out, err
	case err == nil:
		ev.Outcome = OutcomeExecuted
		out.Stored = true
		if c := g.cfg.Cache; c != nil {
			c.put(Record{Key: key, Status: StatusCompleted, Fingerprint: call.Fingerprint, Token: token,
				Result: &result, ExpiresAt: time.Unix(now.Add(g.retention(call)).Unix(), 0), CreatedAt: rec.CreatedAt, UpdatedAt: now,
				RequestID: requestIDFrom(ctx), Trace: traceFrom(ctx)})
		}
		return out, nil
	case errors.Is(err, ErrResultTooLarge):
		err = fmt.Errorf("complete %s: %w", KeyRef(key), err)
		ev.Outcome, ev.Err = OutcomeTooLarge, err
		return out, err
	case errors.Is(err, ErrLeaseLost):
		err = fmt.Errorf("complete %s: %w: %w", KeyRef(key), ErrNotStored, err)
		ev.Outcome, ev.Err = OutcomeLeaseLost, err
		return out, err
	default:
		err = fmt.Errorf("complete %s: %w: %w", KeyRef(key), ErrNotStored, err)
		ev.Outcome, ev.Err = OutcomeNotStored, err
		return out, err
	}
}

// unencodableError is what a Func returns when its work succeeded but its
// result cannot be encoded: the guard then records the run as completed
// without a result instead of releasing the key (see Once).
type unencodableError struct{ err error }

func (e *unencodableError) Error() string { return "encode result: " + e.err.Error() }
func (e *unencodableError) Unwrap() error { return e.err }

// invoke runs fn, releasing the key and re-panicking if fn panics.
func (g *Guard) invoke(ctx context.Context, key, token string, fn Func, ev *Event) (result Result, err error) {
	panicking := true
	defer func() {
		if panicking {
			ev.Err = errors.New("function panicked")
			if rerr := g.release(ctx, key, token, ev); rerr != nil {
				ev.Err = fmt.Errorf("function panicked; %w", rerr)
			}
		}
	}()
	result, err = fn(ctx)
	panicking = false
	return result, err
}

// release gives the key back after failed work.
func (g *Guard) release(ctx context.Context, key, token string, ev *Event) error {
	_, err := timed(ev, func() (struct{}, error) {
		return struct{}{}, g.store.Release(context.WithoutCancel(ctx), key, token)
	})
	if err != nil {
		return fmt.Errorf("release %s: %w", KeyRef(key), err)
	}
	return nil
}

// storeFailed applies the fail-closed or fail-open policy to a claim error.
// Only a transient failure (ErrStoreUnavailable) may fail open: a
// permanent one would fail the same way on every retry, and running
// unguarded each time would let a client bypass idempotency at will.
//
// The unguarded run's context carries a Claim with the request's real
// scoped key and Unguarded set (see Claim.DownstreamKey), never a zero
// one.
func (g *Guard) storeFailed(ctx context.Context, key, token string, fn Func, claimErr error, ev *Event) (Outcome, error) {
	ev.Outcome, ev.Err = OutcomeStoreError, claimErr
	if !g.cfg.FailOpen || !errors.Is(claimErr, ErrStoreUnavailable) {
		return Outcome{}, claimErr
	}
	start := time.Now()
	ev.HandlerStart = start
	result, err := fn(withClaim(ctx, Claim{Key: key, Ref: KeyRef(key), Token: token, Unguarded: true}))
	ev.HandlerLatency = time.Since(start)
	if err != nil {
		return Outcome{}, err
	}
	ev.Err = fmt.Errorf("%w: %w", ErrRanUnguarded, claimErr)
	return Outcome{Result: result}, ev.Err
}

// lease returns the lease for a claim at now: the time left until the
// context deadline, capped at MaxLease, plus LeaseMargin; DefaultLease
// when the context has no deadline; never less than Config.MinHold. The
// margin is added
// after the cap, so a lease always outlives the invocation that holds it,
// even one near Lambda's 900 s limit.
//
//	now            ctx deadline   lease end
//	 |------------------|-- margin --|
//	 (the part before the margin capped at MaxLease)
func (g *Guard) lease(ctx context.Context, now time.Time) time.Duration {
	deadline, ok := ctx.Deadline()
	if !ok {
		return max(g.cfg.DefaultLease, g.cfg.MinHold)
	}
	d := deadline.Sub(now)
	if d < 0 {
		d = 0
	}
	if d > g.cfg.MaxLease {
		d = g.cfg.MaxLease
	}
	return max(d+g.cfg.LeaseMargin, g.cfg.MinHold)
}
