package dedupe_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// The reuse features (issue 12) on one backend: the claim in the
// handler's context, chosen fingerprints, the stream adapters, Do's
// answers and the HTTP key and retention options.
func runReuse(t *testing.T, b backend) {
	t.Run("ClaimFrom", func(t *testing.T) { testClaimFrom(t, b) })
	t.Run("SQSBusinessKey", func(t *testing.T) { testSQSBusinessKey(t, b) })
	t.Run("Kinesis", func(t *testing.T) { testKinesisBatch(t, b) })
	t.Run("DynamoDBStream", func(t *testing.T) { testDynamoDBBatch(t, b) })
	t.Run("DoAnswers", func(t *testing.T) { testDoAnswers(t, b) })
	t.Run("HTTPKeyOptions", func(t *testing.T) { testHTTPKeyOptions(t, b) })
	t.Run("HTTPRetention", func(t *testing.T) { testHTTPRetention(t, b) })
}

func TestReuse(t *testing.T) { runReuse(t, memoryBackend) }

// newReuseGuard returns a guard over a fresh store of b with its own
// prefix and a test clock.
func newReuseGuard(t *testing.T, b backend) (*dedupe.Guard, *faultyStore, *testClock) {
	t.Helper()
	inner, _ := b.new(t)
	fs := &faultyStore{Store: inner}
	clock := newTestClock()
	return dedupe.New(fs, &dedupe.Config{Prefix: "reuse-" + rand.Text(), Now: clock.Now}), fs, clock
}

func testClaimFrom(t *testing.T, b backend) {
	g, _, clock := newReuseGuard(t, b)
	ctx := context.Background()
	if _, ok := dedupe.ClaimFrom(ctx); ok {
		t.Errorf("ClaimFrom outside a guarded call = true, want false")
	}
	// check records what a handler saw and checks it.
	var seen []dedupe.Claim
	check := func(ctx context.Context) {
		c, ok := dedupe.ClaimFrom(ctx)
		if !ok {
			t.Errorf("ClaimFrom in a guarded handler = false, want true")
			return
		}
		if c.Ref != dedupe.KeyRef(c.Key) || c.Token == "" || !c.LeaseUntil.After(clock.Now()) {
			t.Errorf("claim = %+v, want Ref = KeyRef(Key), a token and a lease ahead of now", c)
		}
		if d := c.DownstreamKey(); len(d) != 67 || !strings.HasPrefix(d, "dd-") {
			t.Errorf("DownstreamKey = %q, want dd- and 64 hex digits", d)
		}
		seen = append(seen, c)
	}
	wantKeys := func(name string, keys ...string) {
		t.Helper()
		var got []string
		for _, c := range seen {
			got = append(got, c.Key)
		}
		if !slices.Equal(got, keys) {
			t.Errorf("%s: claimed keys = %q, want %q", name, got, keys)
		}
		seen = nil
	}

	g.Do(ctx, dedupe.Call{Key: "run-1", Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) { check(ctx); return dedupe.Result{}, nil })
	wantKeys("Guard.Do", g.Key("run-1"))
	dedupe.Once(ctx, g, "do-1", []byte(`{}`), func(ctx context.Context) (int, error) { check(ctx); return 1, nil })
	wantKeys("Once", g.Key("do-1"))

	var sqs events.SQSEvent
	fixture(t, "sqs-event.json", &sqs)
	dedupe.SQS(g, &dedupe.SQSConfig{Key: func(m events.SQSMessage) string { return m.MessageId }}, func(ctx context.Context, _ events.SQSMessage) error { check(ctx); return nil })(ctx, sqs)
	var sqsKeys []string
	for _, m := range sqs.Records {
		sqsKeys = append(sqsKeys, g.Key(dedupe.SourceKey(m.EventSourceARN, m.MessageId)))
	}
	wantKeys("SQS", sqsKeys...)

	var kin events.KinesisEvent
	fixture(t, "kinesis-event.json", &kin)
	dedupe.Kinesis(g, nil, func(ctx context.Context, _ events.KinesisEventRecord) error { check(ctx); return nil })(ctx, kin)
	var kinKeys []string
	for _, r := range kin.Records {
		kinKeys = append(kinKeys, g.Key(dedupe.SourceKey(r.EventSourceArn, r.EventID)))
	}
	wantKeys("Kinesis", kinKeys...)

	var ddb events.DynamoDBEvent
	fixture(t, "dynamodb-stream-event.json", &ddb)
	dedupe.DynamoDBStream(g, nil, func(ctx context.Context, _ events.DynamoDBEventRecord) error { check(ctx); return nil })(ctx, ddb)
	var ddbKeys []string
	for _, r := range ddb.Records {
		ddbKeys = append(ddbKeys, g.Key(dedupe.SourceKey(r.EventSourceArn, r.EventID)))
	}
	wantKeys("DynamoDBStream", ddbKeys...)

	var req events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-jwt.json", &req)
	h := dedupe.HTTPAPI(g, nil, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		check(ctx)
		return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
	})
	h(ctx, req)
	if len(seen) != 1 || !strings.Contains(seen[0].Key, "|POST /payments|") {
		t.Errorf("HTTPAPI: claims = %+v, want one whose key is scoped by the route", seen)
	}
	seen = nil
	delete(req.Headers, "idempotency-key")
	h = dedupe.HTTPAPI(g, nil, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if _, ok := dedupe.ClaimFrom(ctx); ok {
			t.Errorf("HTTPAPI without a key: ClaimFrom = true, want false (unguarded)")
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
	})
	h(ctx, req)

	mw := dedupe.Middleware(g, &dedupe.HTTPConfig{Principal: func(any) string { return "user-1" }})
	srv := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { check(r.Context()); w.WriteHeader(201) }))
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", "mw-1")
	srv.ServeHTTP(httptest.NewRecorder(), r)
	if len(seen) != 1 || !strings.HasSuffix(seen[0].Key, "|mw-1") {
		t.Errorf("Middleware: claims = %+v, want one for key mw-1", seen)
	}
}

