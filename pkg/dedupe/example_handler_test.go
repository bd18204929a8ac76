package dedupe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// An EventBridge handler made idempotent by the order ID in the event's
// detail; the amount and currency are what must match. EventBridge
// events are scoped by account, region, source and detail type.
func ExampleHandler_eventBridge() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "billing"})
	type Receipt struct{ Charge string }
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[Receipt]{Key: "detail.orderId", Fingerprint: "detail.[amount, currency]"},
		func(ctx context.Context, ev events.EventBridgeEvent) (Receipt, error) {
			fmt.Println("charging", string(ev.Detail))
			return Receipt{Charge: "ch_1"}, nil
		})
	if err != nil {
		panic(err) // a bad configuration: refused here, never at the first event
	}
	ev := events.EventBridgeEvent{ID: "e-1", Source: "com.example.orders", DetailType: "OrderPlaced",
		Detail: json.RawMessage(`{"orderId":"ord_1","amount":1250,"currency":"EUR"}`)}
	for range 2 { // EventBridge delivers it twice
		r, err := h(context.Background(), ev)
		fmt.Println(r.Charge, err)
	}
	// Output:
	// charging {"orderId":"ord_1","amount":1250,"currency":"EUR"}
	// ch_1 <nil>
	// ch_1 <nil>
}

// An SNS subscriber: Lambda hands it one notification per invocation,
// which SNS may deliver more than once. The message ID is the key, scoped
// by the topic; the message is what must match.
func ExampleHandler_sns() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "mailer"})
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{
		Key: "Records[].Sns.MessageId", Scope: "Records[].Sns.TopicArn", Fingerprint: "Records[].Sns.Message",
	}, func(ctx context.Context, ev events.SNSEvent) (string, error) {
		fmt.Println("mailing", ev.Records[0].SNS.Message)
		return "sent", nil
	})
	if err != nil {
		panic(err)
	}
	ev := events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{
		MessageID: "95df01b4-ee98-5cb9-9903-4c221d41eb5e", TopicArn: "arn:aws:sns:eu-west-1:123456789012:signups",
		Message: `{"user":"u-1"}`}}}}
	for range 2 {
		fmt.Println(h(context.Background(), ev))
	}
	// Output:
	// mailing {"user":"u-1"}
	// sent <nil>
	// sent <nil>
}

// An S3 notification handler: an object version is processed once. The
// key lists every record's object key and sequencer, and the scope every
// bucket, so that an event of several records is never taken for another.
func ExampleHandler_s3() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "thumbnails"})
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[int]{
		Key: "Records[].s3.object.[key, sequencer][]", Scope: "Records[].s3.bucket.arn",
	}, func(ctx context.Context, ev events.S3Event) (int, error) {
		for _, r := range ev.Records {
			fmt.Println("thumbnail of", r.S3.Object.Key)
		}
		return len(ev.Records), nil
	})
	if err != nil {
		panic(err)
	}
	ev := events.S3Event{Records: []events.S3EventRecord{{S3: events.S3Entity{
		Bucket: events.S3Bucket{Name: "photos", Arn: "arn:aws:s3:::photos"},
		Object: events.S3Object{Key: "cat.jpg", Sequencer: "0055AED6DCD90281E5"}}}}}
	for range 2 {
		fmt.Println(h(context.Background(), ev))
	}
	// Output:
	// thumbnail of cat.jpg
	// 1 <nil>
	// 1 <nil>
}

