package dedupe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// mustPanic runs f and returns what it panicked with, failing the test
// when it did not panic.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want a refusal")
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

// TestNewRefuses checks issue 17: a Config New cannot honour is refused
// at construction, with a message naming the option and the fix.
func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name   string
		lambda bool // AWS_LAMBDA_FUNCTION_NAME set
		store  dedupe.Store
		cfg    *dedupe.Config
		want   string
	}{
		{"empty prefix outside Lambda", false, memstore.New(), nil, "Config.Prefix is empty"},
		{"empty prefix outside Lambda, other options", false, memstore.New(), &dedupe.Config{FailOpen: true}, "set Config.Prefix"},
		{"Unprefixed with a Prefix", false, memstore.New(), &dedupe.Config{Prefix: "svc", Unprefixed: true}, "Config.Unprefixed"},
		{"Retention of 1ns", true, memstore.New(), &dedupe.Config{Retention: time.Nanosecond}, "Config.Retention"},
		{"Retention of 1s", true, memstore.New(), &dedupe.Config{Retention: time.Second}, "MinRetention"},
		{"negative Retention", true, memstore.New(), &dedupe.Config{Retention: -time.Hour}, "Config.Retention"},
		{"negative DefaultLease", true, memstore.New(), &dedupe.Config{DefaultLease: -1}, "Config.DefaultLease"},
		{"negative MinHold", true, memstore.New(), &dedupe.Config{MinHold: -1}, "Config.MinHold"},
		{"negative Wait", true, memstore.New(), &dedupe.Config{Wait: -1}, "Config.Wait"},
		{"Heartbeat without LeaseExtender", true, &faultyStore{Store: memstore.New()}, &dedupe.Config{Heartbeat: time.Second}, "Config.Heartbeat"},
		{"nil store", true, nil, nil, "store is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.lambda {
				t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
			}
			msg := mustPanic(t, func() { dedupe.New(tt.store, tt.cfg) })
			if !strings.HasPrefix(msg, "dedupe: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("panic %q, want it to start with dedupe: and name %q", msg, tt.want)
			}
		})
	}
	// What is accepted: the explicit opt-in, a prefix, the minimum.
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	dedupe.New(memstore.New(), &dedupe.Config{Unprefixed: true})
	dedupe.New(memstore.New(), &dedupe.Config{Prefix: "svc", Retention: dedupe.MinRetention})
	dedupe.New(memstore.New(), &dedupe.Config{Prefix: "svc", Heartbeat: time.Second})
}

// TestTwoServicesNeverShareAnswers checks issue 17, case 2: two services
// outside Lambda on one store either refuse an empty prefix or are apart.
func TestTwoServicesNeverShareAnswers(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	store := memstore.New()
	a := dedupe.New(store, &dedupe.Config{Prefix: "svc-a"})
	b := dedupe.New(store, &dedupe.Config{Prefix: "svc-b"})
	runs := 0
	a.Do(context.Background(), dedupe.Call{Key: "order-1", Fingerprint: "fp"}, counter(&runs, "a"))
	out, err := b.Do(context.Background(), dedupe.Call{Key: "order-1", Fingerprint: "fp"}, counter(&runs, "b"))
	if err != nil || out.Replayed || string(out.Result.Body) != "b" {
		t.Errorf("service b got %q replayed=%v (%v), want its own run", out.Result.Body, out.Replayed, err)
	}
}

// v2WithContext returns an HTTP API request with a Lambda authorizer
// context.
func v2WithContext(t *testing.T, ctx map[string]any) events.APIGatewayV2HTTPRequest {
	var ev events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-lambda-simple.json", &ev)
	ev.RequestContext.Authorizer.Lambda = ctx
	ev.Headers["idempotency-key"] = "order-1"
	ev.RequestContext.HTTP.Method = "POST"
	return ev
}

