package dedupe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Answer is what Once returns: the value, and how it was obtained.
type Answer[T any] struct {
	// Value is fn's value on a fresh run, or the first run's value
	// decoded from the store on a replay.
	Value T
	// Replayed reports that fn did not run in this call: Value is the
	// stored value of an earlier run.
	Replayed bool
	// Recorded reports that the key now holds a completed record of the
	// run, so a retry will not run fn again: always on a replay, and on a
	// fresh run unless Warning wraps ErrNotStored or ErrRanUnguarded.
	Recorded bool
	// Warning is non-nil when Value is valid but exactly-once was not
	// fully kept: it wraps ErrNotStored (the completion could not be
	// written: a retry may run fn again once the lease runs out),
	// ErrRanUnguarded (the store failed and Config.FailOpen ran fn
	// without a claim), ErrResultTooLarge or ErrResultUnencodable (the
	// run is recorded without its value: duplicates get ErrResultOmitted).
	// Log it; do not fail the request for it.
	Warning error
}

// Once runs fn at most once for key and answers with its value, or with
// the value of the first run to a duplicate, like RunJSON, but folds the
// "value is valid anyway" errors into Answer.Warning and says whether the
// value was replayed. payload is fingerprinted as RunJSON fingerprints it;
// pass JSONFields(payload, ...) to fingerprint only part of it.
//
// The error is non-nil only when there is no value: fn's own error
// (returned after the key was released, so a retry runs again), a
// *ConflictError (in progress, or the same key with a different payload),
// ErrResultOmitted (the first run's value was not kept; fn is never run
// again), a store failure, or a replayed value that does not decode
// into T.
//
//	a, err := dedupe.Once(ctx, g, ev.ID, ev.Detail, process)
//	if err != nil {
//		return err // redelivered
//	}
//	if a.Warning != nil {
//		log.Warn("processed, not recorded", "err", a.Warning)
//	}
//
// (Guard.Do is another function: it runs a Func for a Call and returns an
// Outcome.)
func Once[T any](ctx context.Context, g *Guard, key string, payload []byte, fn func(context.Context) (T, error)) (Answer[T], error) {
	var a Answer[T]
	var ran bool
	out, err := g.Run(ctx, key, Fingerprint(payload), func(ctx context.Context) (Result, error) {
		v, err := fn(ctx)
		if err != nil {
			return Result{}, err
		}
		a.Value, ran = v, true
		body, err := json.Marshal(v)
		if err != nil {
			// The side effect happened: record the run without its value
			// rather than release the key for a retry to repeat it.
			return Result{}, &unencodableError{err: err}
		}
		return Result{Body: body}, nil
	})
	if ran {
		a.Warning = err
		a.Recorded = err == nil || errors.Is(err, ErrResultTooLarge) || errors.Is(err, ErrResultUnencodable)
		return a, nil
	}
	if err != nil {
		return Answer[T]{}, err
	}
	if err := json.Unmarshal(out.Result.Body, &a.Value); err != nil {
		return Answer[T]{}, fmt.Errorf("decode replayed result of %s: %w", KeyRef(g.Key(key)), err)
	}
	a.Replayed, a.Recorded = true, true
	return a, nil
}

// Do is Once.
//
// Deprecated: Do shares its name with Guard.Do, a different function; use
// Once, which it calls.
func Do[T any](ctx context.Context, g *Guard, key string, payload []byte, fn func(context.Context) (T, error)) (Answer[T], error) {
	return Once(ctx, g, key, payload, fn)
}
