package dedupe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// RunJSON runs fn at most once for key and returns its value, or the value
// of the first run to a duplicate. It suits event handlers (SQS,
// EventBridge, SNS): payload is the event's JSON (an SQS body, an
// EventBridge detail), fingerprinted in its CanonicalJSON form (raw when
// it is not JSON), and the value is stored JSON-encoded and decoded again
// for a replay, so T must survive encoding/json.
//
// On a fresh run RunJSON returns fn's own value. The error is nil when the
// value was stored or replayed. When fn ran but its value could not be
// recorded (ErrNotStored, ErrResultTooLarge), could not be encoded
// (ErrResultUnencodable: the run is recorded without it and never
// repeated), or ran without a claim (ErrRanUnguarded), the value is valid
// and the error says so. fn's own
// errors come back after the key was released, so a redelivery runs
// again. A *ConflictError (in progress, or the same key with a different
// payload), ErrResultOmitted (the first value was too large to keep; fn
// is never run again) and store failures return the zero T.
//
// For an EventBridge event the ID is the natural key:
//
//	v, err := dedupe.RunJSON(ctx, g, ev.ID, ev.Detail, process)
func RunJSON[T any](ctx context.Context, g *Guard, key string, payload []byte, fn func(context.Context) (T, error)) (T, error) {
	var fresh T
	var ran bool
	out, err := g.Run(ctx, key, Fingerprint(payload), func(ctx context.Context) (Result, error) {
		v, err := fn(ctx)
		if err != nil {
			return Result{}, err
		}
		fresh, ran = v, true
		body, err := json.Marshal(v)
		if err != nil {
			// The side effect happened: record the run without its value
			// rather than release the key for a retry to repeat it.
			return Result{}, &unencodableError{err: err}
		}
		return Result{Body: body}, nil
	})
	if ran {
		return fresh, err
	}
	var zero T
	if err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(out.Result.Body, &v); err != nil {
		return zero, fmt.Errorf("decode replayed result of %s: %w", KeyRef(g.Key(key)), err)
	}
	return v, nil
}

// SQSKeyAttribute is the message attribute SQSBatch reads the idempotency
// key from by default.
const SQSKeyAttribute = "Idempotency-Key"

// SQSConfig configures SQSBatch. The zero value (or a nil *SQSConfig) is
// valid: keys come from the Idempotency-Key string attribute, else the
// message ID, and nothing is logged.
type SQSConfig struct {
	// Key returns a message's idempotency key; an empty key fails the
	// message. Nil means the string message attribute SQSKeyAttribute when
	// present (a key the producer chose, which survives a producer's own
	// retries), else the message ID (which survives SQS redeliveries).
	Key func(events.SQSMessage) string

	// Logger receives one line per failed or unrecorded message, beside
	// the guard's event. Nil means the guard's Config.Logger.
	Logger *slog.Logger
}

// SQSBatch runs fn at most once per message key and reports the messages
// to retry as partial batch failures. Enable ReportBatchItemFailures on
// the event source mapping, and return the response from the handler:
//
//	func handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
//		return dedupe.SQSBatch(ctx, g, ev, nil, process), nil
//	}
//
// Messages are processed one after another, in order. The message body is
// fingerprinted (CanonicalJSON when it is JSON). A message is reported as
// failed, so SQS delivers it again, when fn returns an error, when another
// invocation is still processing its key, when its key is empty, when its
// key was used with a different body (it will reach the dead-letter queue
// for inspection), or when the store fails. A duplicate of a message that
// was processed (replayed, even when its result was too large to keep) is
// not failed: fn does not run again. On a FIFO queue (source ARN ending in
// ".fifo") the first failure fails every later message too, unprocessed,
// to keep their order. A panic in fn is re-raised after its key is
// released, failing the whole batch.
func SQSBatch(ctx context.Context, g *Guard, ev events.SQSEvent, cfg *SQSConfig, fn func(context.Context, events.SQSMessage) error) events.SQSEventResponse {
	var c SQSConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Key == nil {
		c.Key = defaultSQSKey
	}
	if c.Logger == nil {
		c.Logger = g.cfg.Logger
	}
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	failed := false
	for _, msg := range ev.Records {
		if failed && strings.HasSuffix(msg.EventSourceARN, ".fifo") {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			continue
		}
		err := sqsMessage(ctx, g, c.Key(msg), msg, fn)
		switch {
		case err == nil:
		case errors.Is(err, ErrNotStored), errors.Is(err, ErrResultTooLarge),
			errors.Is(err, ErrRanUnguarded), errors.Is(err, ErrResultOmitted):
			c.Logger.Warn("dedupe: message processed, not recorded for dedupe", "messageId", msg.MessageId, "err", err)
		default:
			c.Logger.Warn("dedupe: message failed, SQS will redeliver", "messageId", msg.MessageId, "err", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			failed = true
		}
	}
	return resp
}

// sqsMessage runs fn for one message under key.
func sqsMessage(ctx context.Context, g *Guard, key string, msg events.SQSMessage, fn func(context.Context, events.SQSMessage) error) error {
	if key == "" {
		return fmt.Errorf("message %s: %w", msg.MessageId, ErrInvalidKey)
	}
	_, err := g.Run(ctx, key, Fingerprint([]byte(msg.Body)), func(ctx context.Context) (Result, error) {
		return Result{}, fn(ctx, msg)
	})
	return err
}

// defaultSQSKey is the default SQSConfig.Key.
func defaultSQSKey(msg events.SQSMessage) string {
	if a, ok := msg.MessageAttributes[SQSKeyAttribute]; ok && a.StringValue != nil && *a.StringValue != "" {
		return *a.StringValue
	}
	return msg.MessageId
}