// TestIdentityLessContextIsRefused checks issue 17, case 1: Bob, whose
// authorizer context holds only attributes he shares with Alice, is
// refused (500, handler not run), never answered with Alice's response;
// PrincipalFields names the field that does identify a caller.
func TestIdentityLessContextIsRefused(t *testing.T) {
	runs := 0
	handler := func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprint("for ", ev.RequestContext.Authorizer.Lambda["who"])}, nil
	}
	var evs []dedupe.Event
	g := dedupe.New(memstore.New(), &dedupe.Config{OnOutcome: func(_ context.Context, e dedupe.Event) { evs = append(evs, e) }})
	h := dedupe.HTTPAPI(g, nil, handler)
	alice := v2WithContext(t, map[string]any{"role": "buyer", "plan": "pro", "who": "alice", "authTime": 1})
	bob := v2WithContext(t, map[string]any{"role": "buyer", "plan": "pro", "who": "bob", "authTime": 2})
	for _, ev := range []events.APIGatewayV2HTTPRequest{alice, bob} {
		r, err := h(context.Background(), ev)
		if err != nil || r.StatusCode != 500 || r.Headers[dedupe.HeaderReplayed] != "" {
			t.Errorf("identity-less request: %d %v %q, want 500 and no replay", r.StatusCode, err, r.Body)
		}
	}
	if runs != 0 || len(evs) != 2 || !errors.Is(evs[0].Err, dedupe.ErrNoPrincipal) {
		t.Errorf("runs = %d, events = %+v; want no run and two ErrNoPrincipal events", runs, evs)
	}

	h = dedupe.HTTPAPI(g, &dedupe.HTTPConfig{Principal: dedupe.PrincipalFields("who")}, handler)
	for _, ev := range []events.APIGatewayV2HTTPRequest{alice, bob} {
		r, _ := h(context.Background(), ev)
		if r.StatusCode != 201 || r.Headers[dedupe.HeaderReplayed] != "" {
			t.Errorf("PrincipalFields(who): %d %q replayed %q, want each caller's own 201", r.StatusCode, r.Body, r.Headers[dedupe.HeaderReplayed])
		}
	}
	if runs != 2 {
		t.Errorf("runs = %d, want 2", runs)
	}
	if p := dedupe.PrincipalFields("who")(&bob); p == "" || p == dedupe.PrincipalFields("who")(&alice) {
		t.Errorf("PrincipalFields: bob %q, alice %q; want two different principals", p, dedupe.PrincipalFields("who")(&alice))
	}
	if p := dedupe.PrincipalFields("missing")(&bob); p != "" {
		t.Errorf("PrincipalFields of an absent field = %q, want \"\"", p)
	}
}

