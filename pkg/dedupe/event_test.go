package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// runJSON returns Once's value, and its error or else its warning: the
// answer these tests compare.
func runJSON[T any](ctx context.Context, g *dedupe.Guard, key string, payload []byte, fn func(context.Context) (T, error)) (T, error) {
	a, err := dedupe.Once(ctx, g, key, payload, fn)
	if err != nil {
		return a.Value, err
	}
	return a.Value, a.Warning
}

type receipt struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

func TestOnceValue(t *testing.T) {
	ctx := context.Background()
	g := dedupe.New(memstore.New(), nil)
	runs := 0
	charge := func(ctx context.Context) (receipt, error) {
		runs++
		return receipt{ID: "pay_1", Amount: 1250}, nil
	}
	tests := []struct {
		name    string
		key     string
		payload string
		fn      func(context.Context) (receipt, error)
		want    receipt
		wantErr error
		runs    int
	}{
		{"fresh run", "evt-1", `{"amount":1250,"currency":"EUR"}`, charge, receipt{"pay_1", 1250}, nil, 1},
		{"duplicate replays the stored value", "evt-1", `{"amount":1250,"currency":"EUR"}`, charge, receipt{"pay_1", 1250}, nil, 1},
		{"re-serialised payload replays", "evt-1", "{\"currency\": \"EUR\",\n \"amount\": 1250}", charge, receipt{"pay_1", 1250}, nil, 1},
		{"other payload is a conflict", "evt-1", `{"amount":1251,"currency":"EUR"}`, charge, receipt{}, dedupe.ErrFingerprintMismatch, 1},
		{"error releases the key", "evt-2", `{}`, func(context.Context) (receipt, error) {
			runs++
			return receipt{}, errors.New("processor down")
		}, receipt{}, nil, 2},
		{"retry after error runs", "evt-2", `{}`, charge, receipt{"pay_1", 1250}, nil, 3},
		{"non-JSON payload hashed raw", "evt-3", `amount=1`, charge, receipt{"pay_1", 1250}, nil, 4},
	}
	for _, tt := range tests {
		got, err := runJSON(ctx, g, tt.key, []byte(tt.payload), tt.fn)
		switch {
		case tt.name == "error releases the key":
			if err == nil || runs != tt.runs {
				t.Errorf("%s: err = %v after %d runs, want the function's error after %d", tt.name, err, runs, tt.runs)
			}
		case (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)):
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.wantErr)
		case got != tt.want || runs != tt.runs:
			t.Errorf("%s: got %+v after %d runs, want %+v after %d", tt.name, got, runs, tt.want, tt.runs)
		}
	}
}

// TestOnceUnencodable checks issue 9, case 9: once fn succeeded, a
// value that cannot be encoded is recorded as a run without a result, and
// the side effect never runs again.
func TestOnceUnencodable(t *testing.T) {
	g := dedupe.New(memstore.New(), nil)
	runs := 0
	fn := func(context.Context) (float64, error) { runs++; return math.NaN(), nil }
	v, err := runJSON(context.Background(), g, "k", nil, fn)
	if !errors.Is(err, dedupe.ErrResultUnencodable) || !math.IsNaN(v) {
		t.Fatalf("first Once = %v, %v; want NaN and ErrResultUnencodable", v, err)
	}
	for range 2 {
		if _, err := runJSON(context.Background(), g, "k", nil, fn); !errors.Is(err, dedupe.ErrResultOmitted) {
			t.Errorf("retry: err = %v, want ErrResultOmitted", err)
		}
	}
	if runs != 1 {
		t.Errorf("runs = %d, want 1 (the run is recorded, never repeated)", runs)
	}
}

func TestOnceUnrecorded(t *testing.T) {
	fs := &faultyStore{Store: memstore.New(), omitOver: 5}
	g := dedupe.New(fs, nil)
	runs := 0
	fn := func(context.Context) (string, error) { runs++; return "a long value", nil }
	v, err := runJSON(context.Background(), g, "k", nil, fn)
	if v != "a long value" || !errors.Is(err, dedupe.ErrResultTooLarge) {
		t.Errorf("fresh run = %q, %v; want the value and ErrResultTooLarge", v, err)
	}
	v, err = runJSON(context.Background(), g, "k", nil, fn)
	if v != "" || !errors.Is(err, dedupe.ErrResultOmitted) || runs != 1 {
		t.Errorf("duplicate = %q, %v after %d runs; want ErrResultOmitted after 1", v, err, runs)
	}
}