func sqsMessage(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"}
}

func testSQSBusinessKey(t *testing.T, b backend) {
	ctx := context.Background()
	byOrder := func(m events.SQSMessage) string {
		b, err := dedupe.JSONFields([]byte(m.Body), "orderId")
		if err != nil {
			return ""
		}
		return string(b)
	}
	first := sqsMessage("m-1", `{"orderId":"ord_1","amount":1250,"sentAt":"10:00:00"}`)
	resent := sqsMessage("m-2", `{"orderId":"ord_1","amount":1250,"sentAt":"10:00:05"}`)
	tests := []struct {
		name         string
		fingerprint  func(events.SQSMessage) ([]byte, error)
		wantStatus   []dedupe.ItemStatus
		wantFailures []string
		wantRuns     int
	}{
		{"whole body: a re-send with a new timestamp is a conflict", nil,
			[]dedupe.ItemStatus{dedupe.ItemProcessed, dedupe.ItemFailed}, []string{"m-2"}, 1},
		{"fields that identify the order: the re-send is a duplicate", func(m events.SQSMessage) ([]byte, error) {
			return dedupe.JSONFields([]byte(m.Body), "orderId", "amount")
		}, []dedupe.ItemStatus{dedupe.ItemProcessed, dedupe.ItemDuplicate}, []string{}, 1},
		{"timestamp excluded: the re-send is a duplicate", func(m events.SQSMessage) ([]byte, error) {
			return dedupe.WithoutJSONFields([]byte(m.Body), "sentAt")
		}, []dedupe.ItemStatus{dedupe.ItemProcessed, dedupe.ItemDuplicate}, []string{}, 1},
		{"fingerprint error fails the message", func(events.SQSMessage) ([]byte, error) {
			return nil, errors.New("bad body")
		}, []dedupe.ItemStatus{dedupe.ItemFailed, dedupe.ItemFailed}, []string{"m-1", "m-2"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _, _ := newReuseGuard(t, b)
			var got []dedupe.ItemStatus
			runs := 0
			cfg := &dedupe.SQSConfig{Key: byOrder, Fingerprint: tt.fingerprint,
				OnItem: func(o dedupe.ItemOutcome) { got = append(got, o.Status) }}
			var failures []string
			for _, m := range []events.SQSMessage{first, resent} {
				resp, err := dedupe.SQS(g, cfg, func(context.Context, events.SQSMessage) error { runs++; return nil })(ctx, events.SQSEvent{Records: []events.SQSMessage{m}})
				if (len(resp.BatchItemFailures) > 0) != errors.Is(err, dedupe.ErrBatchFailed) {
					t.Errorf("failures %+v with error %v: want ErrBatchFailed exactly with failures", resp.BatchItemFailures, err)
				}
				for _, f := range resp.BatchItemFailures {
					failures = append(failures, f.ItemIdentifier)
				}
			}
			if failures == nil {
				failures = []string{}
			}
			if !slices.Equal(got, tt.wantStatus) || !slices.Equal(failures, tt.wantFailures) || runs != tt.wantRuns {
				t.Errorf("got %v, failures %v after %d runs; want %v, %v after %d", got, failures, runs, tt.wantStatus, tt.wantFailures, tt.wantRuns)
			}
		})
	}
}