// TestBatchItemErrorIsItsFailure checks issue 17, case 3: an item whose
// function returns an error wrapping one of the guard's "ran anyway"
// sentinels is failed (redelivered), never counted as processed.
func TestBatchItemErrorIsItsFailure(t *testing.T) {
	for _, sentinel := range []error{dedupe.ErrNotStored, dedupe.ErrResultTooLarge, dedupe.ErrRanUnguarded} {
		t.Run(sentinel.Error(), func(t *testing.T) {
			g := dedupe.New(memstore.New(), nil)
			msg := events.SQSMessage{MessageId: "m1", Body: `{}`, EventSourceARN: "arn:aws:sqs:eu-west-1:1:q"}
			fail := func(context.Context, events.SQSMessage) error { return fmt.Errorf("nested Once: %w", sentinel) }
			var outcomes []dedupe.ItemOutcome
			resp, err := dedupe.SQS(g, &dedupe.SQSConfig{OnItem: func(o dedupe.ItemOutcome) { outcomes = append(outcomes, o) }}, fail)(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
			if len(resp.BatchItemFailures) != 1 || outcomes[0].Status != dedupe.ItemFailed || !errors.Is(err, dedupe.ErrBatchFailed) {
				t.Errorf("failures = %v, outcome %+v, %v; want m1 failed, and the batch", resp.BatchItemFailures, outcomes, err)
			}
			k, _ := dedupe.Kinesis(g, nil, func(context.Context, events.KinesisEventRecord) error { return fmt.Errorf("x: %w", sentinel) })(context.Background(), events.KinesisEvent{Records: []events.KinesisEventRecord{{EventID: "e1", EventSourceArn: "arn:aws:kinesis:eu-west-1:1:stream/s", Kinesis: events.KinesisRecord{SequenceNumber: "1"}}}})
			if len(k.BatchItemFailures) != 1 {
				t.Errorf("Kinesis failures = %v, want the record", k.BatchItemFailures)
			}
		})
	}
}

// TestFailOpenCarriesTheKey checks issue 17, case 4: the fail-open run's
// context carries the request's real scoped key, so two requests never
// share a downstream key, and the zero Claim is no key at all.
func TestFailOpenCarriesTheKey(t *testing.T) {
	fs := &faultyStore{Store: memstore.New(), claimErr: fmt.Errorf("down: %w", dedupe.ErrStoreUnavailable)}
	g := dedupe.New(fs, &dedupe.Config{FailOpen: true})
	keys := map[string]string{}
	for _, k := range []string{"order-A", "order-B"} {
		_, err := g.Do(context.Background(), dedupe.Call{Key: k, Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) {
			c, ok := dedupe.ClaimFrom(ctx)
			if !ok || !c.Unguarded || c.Key != g.Key(k) {
				t.Errorf("fail-open claim = %+v, %v; want Unguarded with key %q", c, ok, g.Key(k))
			}
			keys[k] = c.DownstreamKey()
			return dedupe.Result{}, nil
		})
		if !errors.Is(err, dedupe.ErrRanUnguarded) {
			t.Fatalf("err = %v, want ErrRanUnguarded", err)
		}
	}
	if keys["order-A"] == "" || keys["order-A"] == keys["order-B"] {
		t.Errorf("downstream keys %q, want two different non-empty keys", keys)
	}
	if got := (dedupe.Claim{}).DownstreamKey(); got != "" {
		t.Errorf("zero Claim's DownstreamKey = %q, want \"\"", got)
	}
	if c, ok := dedupe.ClaimFrom(context.Background()); ok || c.DownstreamKey() != "" {
		t.Errorf("ClaimFrom outside a guard = %+v, %v; want none and no key", c, ok)
	}
}

// TestMessageKeysScopedBySource checks issue 17, case 6: two queues whose
// producers use the same key attribute are two scopes; ShareSources
// joins them; a message without a source is failed, not guessed.
func TestMessageKeysScopedBySource(t *testing.T) {
	key := "order-1"
	msg := func(queue string) events.SQSMessage {
		return events.SQSMessage{MessageId: queue + "-m", Body: `{"a":1}`, EventSourceARN: queue,
			MessageAttributes: map[string]events.SQSMessageAttribute{dedupe.SQSKeyAttribute: {StringValue: &key, DataType: "String"}}}
	}
	for _, tt := range []struct {
		name     string
		share    bool
		runs     int
		failures int
	}{
		{"scoped by source (default)", false, 2, 0},
		{"ShareSources", true, 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := dedupe.New(memstore.New(), nil)
			runs := 0
			ev := events.SQSEvent{Records: []events.SQSMessage{msg("arn:aws:sqs:eu-west-1:1:a"), msg("arn:aws:sqs:eu-west-1:1:b")}}
			resp, _ := dedupe.SQS(g, &dedupe.SQSConfig{ShareSources: tt.share}, func(context.Context, events.SQSMessage) error { runs++; return nil })(context.Background(), ev)
			if runs != tt.runs || len(resp.BatchItemFailures) != tt.failures {
				t.Errorf("runs = %d, failures %v; want %d runs, %d failures", runs, resp.BatchItemFailures, tt.runs, tt.failures)
			}
		})
	}
	var evs []dedupe.Event
	g := dedupe.New(memstore.New(), &dedupe.Config{OnOutcome: func(_ context.Context, e dedupe.Event) { evs = append(evs, e) }})
	resp, _ := dedupe.SQS(g, nil, func(context.Context, events.SQSMessage) error { return nil })(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg("")}})
	if len(resp.BatchItemFailures) != 1 || len(evs) != 1 || !errors.Is(evs[0].Err, dedupe.ErrNoEventSource) {
		t.Errorf("message without a source: failures %v, events %+v; want it failed with one ErrNoEventSource event", resp.BatchItemFailures, evs)
	}
	for _, arn := range []string{"arn:aws:kinesis:eu-west-1:1:stream/a", "arn:aws:kinesis:eu-west-1:1:stream/b"} {
		runs := 0
		dedupe.Kinesis(g, nil, func(context.Context, events.KinesisEventRecord) error { runs++; return nil })(context.Background(), events.KinesisEvent{Records: []events.KinesisEventRecord{{EventID: "shard-1:1", EventSourceArn: arn, Kinesis: events.KinesisRecord{SequenceNumber: "1"}}}})
		if runs != 1 {
			t.Errorf("Kinesis stream %s: runs = %d, want 1 (its own scope)", arn, runs)
		}
	}
	for _, arn := range []string{"arn:aws:dynamodb:eu-west-1:1:table/a/stream/x", "arn:aws:dynamodb:eu-west-1:1:table/b/stream/x"} {
		runs := 0
		dedupe.DynamoDBStream(g, nil, func(context.Context, events.DynamoDBEventRecord) error { runs++; return nil })(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventID: "e1", EventSourceArn: arn, Change: events.DynamoDBStreamRecord{SequenceNumber: "1"}}}})
		if runs != 1 {
			t.Errorf("DynamoDB stream %s: runs = %d, want 1 (its own scope)", arn, runs)
		}
	}
}