func sqsFixture(t *testing.T) events.SQSEvent {
	var ev events.SQSEvent
	fixture(t, "sqs-event.json", &ev)
	return ev
}

// failedIDs returns the IDs a batch's response reports, and holds the
// adapters' rule: without ReportBatchItemFailures, an error wrapping
// ErrBatchFailed comes with the failures, and none without.
func failedIDs(r events.SQSEventResponse, err error) []string {
	var ids []string
	for _, f := range r.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if (len(ids) > 0) != errors.Is(err, dedupe.ErrBatchFailed) {
		panic(fmt.Sprintf("SQS reported failures %v with error %v: want ErrBatchFailed exactly when an item failed", ids, err))
	}
	return ids
}

func TestSQSBatch(t *testing.T) {
	ctx := context.Background()
	ev := sqsFixture(t)
	id1, id2 := ev.Records[0].MessageId, ev.Records[1].MessageId

	t.Run("each message runs once", func(t *testing.T) {
		g := dedupe.New(memstore.New(), nil)
		var seen []string
		fn := func(_ context.Context, m events.SQSMessage) error { seen = append(seen, m.MessageId); return nil }
		if got := failedIDs(dedupe.SQS(g, nil, fn)(ctx, ev)); got != nil {
			t.Errorf("failures = %v, want none", got)
		}
		if got := failedIDs(dedupe.SQS(g, nil, fn)(ctx, ev)); got != nil {
			t.Errorf("redelivery failures = %v, want none", got)
		}
		// The producer sent message 1 again: new message ID, same key.
		again := sqsFixture(t)
		again.Records[0].MessageId = "9d0c7b2e-resent"
		again.Records[1].MessageId = "4e5f6a7b-resent"
		dedupe.SQS(g, nil, fn)(ctx, again)
		if want := []string{id1, id2, "4e5f6a7b-resent"}; !slices.Equal(seen, want) {
			t.Errorf("processed %v, want %v", seen, want)
		}
	})

	t.Run("failures are reported and retried", func(t *testing.T) {
		g := dedupe.New(memstore.New(), nil)
		calls := 0
		fn := func(_ context.Context, m events.SQSMessage) error {
			calls++
			if m.MessageId == id1 && calls == 1 {
				return errors.New("downstream timeout")
			}
			return nil
		}
		if got := failedIDs(dedupe.SQS(g, nil, fn)(ctx, ev)); !slices.Equal(got, []string{id1}) {
			t.Errorf("failures = %v, want [%s]", got, id1)
		}
		if got := failedIDs(dedupe.SQS(g, nil, fn)(ctx, ev)); got != nil || calls != 3 {
			t.Errorf("retry: failures = %v after %d calls, want none after 3", got, calls)
		}
	})

	t.Run("in-progress message is retried later", func(t *testing.T) {
		g := dedupe.New(memstore.New(), nil)
		var inner events.SQSEventResponse
		var innerErr error
		nested := false
		fn := func(ctx context.Context, m events.SQSMessage) error {
			if m.MessageId == id1 && !nested {
				nested = true
				inner, innerErr = dedupe.SQS(g, nil, func(context.Context, events.SQSMessage) error { return nil })(ctx, ev)
			}
			return nil
		}
		dedupe.SQS(g, nil, fn)(ctx, ev)
		if got := failedIDs(inner, innerErr); !slices.Equal(got, []string{id1}) {
			t.Errorf("concurrent delivery failures = %v, want [%s]", got, id1)
		}
	})

	t.Run("same key with another body fails", func(t *testing.T) {
		g := dedupe.New(memstore.New(), nil)
		fn := func(context.Context, events.SQSMessage) error { return nil }
		dedupe.SQS(g, nil, fn)(ctx, ev)
		changed := sqsFixture(t)
		changed.Records[0].Body = `{"orderId":"ord_1001","amount":1,"currency":"EUR"}`
		if got := failedIDs(dedupe.SQS(g, nil, fn)(ctx, changed)); !slices.Equal(got, []string{id1}) {
			t.Errorf("failures = %v, want [%s]", got, id1)
		}
	})

	t.Run("FIFO stops at the first failure", func(t *testing.T) {
		g := dedupe.New(memstore.New(), nil)
		fifo := sqsFixture(t)
		for i := range fifo.Records {
			fifo.Records[i].EventSourceARN += ".fifo"
		}
		calls := 0
		fn := func(context.Context, events.SQSMessage) error { calls++; return errors.New("nope") }
		if got := failedIDs(dedupe.SQS(g, nil, fn)(ctx, fifo)); !slices.Equal(got, []string{id1, id2}) || calls != 1 {
			t.Errorf("failures = %v after %d calls, want [%s %s] after 1", got, calls, id1, id2)
		}
	})

	t.Run("store down fails every message", func(t *testing.T) {
		g := dedupe.New(&faultyStore{Store: memstore.New(), claimErr: errStoreDown}, nil)
		calls := 0
		fn := func(context.Context, events.SQSMessage) error { calls++; return nil }
		if got := failedIDs(dedupe.SQS(g, nil, fn)(ctx, ev)); !slices.Equal(got, []string{id1, id2}) || calls != 0 {
			t.Errorf("failures = %v after %d calls, want both after 0", got, calls)
		}
	})

	t.Run("custom and empty keys", func(t *testing.T) {
		g := dedupe.New(memstore.New(), nil)
		cfg := &dedupe.SQSConfig{Key: func(m events.SQSMessage) string {
			if m.MessageId == id2 {
				return ""
			}
			return "order:" + m.MessageId
		}}
		calls := 0
		fn := func(context.Context, events.SQSMessage) error { calls++; return nil }
		if got := failedIDs(dedupe.SQS(g, cfg, fn)(ctx, ev)); !slices.Equal(got, []string{id2}) || calls != 1 {
			t.Errorf("failures = %v after %d calls, want [%s] after 1", got, calls, id2)
		}
	})
}