func testKinesisBatch(t *testing.T, b backend) {
	ctx := context.Background()
	g, _, _ := newReuseGuard(t, b)
	var ev events.KinesisEvent
	fixture(t, "kinesis-event.json", &ev)
	seq := func(i int) string { return ev.Records[i].Kinesis.SequenceNumber }
	var outcomes []dedupe.ItemOutcome
	cfg := &dedupe.KinesisConfig{OnItem: func(o dedupe.ItemOutcome) { outcomes = append(outcomes, o) }}
	var ran []string
	failOn := seq(1)
	fn := func(_ context.Context, r events.KinesisEventRecord) error {
		if r.Kinesis.SequenceNumber == failOn {
			return errors.New("downstream down")
		}
		ran = append(ran, r.Kinesis.SequenceNumber)
		return nil
	}
	statuses := func() []dedupe.ItemStatus {
		var s []dedupe.ItemStatus
		for _, o := range outcomes {
			s = append(s, o.Status)
		}
		outcomes = nil
		return s
	}

	resp, err := dedupe.Kinesis(g, cfg, fn)(ctx, ev)
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != seq(1) || !errors.Is(err, dedupe.ErrBatchFailed) {
		t.Errorf("first delivery: failures = %+v, %v; want only the checkpoint %s, and the batch failed", resp.BatchItemFailures, err, seq(1))
	}
	if got, want := statuses(), []dedupe.ItemStatus{dedupe.ItemProcessed, dedupe.ItemFailed, dedupe.ItemSkipped}; !slices.Equal(got, want) {
		t.Errorf("first delivery: outcomes = %v, want %v", got, want)
	}
	if !slices.Equal(ran, []string{seq(0)}) {
		t.Errorf("first delivery ran %v, want only %s: the shard's order is kept", ran, seq(0))
	}

	// Lambda retries from the checkpoint; with a bisect or a replay of
	// the whole batch the first record is a duplicate.
	failOn = ""
	ran = nil
	resp, err = dedupe.Kinesis(g, cfg, fn)(ctx, ev)
	if len(resp.BatchItemFailures) != 0 || err != nil {
		t.Errorf("retry: failures = %+v, %v; want none", resp.BatchItemFailures, err)
	}
	if got, want := statuses(), []dedupe.ItemStatus{dedupe.ItemDuplicate, dedupe.ItemProcessed, dedupe.ItemProcessed}; !slices.Equal(got, want) {
		t.Errorf("retry: outcomes = %v, want %v", got, want)
	}
	if !slices.Equal(ran, []string{seq(1), seq(2)}) {
		t.Errorf("retry ran %v, want %s and %s", ran, seq(1), seq(2))
	}

	// A business key: the producer re-put ord_1001 with a new sentAt.
	re := ev.Records[0]
	re.EventID, re.Kinesis.SequenceNumber = "shardId-000000000000:9", "9"
	re.Kinesis.Data = []byte(`{"orderId":"ord_1001","amount":1250,"currency":"EUR","sentAt":"2026-12-01T10:09:00Z"}`)
	biz := &dedupe.KinesisConfig{
		Key: func(r events.KinesisEventRecord) string { return r.Kinesis.PartitionKey },
		Fingerprint: func(r events.KinesisEventRecord) ([]byte, error) {
			return dedupe.JSONFields(r.Kinesis.Data, "orderId", "amount", "currency")
		},
		OnItem: cfg.OnItem,
	}
	ran = nil
	dedupe.Kinesis(g, biz, fn)(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{ev.Records[0], re}})
	if got, want := statuses(), []dedupe.ItemStatus{dedupe.ItemProcessed, dedupe.ItemDuplicate}; !slices.Equal(got, want) || len(ran) != 1 {
		t.Errorf("business key: outcomes = %v after %d runs, want %v after 1", got, len(ran), want)
	}
}

