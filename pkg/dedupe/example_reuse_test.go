package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// processor stands in for a payment processor that deduplicates on an
// idempotency key of its own, as real ones do.
type processor struct{ charges map[string]string }

func (p *processor) charge(key string, amount int) string {
	if id, ok := p.charges[key]; ok {
		return id // the processor's own replay
	}
	id := fmt.Sprintf("ch_%d", len(p.charges)+1)
	p.charges[key] = id
	fmt.Println("charged", amount)
	return id
}

// The handler passes its claim's key downstream, so a retry after a
// result the guard could not record is deduplicated by the processor too.
func ExampleClaimFrom() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "charges"})
	p := &processor{charges: map[string]string{}}
	charge := func(ctx context.Context) (string, error) {
		c, _ := dedupe.ClaimFrom(ctx)
		return p.charge(c.DownstreamKey(), 1250), nil
	}
	ctx := context.Background()
	a, _ := dedupe.Once(ctx, g, "order-42", nil, charge)
	b, _ := dedupe.Once(ctx, g, "order-42", nil, charge)
	fmt.Println(a.Value, a.Replayed, b.Value, b.Replayed)
	// Output:
	// charged 1250
	// ch_1 false ch_1 true
}

func ExampleJSONFields() {
	body := []byte(`{"sentAt":"2026-12-01T10:00:00Z","order":{"id":"ord_1","note":"x"},"amount":1250}`)
	only, _ := dedupe.JSONFields(body, "order.id", "amount")
	without, _ := dedupe.WithoutJSONFields(body, "sentAt", "order.note")
	fmt.Println(string(only))
	fmt.Println(string(without))
	// Output:
	// {"amount":1250,"order":{"id":"ord_1"}}
	// {"amount":1250,"order":{"id":"ord_1"}}
}

// An SQS consumer keyed by a business field: a producer that re-sends an
// order with a new timestamp (and so a new message ID) gets a duplicate,
// not a second shipment, because only the fields that identify the order
// are fingerprinted.
func ExampleSQSConfig_businessKey() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "orders"})
	cfg := &dedupe.SQSConfig{
		Key: func(m events.SQSMessage) string {
			var o struct{ OrderID string }
			json.Unmarshal([]byte(m.Body), &o)
			return o.OrderID // "" fails the message
		},
		Fingerprint: func(m events.SQSMessage) ([]byte, error) {
			return dedupe.JSONFields([]byte(m.Body), "orderId", "amount")
		},
		OnItem: func(o dedupe.ItemOutcome) { fmt.Println(o.ID, o.Status) },
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders", Body: `{"orderId":"ord_1","amount":1250,"sentAt":"10:00:00"}`},
		{MessageId: "m-2", EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders", Body: `{"orderId":"ord_1","amount":1250,"sentAt":"10:00:07"}`},
	}}
	resp, err := dedupe.SQS(g, cfg, func(context.Context, events.SQSMessage) error {
		fmt.Println("shipping ord_1")
		return nil
	})(context.Background(), ev)
	fmt.Println("failures:", len(resp.BatchItemFailures), err)
	// Output:
	// shipping ord_1
	// m-1 processed
	// m-2 duplicate
	// failures: 0 <nil>
}

// A Kinesis consumer whose event source mapping reports batch item
// failures: the first failure is the checkpoint the shard is retried
// from, and the records after it wait, so the shard's order is kept;
// records processed before a retry are duplicates then. (Without
// ReportBatchItemFailures, the failure fails the whole batch, which is
// retried from its first record.)
func ExampleKinesis() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "clicks"})
	rec := func(seq, data string) events.KinesisEventRecord {
		return events.KinesisEventRecord{EventID: "shardId-0:" + seq, EventSourceArn: "arn:aws:kinesis:eu-west-1:123456789012:stream/clicks",
			Kinesis: events.KinesisRecord{SequenceNumber: seq, Data: []byte(data)}}
	}
	ev := events.KinesisEvent{Records: []events.KinesisEventRecord{rec("1", `{"n":1}`), rec("2", `{"n":2}`), rec("3", `{"n":3}`)}}
	down := true
	process := func(_ context.Context, r events.KinesisEventRecord) error {
		if down && r.Kinesis.SequenceNumber == "2" {
			return fmt.Errorf("downstream unavailable")
		}
		fmt.Println("processed", string(r.Kinesis.Data))
		return nil
	}
	handler := dedupe.Kinesis(g, &dedupe.KinesisConfig{ReportBatchItemFailures: true}, process) // lambda.Start(handler)
	resp, _ := handler(context.Background(), ev)
	fmt.Println("retry from", resp.BatchItemFailures[0].ItemIdentifier)
	down = false
	resp, _ = handler(context.Background(), ev)
	fmt.Println("failures:", len(resp.BatchItemFailures))
	// Output:
	// processed {"n":1}
	// retry from 2
	// processed {"n":2}
	// processed {"n":3}
	// failures: 0
}