// TestBatchFailsWhole: without ReportBatchItemFailures every batch
// adapter fails the whole batch (an error wrapping ErrBatchFailed, which
// names no key or body) when an item failed, so that no message is lost
// to a mapping that ignores partial responses; with it, the error is nil
// and the response alone reports the item.
func TestBatchFailsWhole(t *testing.T) {
	const secret = "order-secret-42"
	fail := errors.New("downstream down")
	for _, report := range []bool{false, true} {
		for _, tt := range []struct {
			name string
			run  func(g *dedupe.Guard, failing bool) (failures int, err error)
		}{
			{"SQS", func(g *dedupe.Guard, failing bool) (int, error) {
				ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: secret, EventSourceARN: "arn:aws:sqs:eu-west-1:1:q"}}}
				resp, err := dedupe.SQS(g, &dedupe.SQSConfig{ReportBatchItemFailures: report}, func(context.Context, events.SQSMessage) error { return map[bool]error{true: fail}[failing] })(context.Background(), ev)
				return len(resp.BatchItemFailures), err
			}},
			{"Kinesis", func(g *dedupe.Guard, failing bool) (int, error) {
				ev := events.KinesisEvent{Records: []events.KinesisEventRecord{{EventID: secret, EventSourceArn: "arn:aws:kinesis:eu-west-1:1:stream/s",
					Kinesis: events.KinesisRecord{SequenceNumber: "1", Data: []byte(secret)}}}}
				resp, err := dedupe.Kinesis(g, &dedupe.KinesisConfig{ReportBatchItemFailures: report}, func(context.Context, events.KinesisEventRecord) error { return map[bool]error{true: fail}[failing] })(context.Background(), ev)
				return len(resp.BatchItemFailures), err
			}},
			{"DynamoDB", func(g *dedupe.Guard, failing bool) (int, error) {
				ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventID: secret, EventSourceArn: "arn:aws:dynamodb:eu-west-1:1:table/t/stream/x",
					Change: events.DynamoDBStreamRecord{SequenceNumber: "1"}}}}
				resp, err := dedupe.DynamoDBStream(g, &dedupe.DynamoDBStreamConfig{ReportBatchItemFailures: report}, func(context.Context, events.DynamoDBEventRecord) error { return map[bool]error{true: fail}[failing] })(context.Background(), ev)
				return len(resp.BatchItemFailures), err
			}},
		} {
			t.Run(fmt.Sprintf("%s/ReportBatchItemFailures=%v", tt.name, report), func(t *testing.T) {
				g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "whole"})
				n, err := tt.run(g, true)
				switch {
				case n != 1:
					t.Errorf("failing item: %d failures reported, want 1", n)
				case !report && !errors.Is(err, dedupe.ErrBatchFailed):
					t.Errorf("failing item: error %v, want ErrBatchFailed", err)
				case !report && strings.Contains(err.Error(), secret):
					t.Errorf("the error %q names the item's key or body", err)
				case report && err != nil:
					t.Errorf("failing item with ReportBatchItemFailures: error %v, want nil", err)
				}
				if n, err := tt.run(g, false); n != 0 || err != nil {
					t.Errorf("the retry: %d failures, %v; want none", n, err)
				}
			})
		}
	}
}
