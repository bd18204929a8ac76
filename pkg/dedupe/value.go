package dedupe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Answer is what Once returns: the value, and how it was obtained.
type Answer[T any] struct {
	// Value is fn's value on a fresh run, or the first run's value
	// decoded from the store on a replay: numbers that T holds in an
	// interface decode as json.Number, never rounded, and for T = any
	// Value is the stored json.RawMessage itself. Either way it encodes
	// to the first value's JSON, byte for byte.
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
	// run is recorded without its value: duplicates get ErrResultOmitted;
	// see Once).
	// Log it; do not fail the request for it.
	Warning error
}

// Once runs fn at most once for key and answers with its value, or with
// the value of the first run to a duplicate: it is Guard.Do for work
// whose result is a Go value T rather than an HTTP Result. It suits
// event handlers (EventBridge, SNS, a Step Functions task): payload is
// the event's JSON (an EventBridge detail, a message body),
// fingerprinted in its CanonicalJSON form (raw when it is not JSON);
// pass JSONFields(payload, ...) to fingerprint only part of it. The
// "value is valid anyway" errors are folded into Answer.Warning, and
// Answer.Replayed tells a replay from a fresh run.
//
// The error is non-nil only when there is no value: fn's own error
// (returned after the key was released, so a retry runs again), a
// *ConflictError (in progress, or the same key with a different payload),
// ErrResultOmitted (the first run's value was not kept; fn is never run
// again), a store failure, or a replayed value that does not decode
// into T.
//
// The value is stored as encoding/json encodes it, and only if decoding
// that JSON into a T gives back the same JSON, so that a duplicate gets
// exactly what the first caller got. A value that fails to encode (a
// NaN, a MarshalJSON that fails or panics) or would not come back the
// same (an interface field holding a struct, whose members would come
// back sorted) is recorded without itself: Warning wraps
// ErrResultUnencodable, and duplicates get ErrResultOmitted, never
// another answer. A panic of fn itself releases the key and is
// re-raised.
//
//	a, err := dedupe.Once(ctx, g, ev.ID, ev.Detail, process)
//	if err != nil {
//		return err // redelivered
//	}
//	if a.Warning != nil {
//		log.Warn("processed, not recorded", "err", a.Warning)
//	}
//
// Handler is Once for a whole Lambda handler, selecting key and payload
// from the event.
func Once[T any](ctx context.Context, g *Guard, key string, payload []byte, fn func(context.Context) (T, error)) (Answer[T], error) {
	return onceKeep(ctx, g, Call{Key: key}, payload, nil, fn)
}

// onceKeep is Once for call (its Key and Retention; the fingerprint is
// payload's) with a keep rule: a value keep rejects is returned and not
// stored, the key released so that a retry runs again
// (HandlerConfig.Keep). Nil keeps all.
func onceKeep[T any](ctx context.Context, g *Guard, call Call, payload []byte, keep func(T) bool, fn func(context.Context) (T, error)) (Answer[T], error) {
	var a Answer[T]
	ran, kept := false, true
	key := call.Key
	call.Fingerprint = Fingerprint(payload)
	if keep != nil {
		call.Keep = func(Result) bool { return kept }
	}
	out, err := g.Do(ctx, call, func(ctx context.Context) (Result, error) {
		v, err := fn(ctx)
		if err != nil {
			return Result{}, err
		}
		a.Value, ran = v, true
		if keep != nil && !keep(v) {
			kept = false
			return Result{}, nil
		}
		body, err := encodeResult(v)
		if err != nil {
			// The side effect happened: record the run without its value
			// rather than release the key for a retry to repeat it.
			return Result{}, &unencodableError{err: err}
		}
		return Result{Body: body}, nil
	})
	if ran {
		a.Warning = err
		a.Recorded = kept && (err == nil || errors.Is(err, ErrResultTooLarge) || errors.Is(err, ErrResultUnencodable))
		return a, nil
	}
	if err != nil {
		return Answer[T]{}, err
	}
	if err := decodeResult(out.Result.Body, &a.Value); err != nil {
		return Answer[T]{}, fmt.Errorf("decode replayed result of %s: %w", KeyRef(g.Key(key)), err)
	}
	a.Replayed, a.Recorded = true, true
	return a, nil
}

// Reasons a value is recorded without itself (ErrResultUnencodable).
var (
	// errUnencodable: encoding/json failed or panicked on the value.
	errUnencodable = errors.New("the value cannot be encoded as JSON")
	// errNotReplayable: the value encodes, but decoding its JSON does
	// not give back the same JSON, so a replay would differ from the
	// first answer (an interface holding a struct, a MarshalJSON that
	// does not match its UnmarshalJSON).
	errNotReplayable = errors.New("the value does not decode back to the same JSON, so a replay would differ from the first answer")
)

// encodeResult returns the JSON of a value to store, checking that a
// replay (decodeResult, then encoding/json, as the Lambda runtime does)
// gives back exactly these bytes. A panic in a MarshalJSON or
// UnmarshalJSON method is an error here: it happens after the work.
func encodeResult[T any](v T) (body []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			body, err = nil, fmt.Errorf("%w: %w", errUnencodable, panicError("encoding/json", r))
		}
	}()
	body, err = json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnencodable, safeJSONError(err))
	}
	if isAny[T]() {
		return body, nil // replayed as these bytes
	}
	var back T
	if err := decodeResult(body, &back); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotReplayable, err)
	}
	again, err := json.Marshal(back)
	if err != nil || !bytes.Equal(again, body) {
		return nil, errNotReplayable
	}
	return body, nil
}

// decodeResult decodes a stored value into *v: numbers held by
// interfaces as json.Number, so that none is rounded through float64,
// and for T = any the stored JSON itself (a json.RawMessage), so that a
// replay is the first value's JSON byte for byte.
func decodeResult[T any](body []byte, v *T) error {
	if isAny[T]() {
		*v = any(json.RawMessage(bytes.Clone(body))).(T)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return safeJSONError(err)
	}
	return nil
}

// isAny reports whether T is the empty interface.
func isAny[T any]() bool { return reflect.TypeFor[T]() == reflect.TypeFor[any]() }
