package dedupe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// ItemStatus is what a batch adapter did with one message or record.
type ItemStatus string

// The statuses an ItemOutcome reports.
const (
	// ItemProcessed: fn ran and its completion was recorded.
	ItemProcessed ItemStatus = "processed"
	// ItemDuplicate: fn did not run, because the key was processed
	// before (a replay, or a first run whose result was too large to
	// keep). Meter these to see how often a source redelivers.
	ItemDuplicate ItemStatus = "duplicate"
	// ItemUnrecorded: fn ran and returned nil, but the guard could not
	// record its completion (ErrNotStored, ErrResultTooLarge,
	// ErrRanUnguarded). The item is not failed; a later redelivery may
	// run fn again. An error fn itself returns is always ItemFailed,
	// whatever it wraps.
	ItemUnrecorded ItemStatus = "unrecorded"
	// ItemFailed: the item is reported for redelivery: fn returned an
	// error (any error, even one wrapping ErrNotStored), another
	// invocation holds its key, its key was used with a different payload,
	// its key or fingerprint could not be computed, or the store failed.
	ItemFailed ItemStatus = "failed"
	// ItemSkipped: the item was not attempted, because an earlier one
	// failed and order must be kept (a FIFO queue, a stream shard). It is
	// redelivered.
	ItemSkipped ItemStatus = "skipped"
)

// ItemOutcome is the outcome of one item of a batch, handed to the
// adapter's OnItem callback.
type ItemOutcome struct {
	// ID is the item's identifier in the partial batch response: the SQS
	// message ID, or the Kinesis or DynamoDB Streams sequence number.
	ID string
	// KeyRef is KeyRef of the stored key (Guard.Key form), "" when the
	// item had no key or was skipped.
	KeyRef string
	// Status says what happened.
	Status ItemStatus
	// Err is why the item failed or was not recorded; nil for
	// ItemProcessed, ItemDuplicate (except ErrResultOmitted) and
	// ItemSkipped.
	Err error
}

// batchItem is one item as the shared batch core sees it.
type batchItem struct {
	id      string
	key     string
	source  string // event source ARN; "" with shared sources
	shared  bool   // keys shared across event sources
	payload func() ([]byte, error)
	ordered bool // a failure before it skips it (FIFO queue)
	// group is an ordered item's message group: only a failure in its
	// own group skips it. "" means unknown: any failure before it does.
	group string
}

// batchCore runs the items of one batch under a guard, one after another,
// for SQS, Kinesis and DynamoDBStream.
type batchCore struct {
	g      *Guard
	log    *slog.Logger
	onItem func(ItemOutcome)
	// stream: the first failure stops the batch and is the only item
	// reported (the checkpoint a stream retries from); later items are
	// skipped. Otherwise every failure is reported and only ordered items
	// after a failure are skipped.
	stream bool
}

func newBatchCore(g *Guard, log *slog.Logger, onItem func(ItemOutcome), stream bool) batchCore {
	if log == nil {
		log = g.cfg.Logger
	}
	if onItem == nil {
		onItem = func(ItemOutcome) {}
	}
	return batchCore{g: g, log: log, onItem: onItem, stream: stream}
}

// batchResult is the error a batch adapter returns for the failed item IDs of a
// batch of n items: with reportItems (the config's
// ReportBatchItemFailures), the IDs alone, for a partial batch response;
// without it, the IDs and, when there is one, an error wrapping
// ErrBatchFailed, which fails the whole batch. The error names counts
// only, never a key or a value.
func batchResult(failed []string, n int, what string, reportItems bool) error {
	if len(failed) == 0 || reportItems {
		return nil
	}
	return fmt.Errorf("%d of %d %s failed; the whole batch fails so that none is lost "+
		"(set ReportBatchItemFailures in the adapter's config once the event source mapping has FunctionResponseTypes [ReportBatchItemFailures], "+
		"to retry only those): %w", len(failed), n, what, ErrBatchFailed)
}