// A Step Functions task: the state machine passes the execution and the
// state ($$.Execution.Id, $$.State.Name) in the task's input, which key
// the work, so that a retried state replays its result.
func ExampleHandler_stepFunctions() {
	type Task struct {
		Execution string `json:"execution"`
		State     string `json:"state"`
		Amount    int    `json:"amount"`
	}
	type Receipt struct {
		Charge string `json:"charge"`
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "checkout"})
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[Receipt]{
		Key: "[execution, state]", Scope: "'checkout-state-machine'", Fingerprint: "amount",
	}, func(ctx context.Context, t Task) (Receipt, error) {
		fmt.Println("charging", t.Amount)
		return Receipt{Charge: "ch_1"}, nil
	})
	if err != nil {
		panic(err)
	}
	task := Task{Execution: "arn:aws:states:eu-west-1:123456789012:execution:checkout:7c1d", State: "Charge", Amount: 1250}
	for range 2 { // the state is retried
		fmt.Println(h(context.Background(), task))
	}
	// Output:
	// charging 1250
	// {ch_1} <nil>
	// {ch_1} <nil>
}

// Per-handler retention, a keep rule and a replay signal: a "declined"
// answer is not stored (the key is released, so a retry runs again), and
// OnReplay marks every answer the handler did not compute.
func ExampleHandlerConfig() {
	type Result struct {
		Status   string `json:"status"`
		Replayed bool   `json:"replayed,omitempty"`
	}
	type Payment struct {
		ID string `json:"id"`
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "payments"})
	declined := true
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[Result]{
		Key: "id", Scope: "'payments'",
		Retention: 7 * 24 * time.Hour,
		Keep:      func(r Result) bool { return r.Status != "declined" },
		OnReplay:  func(_ context.Context, r *Result) { r.Replayed = true },
	}, func(ctx context.Context, p Payment) (Result, error) {
		if declined {
			declined = false
			return Result{Status: "declined"}, nil
		}
		return Result{Status: "paid"}, nil
	})
	if err != nil {
		panic(err)
	}
	for range 3 {
		fmt.Println(h(context.Background(), Payment{"p-1"}))
	}
	// Output:
	// {declined false} <nil>
	// {paid false} <nil>
	// {paid true} <nil>
}

// Handler refuses, at construction, events that have an entry point of
// their own, and names it.
func ExampleHandler_refused() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "orders"})
	_, err := dedupe.Handler(g, &dedupe.HandlerConfig[events.SQSEventResponse]{Key: "Records[0].messageId", Scope: "'orders'"},
		func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, nil
		})
	fmt.Println(err)
	// Output:
	// dedupe: Handler: events of type events.SQSEvent have an entry point of their own: a batch's messages are guarded one by one: use dedupe.SQS
}

// A custom event: Handler knows no scope for it, so the configuration
// names one, here the tenant, so that two tenants' order IDs never meet.
func ExampleHandler_custom() {
	type Order struct {
		Tenant string `json:"tenant"`
		ID     string `json:"id"`
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "fulfilment"})
	ship := func(ctx context.Context, o Order) (string, error) {
		fmt.Println("shipping", o.Tenant, o.ID)
		return "shipped " + o.ID, nil
	}
	if _, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: "id"}, ship); err != nil {
		fmt.Println("refused: no scope")
	}
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: "id", Scope: "tenant"}, ship)
	if err != nil {
		panic(err)
	}
	for _, o := range []Order{{"acme", "o-1"}, {"acme", "o-1"}, {"globex", "o-1"}} {
		s, err := h(context.Background(), o)
		fmt.Println(s, err)
	}
	// Output:
	// refused: no scope
	// shipping acme o-1
	// shipped o-1 <nil>
	// shipped o-1 <nil>
	// shipping globex o-1
	// shipped o-1 <nil>
}

// Once runs work at most once per key and returns its typed value, or
// the first run's value to a duplicate.
func ExampleOnce() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "shipping"})
	ship := func(context.Context) (string, error) {
		fmt.Println("shipping order 42")
		return "s-1", nil
	}
	for range 2 {
		a, err := dedupe.Once(context.Background(), g, "order-42", []byte(`{"order":42}`), ship)
		fmt.Println(a.Value, a.Replayed, err)
	}
	// Output:
	// shipping order 42
	// s-1 false <nil>
	// s-1 true <nil>
}