// TestFingerprintBodyRefusalLogsOneEvent checks issue 17, case 7.
func TestFingerprintBodyRefusalLogsOneEvent(t *testing.T) {
	var evs []dedupe.Event
	g := dedupe.New(memstore.New(), &dedupe.Config{OnOutcome: func(_ context.Context, e dedupe.Event) { evs = append(evs, e) }})
	h := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{Fingerprint: func(_ any, b []byte) ([]byte, error) { return dedupe.JSONFields(b, "amount") }},
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
		})
	ev := v2WithContext(t, map[string]any{"userId": "u1"})
	ev.Body = "not json"
	r, _ := h(context.Background(), ev)
	if r.StatusCode != 400 || len(evs) != 1 || evs[0].Outcome != dedupe.OutcomeInvalidRequest || evs[0].Err == nil {
		t.Errorf("status %d, events %+v; want 400 and one invalid_request event with its error", r.StatusCode, evs)
	}
}

// TestDownstreamKeyPerLife checks issue 17, case 8: the downstream key is
// the same across a request's takeover, and new once the key's record
// expired and the same key string is a new request.
func TestDownstreamKeyPerLife(t *testing.T) {
	clk := newClock()
	g := dedupe.New(memstore.New(), &dedupe.Config{Now: clk.Now, DefaultLease: time.Minute, Retention: time.Hour})
	keyOf := func(err error) string {
		var dk string
		g.Do(context.Background(), dedupe.Call{Key: "pay-1", Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) {
			c, _ := dedupe.ClaimFrom(ctx)
			dk = c.DownstreamKey()
			return dedupe.Result{}, err
		})
		return dk
	}
	// First attempt: it "dies" holding the key (simulated by a panic-free
	// path: a lease that runs out while the record stays IN_PROGRESS).
	var first string
	func() {
		defer func() { recover() }()
		g.Do(context.Background(), dedupe.Call{Key: "pay-1", Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) {
			c, _ := dedupe.ClaimFrom(ctx)
			first = c.DownstreamKey()
			clk.Advance(2 * time.Minute) // the lease runs out while it runs
			// A retry takes the stranded key over meanwhile.
			if takeover := keyOf(nil); takeover != first {
				t.Errorf("takeover's downstream key %q, want the first attempt's %q", takeover, first)
			}
			return dedupe.Result{}, nil
		})
	}()
	if first == "" {
		t.Fatal("no downstream key")
	}
	clk.Advance(3 * time.Hour) // the record expires: a new life
	if next := keyOf(nil); next == "" || next == first {
		t.Errorf("downstream key of the next life = %q, want a new one (first %q)", next, first)
	}
}

// TestRouteRetentionBelowMinimumRefused checks the Retention bounds for a
// route's HTTPConfig.Retention: the request is refused, nothing runs.
func TestRouteRetentionBelowMinimumRefused(t *testing.T) {
	runs := 0
	h := dedupe.HTTPAPI(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{Retention: func(string) time.Duration { return time.Second }},
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
		})
	r, _ := h(context.Background(), v2WithContext(t, map[string]any{"userId": "u1"}))
	if r.StatusCode != 500 || runs != 0 {
		t.Errorf("status %d after %d runs, want 500 and none", r.StatusCode, runs)
	}
}

