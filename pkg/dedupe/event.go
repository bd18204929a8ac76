package dedupe

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
)

// SQSConfig configures SQS. The zero value (or a nil *SQSConfig) is
// valid: keys come from the Idempotency-Key string attribute, else the
// message ID, scoped by the queue's ARN; the body is fingerprinted;
// failures are logged to the guard's Logger.
//
// Key by the message ID to absorb SQS's own redeliveries (at-least-once
// delivery, a visibility timeout that ran out). Key by a business field
// (an order ID in the body, or the Idempotency-Key attribute the producer
// sets) to absorb a producer's re-sends too, which get a new message ID;
// then fingerprint only the fields that identify the request (Fingerprint
// with JSONFields), or a re-send with a fresh timestamp is refused as a
// different request with the same key and fails until the dead-letter
// queue.
type SQSConfig struct {
	// Key returns a message's idempotency key; an empty key fails the
	// message. Nil means the string message attribute SQSKeyAttribute when
	// present (a key the producer chose, which survives a producer's own
	// retries), else the message ID (which survives SQS redeliveries).
	Key func(events.SQSMessage) string

	// Fingerprint returns the bytes fingerprinted for a message
	// (CanonicalJSON when they are JSON); an error fails the message. Nil
	// means the whole body.
	Fingerprint func(events.SQSMessage) ([]byte, error)

	// OnItem, when set, is called once per message, in order, with its
	// outcome: log or meter duplicates here.
	OnItem func(ItemOutcome)

	// Logger receives one line per failed or unrecorded message, beside
	// the guard's event. Nil means the guard's Config.Logger.
	Logger *slog.Logger

	// ShareSources keys messages of every queue alike. By default (false)
	// a key is scoped by the message's event source ARN (its queue), as
	// HTTP keys are scoped by API and stage: a function that consumes two
	// queues whose producers use the same key attribute never takes one
	// queue's message for a duplicate of the other's. A message without
	// an ARN is then failed (ErrNoEventSource). Set it when one logical
	// stream of requests arrives through several queues (a queue and its
	// replacement) and must be deduplicated across them. The sender
	// (SenderId) never enters the scope: an assumed role's session name
	// changes between a producer's retries, which would run them twice;
	// key by a tenant field in Key when queues are shared by tenants.
	ShareSources bool

	// ReportBatchItemFailures asserts that the event source mapping has
	// FunctionResponseTypes [ReportBatchItemFailures]: SQS then
	// answers failed messages with a partial batch response and a nil
	// error, and only they are delivered again. Without it (false),
	// Lambda would ignore such a response and delete the failed messages
	// as if processed, so any failed message returns ErrBatchFailed, which
	// fails the whole batch: every message is delivered again, and those
	// processed are duplicates then (fn does not run again). Set it only
	// with the mapping's setting: with it but without the setting, failed
	// messages are lost (make validate flags such a mapping: E9108).
	ReportBatchItemFailures bool
}

// SQS returns a handler of SQS batches that runs fn at most once per
// message key. cfg is copied; nil means the zero SQSConfig. Hand the
// handler to lambda.Start:
//
//	lambda.Start(dedupe.SQS(g, nil, process))
//
// When a message fails, the error wraps ErrBatchFailed and Lambda fails
// the whole batch, unless SQSConfig.ReportBatchItemFailures asserts that
// the event source mapping reports batch item failures: then the response
// lists the messages to retry and the error is nil. Either way no message
// is lost. The response lists the failed messages in both modes.
//
// Messages are processed one after another, in order. The message body is
// fingerprinted (CanonicalJSON when it is JSON) unless
// SQSConfig.Fingerprint says otherwise. A message is reported as failed,
// so SQS delivers it again, when fn returns an error, when another
// invocation is still processing its key, when its key is empty, when its
// key was used with a different body (it will reach the dead-letter queue
// for inspection), or when the store fails. A duplicate of a message that
// was processed (replayed, even when its result was too large to keep) is
// not failed: fn does not run again. On a FIFO queue (source ARN ending in
// ".fifo") a failure fails the later messages of its message group too,
// unprocessed, to keep their order, while other groups go on (as
// Powertools' skip_group_on_error); a message with no MessageGroupId
// attribute fails every later message. SQSDeduplicationID keys messages by
// their FIFO MessageDeduplicationId. A panic in fn is re-raised after its key is
// released, failing the whole batch. SQSConfig.OnItem sees every
// message's ItemOutcome.
//
// SQS panics when g or fn is nil.
func SQS(g *Guard, cfg *SQSConfig, fn func(context.Context, events.SQSMessage) error) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	mustBatch("SQS", g, fn == nil)
	var c SQSConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Key == nil {
		c.Key = defaultSQSKey
	}
	if c.Fingerprint == nil {
		c.Fingerprint = func(m events.SQSMessage) ([]byte, error) { return []byte(m.Body), nil }
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return sqsBatch(ctx, g, ev, c, fn)
	}
}

// sqsBatch handles one SQS batch.
func sqsBatch(ctx context.Context, g *Guard, ev events.SQSEvent, c SQSConfig, fn func(context.Context, events.SQSMessage) error) (events.SQSEventResponse, error) {
	msgs := ev.Records
	failed := newBatchCore(g, c.Logger, c.OnItem, false).run(ctx, len(msgs),
		func(i int) batchItem {
			m := msgs[i]
			return batchItem{id: m.MessageId, key: c.Key(m), ordered: isFIFO(m.EventSourceARN), group: fifoGroup(m),
				source: m.EventSourceARN, shared: c.ShareSources,
				payload: func() ([]byte, error) { return c.Fingerprint(m) }}
		},
		func(ctx context.Context, i int) error { return fn(ctx, msgs[i]) })
	resp := events.SQSEventResponse{BatchItemFailures: make([]events.SQSBatchItemFailure, 0, len(failed))}
	for _, id := range failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	return resp, batchResult(failed, len(msgs), "messages", c.ReportBatchItemFailures)
}

// defaultSQSKey is the default SQSConfig.Key.
func defaultSQSKey(msg events.SQSMessage) string {
	if a, ok := msg.MessageAttributes[SQSKeyAttribute]; ok && a.StringValue != nil && *a.StringValue != "" {
		return *a.StringValue
	}
	return msg.MessageId
}