// run processes n items and returns the IDs to report as failed.
func (b batchCore) run(ctx context.Context, n int, item func(int) batchItem, fn func(context.Context, int) error) []string {
	failures := []string{}
	failed := false
	// failedGroups holds the message groups with a failed item: their
	// later items are skipped, other groups go on (as Powertools'
	// skip_group_on_error). An item with no group stops them all.
	var failedGroups map[string]bool
	for i := range n {
		it := item(i)
		if failed && (b.stream || it.ordered && (it.group == "" || failedGroups[it.group] || failedGroups[""])) {
			if !b.stream {
				failures = append(failures, it.id)
			}
			b.onItem(ItemOutcome{ID: it.id, Status: ItemSkipped})
			continue
		}
		o := b.one(ctx, it, func(ctx context.Context) error { return fn(ctx, i) })
		b.onItem(o)
		switch o.Status {
		case ItemFailed:
			b.log.Warn("dedupe: item failed, it will be redelivered", "id", it.id, "key", o.KeyRef, "err", o.Err)
			failures = append(failures, it.id)
			failed = true
			if failedGroups == nil {
				failedGroups = map[string]bool{}
			}
			failedGroups[it.group] = true
		case ItemUnrecorded:
			b.log.Warn("dedupe: item processed, not recorded for dedupe", "id", it.id, "key", o.KeyRef, "err", o.Err)
		}
	}
	return failures
}

// one runs a single item.
func (b batchCore) one(ctx context.Context, it batchItem, fn func(context.Context) error) ItemOutcome {
	o := ItemOutcome{ID: it.id}
	// refused fails an item the guard never saw, with its one event.
	refused := func(outcome string, err error) ItemOutcome {
		o.Status, o.Err = ItemFailed, err
		b.g.emit(ctx, Event{Outcome: outcome, Key: o.KeyRef, Err: err})
		return o
	}
	if it.key == "" {
		return refused(OutcomeInvalidKey, fmt.Errorf("item %s: empty key: %w", it.id, ErrInvalidKey))
	}
	key := it.key
	if !it.shared {
		if it.source == "" {
			return refused(OutcomeInvalidRequest, fmt.Errorf("item %s: %w (set ShareSources to key across sources)", it.id, ErrNoEventSource))
		}
		key = sourceKey(it.source, it.key)
	}
	o.KeyRef = KeyRef(b.g.Key(key))
	payload, err := it.payload()
	if err != nil {
		return refused(OutcomeInvalidRequest, fmt.Errorf("item %s: fingerprint: %w", it.id, err))
	}
	ran := false
	var fnErr error
	out, err := b.g.Do(ctx, Call{Key: key, Fingerprint: Fingerprint(payload)}, func(ctx context.Context) (Result, error) {
		ran = true
		fnErr = fn(ctx)
		return Result{}, fnErr
	})
	o.Err = err
	switch {
	case fnErr != nil:
		// fn's own error fails the item, whatever it wraps: a nested
		// Once's ErrNotStored is fn's failure, not the guard's.
		o.Status, o.Err = ItemFailed, fnErr
	case err == nil && out.Replayed:
		o.Status = ItemDuplicate
	case err == nil:
		o.Status = ItemProcessed
	case errors.Is(err, ErrResultOmitted):
		o.Status = ItemDuplicate
	case ran && (errors.Is(err, ErrNotStored) || errors.Is(err, ErrResultTooLarge) || errors.Is(err, ErrRanUnguarded)):
		o.Status = ItemUnrecorded
	default:
		o.Status = ItemFailed
	}
	return o
}

// KinesisConfig configures Kinesis. The zero value (or a nil
// *KinesisConfig) is valid: records are keyed by their event ID, scoped
// by their stream's ARN, and fingerprinted by their data; failures are
// logged to the guard's Logger.
type KinesisConfig struct {
	// Key returns a record's idempotency key; an empty key fails the
	// record. Nil means the record's EventID (shard and sequence number),
	// which survives the stream's retries but not a producer's re-put:
	// key by a business field (an order ID in the data) to deduplicate
	// those too.
	Key func(events.KinesisEventRecord) string
	// Fingerprint returns the bytes fingerprinted for a record
	// (CanonicalJSON when they are JSON); an error fails the record. Nil
	// means the record's data. With a business key, return the fields that
	// identify the request (JSONFields), so a re-put with a new timestamp
	// is a duplicate, not a conflict.
	Fingerprint func(events.KinesisEventRecord) ([]byte, error)
	// OnItem, when set, is called once per record, in order, with its
	// outcome: log or meter duplicates here.
	OnItem func(ItemOutcome)
	// Logger receives one line per failed or unrecorded record, beside
	// the guard's event. Nil means the guard's Config.Logger.
	Logger *slog.Logger
	// ShareSources keys records of every stream alike. By default (false)
	// a key is scoped by the record's event source ARN, so two streams
	// whose producers use the same keys never answer each other; a record
	// without an ARN is then failed (ErrNoEventSource).
	ShareSources bool
	// ReportBatchItemFailures asserts that the event source mapping has
	// FunctionResponseTypes [ReportBatchItemFailures]: Kinesis then
	// answers a failed record with a partial batch response (the record
	// to retry from) and a nil error. Without it (false), Lambda would
	// ignore such a response and the failed record would be lost, so a
	// failed record returns ErrBatchFailed, which fails the whole batch:
	// it is retried, and the records processed before it replay.
	ReportBatchItemFailures bool
}