// TestMiddlewareHoldsOnTimeout checks that MinHold holds in Middleware:
// a handler that answered 504, or whose request context ended, keeps its
// key for its lease, and the retry's Retry-After is the lease's end.
func TestMiddlewareHoldsOnTimeout(t *testing.T) {
	for _, tt := range []struct {
		name    string
		handler func(w http.ResponseWriter, r *http.Request, cancel func())
	}{
		{"504", func(w http.ResponseWriter, _ *http.Request, _ func()) { w.WriteHeader(http.StatusGatewayTimeout) }},
		{"context ended", func(w http.ResponseWriter, _ *http.Request, cancel func()) {
			cancel()
			w.WriteHeader(http.StatusServiceUnavailable)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			g := dedupe.New(memstore.New(), &dedupe.Config{Now: clk.Now, MinHold: 10 * time.Minute})
			runs := 0
			var cancel context.CancelFunc
			mw := dedupe.Middleware(g, &dedupe.HTTPConfig{SharedScope: true})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				tt.handler(w, r, cancel)
			}))
			send := func() *httptest.ResponseRecorder {
				var ctx context.Context
				ctx, cancel = context.WithCancel(context.Background())
				defer cancel()
				req := httptest.NewRequestWithContext(ctx, "POST", "/pay", strings.NewReader(`{}`))
				req.Pattern = "POST /pay"
				req.Header.Set(dedupe.HeaderIdempotencyKey, "k1")
				w := httptest.NewRecorder()
				mw.ServeHTTP(w, req)
				return w
			}
			send()
			clk.Advance(time.Minute)
			w := send()
			if runs != 1 || w.Code != 409 || w.Header().Get("Retry-After") != "540" {
				t.Errorf("retry: %d Retry-After %q after %d runs; want 409, 540 (the hold's end), 1 run", w.Code, w.Header().Get("Retry-After"), runs)
			}
		})
	}
}

// TestMiddlewareRequireKeyNeedsARoute checks that RequireKeyOn cannot
// silently fail to match behind a router that sets no r.Pattern.
func TestMiddlewareRequireKeyNeedsARoute(t *testing.T) {
	runs := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs++; w.WriteHeader(201) })
	send := func(cfg *dedupe.HTTPConfig) int {
		req := httptest.NewRequest("POST", "/items/42", strings.NewReader(`{}`)) // no Pattern, no key
		w := httptest.NewRecorder()
		dedupe.Middleware(dedupe.New(memstore.New(), nil), cfg)(next).ServeHTTP(w, req)
		return w.Code
	}
	if got := send(&dedupe.HTTPConfig{SharedScope: true, RequireKey: dedupe.RequireKeyOn("POST /items/{id}")}); got != 500 || runs != 0 {
		t.Errorf("without r.Pattern: %d after %d runs, want 500 and no run", got, runs)
	}
	route := func(req any) string { return "POST /items/{id}" }
	if got := send(&dedupe.HTTPConfig{SharedScope: true, Route: route, RequireKey: dedupe.RequireKeyOn("POST /items/{id}")}); got != 400 || runs != 0 {
		t.Errorf("with HTTPConfig.Route: %d after %d runs, want 400 (key missing)", got, runs)
	}
}

// TestNilLoggerWritesStderr checks that with no Logger, a refusal reaches
// stderr (the function's log), and that a discard logger silences it.
func TestNilLoggerWritesStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	g := dedupe.New(memstore.New(), nil) // the default logger takes os.Stderr now
	os.Stderr = old
	h := dedupe.HTTPAPI(g, nil, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
	})
	h(context.Background(), v2WithContext(t, map[string]any{"role": "buyer"})) // no principal: refused
	w.Close()
	var buf bytes.Buffer
	io.Copy(&buf, r)
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "no principal") {
		t.Errorf("stderr = %q, want the refusal at WARN", buf.String())
	}
}