func testDynamoDBBatch(t *testing.T, b backend) {
	ctx := context.Background()
	g, fs, _ := newReuseGuard(t, b)
	var ev events.DynamoDBEvent
	fixture(t, "dynamodb-stream-event.json", &ev)
	var outcomes []dedupe.ItemOutcome
	cfg := &dedupe.DynamoDBStreamConfig{OnItem: func(o dedupe.ItemOutcome) { outcomes = append(outcomes, o) }}
	runs := 0
	fn := func(context.Context, events.DynamoDBEventRecord) error { runs++; return nil }

	// The store fails for the whole batch: the first record is the
	// checkpoint, nothing runs.
	fs.claimErr = fmt.Errorf("throttled: %w", dedupe.ErrStoreUnavailable)
	resp, err := dedupe.DynamoDBStream(g, cfg, fn)(ctx, ev)
	fs.claimErr = nil
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[0].Change.SequenceNumber || runs != 0 || !errors.Is(err, dedupe.ErrBatchFailed) {
		t.Errorf("store down: failures = %+v, %v after %d runs, want the first record after 0, and the batch failed", resp.BatchItemFailures, err, runs)
	}
	if len(outcomes) != 3 || !errors.Is(outcomes[0].Err, dedupe.ErrStoreUnavailable) || outcomes[0].KeyRef != dedupe.KeyRef(g.Key(dedupe.SourceKey(ev.Records[0].EventSourceArn, ev.Records[0].EventID))) {
		t.Errorf("store down: outcomes = %+v, want 3, the first failed with ErrStoreUnavailable and its KeyRef", outcomes)
	}
	outcomes = nil
	for range 2 {
		resp, err = dedupe.DynamoDBStream(g, cfg, fn)(ctx, ev)
		if len(resp.BatchItemFailures) != 0 || err != nil {
			t.Errorf("failures = %+v, %v; want none", resp.BatchItemFailures, err)
		}
	}
	if runs != 3 || len(outcomes) != 6 || outcomes[3].Status != dedupe.ItemDuplicate {
		t.Errorf("two deliveries: %d runs, outcomes %+v; want 3 runs and the second delivery all duplicates", runs, outcomes)
	}
}

func testDoAnswers(t *testing.T, b backend) {
	ctx := context.Background()
	g, fs, _ := newReuseGuard(t, b)
	one := func(context.Context) (int, error) { return 42, nil }

	a, err := dedupe.Once(ctx, g, "k1", []byte(`{"a":1}`), one)
	if err != nil || a.Value != 42 || a.Replayed || !a.Recorded || a.Warning != nil {
		t.Errorf("fresh: got %+v, %v; want 42, not replayed, recorded", a, err)
	}
	a, err = dedupe.Once(ctx, g, "k1", []byte(`{"a":1}`), func(context.Context) (int, error) { panic("never runs") })
	if err != nil || a.Value != 42 || !a.Replayed || !a.Recorded {
		t.Errorf("replay: got %+v, %v; want 42, replayed, recorded", a, err)
	}
	if _, err = dedupe.Once(ctx, g, "k1", []byte(`{"a":2}`), one); !errors.Is(err, dedupe.ErrFingerprintMismatch) {
		t.Errorf("other payload: err = %v, want ErrFingerprintMismatch", err)
	}

	fs.completeErr = fmt.Errorf("timeout: %w", dedupe.ErrStoreUnavailable)
	a, err = dedupe.Once(ctx, g, "k2", nil, one)
	fs.completeErr = nil
	if err != nil || a.Value != 42 || a.Replayed || a.Recorded || !errors.Is(a.Warning, dedupe.ErrNotStored) {
		t.Errorf("not stored: got %+v, %v; want 42, not recorded, Warning ErrNotStored", a, err)
	}

	f, err := dedupe.Once(ctx, g, "k3", nil, func(context.Context) (float64, error) { return nanValue(), nil })
	if err != nil || !f.Recorded || !errors.Is(f.Warning, dedupe.ErrResultUnencodable) {
		t.Errorf("unencodable: got %+v, %v; want recorded with Warning ErrResultUnencodable", f, err)
	}
	if _, err = dedupe.Once(ctx, g, "k3", nil, func(context.Context) (float64, error) { panic("never runs") }); !errors.Is(err, dedupe.ErrResultOmitted) {
		t.Errorf("after unencodable: err = %v, want ErrResultOmitted", err)
	}

	boom := errors.New("boom")
	if _, err = dedupe.Once(ctx, g, "k4", nil, func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("fn error: err = %v, want it", err)
	}
}

func nanValue() float64 {
	var zero float64
	return zero / zero
}

// v2Post is a guarded HTTP API request with a JWT principal and no
// Idempotency-Key.
func v2Post(t *testing.T, body string, headers map[string]string) events.APIGatewayV2HTTPRequest {
	var req events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-jwt.json", &req)
	delete(req.Headers, "idempotency-key")
	for k, v := range headers {
		req.Headers[k] = v
	}
	req.Body = body
	return req
}