// Kinesis returns a handler of Kinesis batches that runs fn at most once
// per record key. cfg is copied; nil means the zero KinesisConfig. Hand
// the handler to lambda.Start:
//
//	lambda.Start(dedupe.Kinesis(g, nil, process))
//
// When a record fails, the error wraps ErrBatchFailed and Lambda retries
// the whole batch, unless the config's ReportBatchItemFailures asserts
// that the event source mapping reports batch item failures: then the
// response names the record to retry from and the error is nil. Either
// way no record is lost. The response lists the failed record in both
// modes.
//
// Records are processed in order. A shard is ordered, and Lambda retries
// a stream batch from the lowest sequence number reported, so the first
// failure ends the batch: that record is the only one reported, and the
// ones after it are skipped (ItemSkipped) and delivered again. Records
// that were processed before a retry are duplicates then and do not run
// again. What fails a record is what fails an SQS message (see SQS).
// A panic in fn is re-raised after its key is released. Kinesis panics
// when g or fn is nil.
func Kinesis(g *Guard, cfg *KinesisConfig, fn func(context.Context, events.KinesisEventRecord) error) func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
	mustBatch("Kinesis", g, fn == nil)
	var c KinesisConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Key == nil {
		c.Key = func(r events.KinesisEventRecord) string { return r.EventID }
	}
	if c.Fingerprint == nil {
		c.Fingerprint = func(r events.KinesisEventRecord) ([]byte, error) { return r.Kinesis.Data, nil }
	}
	return func(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
		return kinesisBatch(ctx, g, ev, c, fn)
	}
}

// kinesisBatch handles one Kinesis batch.
func kinesisBatch(ctx context.Context, g *Guard, ev events.KinesisEvent, c KinesisConfig, fn func(context.Context, events.KinesisEventRecord) error) (events.KinesisEventResponse, error) {
	recs := ev.Records
	failed := newBatchCore(g, c.Logger, c.OnItem, true).run(ctx, len(recs),
		func(i int) batchItem {
			r := recs[i]
			return batchItem{id: r.Kinesis.SequenceNumber, key: c.Key(r), source: r.EventSourceArn, shared: c.ShareSources,
				payload: func() ([]byte, error) { return c.Fingerprint(r) }}
		},
		func(ctx context.Context, i int) error { return fn(ctx, recs[i]) })
	resp := events.KinesisEventResponse{BatchItemFailures: make([]events.KinesisBatchItemFailure, 0, len(failed))}
	for _, id := range failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.KinesisBatchItemFailure{ItemIdentifier: id})
	}
	return resp, batchResult(failed, len(recs), "records", c.ReportBatchItemFailures)
}

// DynamoDBStreamConfig configures DynamoDBStream. The zero value (or a nil
// *DynamoDBStreamConfig) is valid: records are keyed by their event ID, scoped
// by their stream's ARN, and fingerprinted by their event name, keys and
// images; failures are logged to the guard's Logger.
type DynamoDBStreamConfig struct {
	// Key returns a record's idempotency key; an empty key fails the
	// record. Nil means the record's EventID, unique per change.
	Key func(events.DynamoDBEventRecord) string
	// Fingerprint returns the bytes fingerprinted for a record; an error
	// fails the record. Nil means the JSON of the event name, keys, new
	// and old image.
	Fingerprint func(events.DynamoDBEventRecord) ([]byte, error)
	// OnItem, when set, is called once per record, in order, with its
	// outcome.
	OnItem func(ItemOutcome)
	// Logger receives one line per failed or unrecorded record, beside
	// the guard's event. Nil means the guard's Config.Logger.
	Logger *slog.Logger
	// ShareSources keys records of every table stream alike. By default
	// (false) a key is scoped by the record's event source ARN; a record
	// without one is failed (ErrNoEventSource).
	ShareSources bool
	// ReportBatchItemFailures asserts that the event source mapping has
	// FunctionResponseTypes [ReportBatchItemFailures], as
	// KinesisConfig.ReportBatchItemFailures does for Kinesis.
	ReportBatchItemFailures bool
}