// A DynamoDB Streams consumer reacts to each change once.
func ExampleDynamoDBStream() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "order-events"})
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{
		EventID: "c81e728d", EventName: "INSERT", EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-01-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{SequenceNumber: "100",
			NewImage: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("order#1")}},
	}}}
	handler := dedupe.DynamoDBStream(g, nil, func(_ context.Context, r events.DynamoDBEventRecord) error {
		fmt.Println("notify", r.Change.NewImage["pk"].String())
		return nil
	}) // lambda.Start(handler)
	for range 2 { // the stream delivers the record twice
		_, err := handler(context.Background(), ev)
		fmt.Println("error:", err)
	}
	// Output:
	// notify order#1
	// error: <nil>
	// error: <nil>
}

// An EventBridge consumer keys by the event's ID, which EventBridge keeps
// across its retries, and fingerprints the detail.
func ExampleOnce_eventBridge() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "invoices"})
	ev := events.EventBridgeEvent{ID: "7bf73129-1428-4cd3-a780-95db273d1602", DetailType: "OrderPlaced",
		Source: "shop.orders", Detail: json.RawMessage(`{"orderId":"ord_1","total":1250}`)}
	handle := func(ctx context.Context, ev events.EventBridgeEvent) error {
		a, err := dedupe.Once(ctx, g, ev.ID, ev.Detail, func(context.Context) (string, error) {
			return "inv_1", nil
		})
		if err != nil {
			return err // EventBridge or the DLQ retries
		}
		fmt.Println(a.Value, "replayed:", a.Replayed)
		return nil
	}
	handle(context.Background(), ev)
	handle(context.Background(), ev)
	// Output:
	// inv_1 replayed: false
	// inv_1 replayed: true
}

// The key from another header, and only some body fields validated.
func ExampleHTTPConfig_key() {
	g := dedupe.New(memstore.New(), nil)
	cfg := &dedupe.HTTPConfig{
		KeyHeader: "X-Request-Id",
		Fingerprint: func(_ any, body []byte) ([]byte, error) {
			return dedupe.WithoutJSONFields(body, "clientTime")
		},
	}
	h := dedupe.HTTPAPI(g, cfg, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		fmt.Println("creating")
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"p_1"}`}, nil
	})
	req := func(clientTime string) events.APIGatewayV2HTTPRequest {
		return events.APIGatewayV2HTTPRequest{
			RouteKey: "POST /payments",
			Headers:  map[string]string{"x-request-id": "r-1"},
			Body:     `{"amount":1250,"clientTime":"` + clientTime + `"}`,
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
				Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
					JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{
						Claims: map[string]string{"iss": "https://issuer", "sub": "user-1"}}},
			},
		}
	}
	r1, _ := h(context.Background(), req("10:00:00"))
	r2, _ := h(context.Background(), req("10:00:03"))
	fmt.Println(r1.StatusCode, r2.StatusCode, r2.Headers[dedupe.HeaderReplayed], strings.TrimSpace(r2.Body))
	// Output:
	// creating
	// 201 201 true {"id":"p_1"}
}

// A long job in a container: a 30 s lease renewed every 10 s while the
// job runs, so a crash frees its key within 30 s, however long the job.
// The test's ticker stands in for time.NewTicker.
func ExampleConfig_heartbeat() {
	ticks := make(chan time.Time)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	g := dedupe.New(memstore.New(), &dedupe.Config{
		Prefix:       "reports",
		DefaultLease: 30 * time.Second,
		Heartbeat:    10 * time.Second,
		NewTicker:    func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} },
		Now:          func() time.Time { return now },
	})
	out, err := g.Do(context.Background(), dedupe.Call{Key: "report-2026-11", Fingerprint: ""}, func(ctx context.Context) (dedupe.Result, error) {
		c, _ := dedupe.ClaimFrom(ctx)
		fmt.Println("lease at claim ends", c.LeaseUntil.Format(time.TimeOnly))
		now = now.Add(25 * time.Second)
		ticks <- now // a beat: the lease now ends 30 s from here
		return dedupe.Result{Body: []byte("report ready")}, nil
	})
	fmt.Println(string(out.Result.Body), err)
	// Output:
	// lease at claim ends 10:00:30
	// report ready <nil>
}

// A withdrawal whose outcome is unknown after a timeout holds its key for
// at least MinHold, so a retry gets ErrInProgress instead of withdrawing
// again while the bank may still be processing the first one.
func ExampleConfig_minHold() {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	g := dedupe.New(memstore.New(), &dedupe.Config{MinHold: 15 * time.Minute, Now: func() time.Time { return now }})
	withdraw := func(context.Context) (dedupe.Result, error) {
		return dedupe.Result{}, fmt.Errorf("bank: %w", context.DeadlineExceeded)
	}
	_, err := g.Do(context.Background(), dedupe.Call{Key: "withdrawal-7", Fingerprint: "fp"}, withdraw)
	fmt.Println(err)
	now = now.Add(5 * time.Minute)
	_, err = g.Do(context.Background(), dedupe.Call{Key: "withdrawal-7", Fingerprint: "fp"}, withdraw)
	var conflict *dedupe.ConflictError
	if errors.As(err, &conflict) {
		fmt.Println(errors.Is(err, dedupe.ErrInProgress), "retry after", conflict.RetryAfter(now))
	}
	// Output:
	// bank: context deadline exceeded
	// true retry after 10m0s
}