func testHTTPKeyOptions(t *testing.T, b backend) {
	ctx := context.Background()
	tests := []struct {
		name       string
		cfg        dedupe.HTTPConfig
		first      events.APIGatewayV2HTTPRequest
		second     events.APIGatewayV2HTTPRequest
		wantStatus int // of the second request
		wantRuns   int
	}{
		{"KeyHeader: the key from X-Request-Id",
			dedupe.HTTPConfig{KeyHeader: "X-Request-Id"},
			v2Post(t, `{"amount":1}`, map[string]string{"x-request-id": "r-1"}),
			v2Post(t, `{"amount":1}`, map[string]string{"x-request-id": "r-1"}), 201, 1},
		{"KeyHeader: Idempotency-Key is then ignored",
			dedupe.HTTPConfig{KeyHeader: "X-Request-Id"},
			v2Post(t, `{"amount":1}`, map[string]string{"idempotency-key": "k"}),
			v2Post(t, `{"amount":1}`, map[string]string{"idempotency-key": "k"}), 201, 2},
		{"Key: a body field",
			dedupe.HTTPConfig{Key: func(req any) string {
				b, _ := dedupe.JSONFields([]byte(req.(*events.APIGatewayV2HTTPRequest).Body), "orderId")
				return string(b)
			}, Fingerprint: func(_ any, body []byte) ([]byte, error) { return dedupe.JSONFields(body, "orderId", "amount") }},
			v2Post(t, `{"orderId":"o-1","amount":1,"sentAt":"1"}`, nil),
			v2Post(t, `{"orderId":"o-1","amount":1,"sentAt":"2"}`, nil), 201, 1},
		{"Key: a key over 255 characters is refused",
			dedupe.HTTPConfig{Key: func(any) string { return strings.Repeat("k", 256) }},
			v2Post(t, `{}`, nil), v2Post(t, `{}`, nil), 400, 0},
		{"Fingerprint: a changed field that is validated conflicts",
			dedupe.HTTPConfig{Fingerprint: func(_ any, body []byte) ([]byte, error) { return dedupe.WithoutJSONFields(body, "sentAt") }},
			v2Post(t, `{"amount":1,"sentAt":"1"}`, map[string]string{"idempotency-key": "k"}),
			v2Post(t, `{"amount":2,"sentAt":"2"}`, map[string]string{"idempotency-key": "k"}), 422, 1},
		{"Fingerprint: an error is a 400, nothing claimed",
			dedupe.HTTPConfig{Fingerprint: func(_ any, body []byte) ([]byte, error) { return dedupe.JSONFields(body, "amount") }},
			v2Post(t, `not json`, map[string]string{"idempotency-key": "k"}),
			v2Post(t, `not json`, map[string]string{"idempotency-key": "k"}), 400, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _, _ := newReuseGuard(t, b)
			runs := 0
			h := dedupe.HTTPAPI(g, &tt.cfg, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs++
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"p-1"}`}, nil
			})
			if _, err := h(ctx, tt.first); err != nil {
				t.Fatal(err)
			}
			got, err := h(ctx, tt.second)
			if err != nil || got.StatusCode != tt.wantStatus || runs != tt.wantRuns {
				t.Errorf("second = %d, %v after %d runs; want %d after %d", got.StatusCode, err, runs, tt.wantStatus, tt.wantRuns)
			}
		})
	}
}

func testHTTPRetention(t *testing.T, b backend) {
	ctx := context.Background()
	g, _, clock := newReuseGuard(t, b)
	cfg := &dedupe.HTTPConfig{Retention: func(route string) time.Duration {
		if route == "POST /payments" {
			return time.Hour
		}
		return 0
	}}
	runs := 0
	h := dedupe.HTTPAPI(g, cfg, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
	})
	req := v2Post(t, `{}`, map[string]string{"idempotency-key": "k"})
	h(ctx, req)
	clock.Advance(59 * time.Minute)
	if r, _ := h(ctx, req); r.Headers[dedupe.HeaderReplayed] != "true" || runs != 1 {
		t.Errorf("after 59 minutes: replayed = %q after %d runs, want a replay after 1", r.Headers[dedupe.HeaderReplayed], runs)
	}
	clock.Advance(2 * time.Minute)
	if r, _ := h(ctx, req); r.StatusCode != 201 || runs != 2 {
		t.Errorf("after 61 minutes: %d after %d runs, want the route's hour over and a second run", r.StatusCode, runs)
	}
}