// DynamoDBStream is Kinesis for DynamoDB Streams: the handler it returns
// runs fn at most once per record key; the first failed record (by its
// sequence number) fails the whole batch (ErrBatchFailed), or, with
// DynamoDBStreamConfig.ReportBatchItemFailures, is reported so that the
// stream retries from it; the records after it are skipped and delivered
// again. cfg is copied; nil means the zero DynamoDBStreamConfig.
// DynamoDBStream panics when g or fn is nil.
//
//	lambda.Start(dedupe.DynamoDBStream(g, nil, process))
func DynamoDBStream(g *Guard, cfg *DynamoDBStreamConfig, fn func(context.Context, events.DynamoDBEventRecord) error) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	mustBatch("DynamoDBStream", g, fn == nil)
	var c DynamoDBStreamConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Key == nil {
		c.Key = func(r events.DynamoDBEventRecord) string { return r.EventID }
	}
	if c.Fingerprint == nil {
		c.Fingerprint = defaultDynamoDBFingerprint
	}
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return dynamoDBBatch(ctx, g, ev, c, fn)
	}
}

// mustBatch refuses a batch adapter without a guard or an item function.
func mustBatch(name string, g *Guard, nilFn bool) {
	if g == nil || nilFn {
		panic("dedupe: " + name + ": the Guard or the item function is nil: pass both")
	}
}

// dynamoDBBatch handles one batch of DynamoDB Streams records.
func dynamoDBBatch(ctx context.Context, g *Guard, ev events.DynamoDBEvent, c DynamoDBStreamConfig, fn func(context.Context, events.DynamoDBEventRecord) error) (events.DynamoDBEventResponse, error) {
	recs := ev.Records
	failed := newBatchCore(g, c.Logger, c.OnItem, true).run(ctx, len(recs),
		func(i int) batchItem {
			r := recs[i]
			return batchItem{id: r.Change.SequenceNumber, key: c.Key(r), source: r.EventSourceArn, shared: c.ShareSources,
				payload: func() ([]byte, error) { return c.Fingerprint(r) }}
		},
		func(ctx context.Context, i int) error { return fn(ctx, recs[i]) })
	resp := events.DynamoDBEventResponse{BatchItemFailures: make([]events.DynamoDBBatchItemFailure, 0, len(failed))}
	for _, id := range failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: id})
	}
	return resp, batchResult(failed, len(recs), "records", c.ReportBatchItemFailures)
}

// defaultDynamoDBFingerprint is the default DynamoDBStreamConfig.Fingerprint.
func defaultDynamoDBFingerprint(r events.DynamoDBEventRecord) ([]byte, error) {
	b, err := json.Marshal(struct {
		Event    string                                   `json:"event"`
		Keys     map[string]events.DynamoDBAttributeValue `json:"keys,omitempty"`
		NewImage map[string]events.DynamoDBAttributeValue `json:"new,omitempty"`
		OldImage map[string]events.DynamoDBAttributeValue `json:"old,omitempty"`
	}{r.EventName, r.Change.Keys, r.Change.NewImage, r.Change.OldImage})
	if err != nil {
		return nil, fmt.Errorf("encode stream record: %w", err)
	}
	return b, nil
}

// isFIFO reports whether an SQS source ARN names a FIFO queue.
func isFIFO(arn string) bool { return strings.HasSuffix(arn, ".fifo") }

// fifoGroup returns the message group of an SQS FIFO message, "" when it
// carries none.
func fifoGroup(m events.SQSMessage) string { return m.Attributes["MessageGroupId"] }

// sourceKey returns the key the batch adapters (SQS, Kinesis,
// DynamoDBStream) claim for a message key from the event source ARN
// source, before the guard's prefix (see Guard.Key): "src:", the ARN's
// length, ":", the ARN, "#" and the key, so that no ARN and key pair can
// spell another's. With ShareSources the key is claimed as it is.
func sourceKey(source, key string) string {
	return "src:" + strconv.Itoa(len(source)) + ":" + source + "#" + key
}
