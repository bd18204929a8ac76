package dedupeotel_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupeotel"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// rig is a Telemetry over SDK providers whose spans and metrics the test
// reads: an in-memory span recorder and a manual metric reader.
type rig struct {
	tel    *dedupeotel.Telemetry
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	tel, err := dedupeotel.New(&dedupeotel.Config{TracerProvider: r.tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	r.tel = tel
	return r
}

// last returns the last ended span named like a call span ("dedupe…"
// without a dot) and its children.
func (r *rig) last(t *testing.T) (sdktrace.ReadOnlySpan, map[string]sdktrace.ReadOnlySpan) {
	t.Helper()
	ended := r.spans.Ended()
	for i := len(ended) - 1; i >= 0; i-- {
		s := ended[i]
		if s.Name() == "dedupe" || len(s.Name()) > 7 && s.Name()[:7] == "dedupe " {
			kids := map[string]sdktrace.ReadOnlySpan{}
			for _, c := range ended {
				if c.Parent().SpanID() == s.SpanContext().SpanID() {
					kids[c.Name()] = c
				}
			}
			return s, kids
		}
	}
	t.Fatal("no dedupe span ended")
	return nil, nil
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// faultStore fails the store calls it is told to, as a transient failure.
type faultStore struct {
	dedupe.Store
	claim, complete bool
}

var errDown = fmt.Errorf("injected: %w", dedupe.ErrStoreUnavailable)

func (f *faultStore) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if f.claim {
		return dedupe.ClaimResult{}, errDown
	}
	return f.Store.Claim(ctx, req)
}

func (f *faultStore) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	if f.complete {
		return errDown
	}
	return f.Store.Complete(ctx, req)
}

// backend makes stores for the outcome table.
type backend struct {
	name string
	new  func(t *testing.T) dedupe.Store
}

func memBackend() backend {
	return backend{"memstore", func(*testing.T) dedupe.Store { return memstore.New() }}
}

// dynamoBackend runs on the test endpoint (AWS_ENDPOINT_URL_DYNAMODB, as
// build/bin/withdynalite sets it): skipped without one, failed in CI.
func dynamoBackend(t *testing.T) backend {
	t.Helper()
	client := dynamotest.Client(t)
	table := dynamotest.CreateTables(t, client, "IdempotencyTable")["IdempotencyTable"]
	return backend{"dynamostore", func(t *testing.T) dedupe.Store {
		s, err := dynamostore.New(client, dynamostore.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}
}

func ok(context.Context) (dedupe.Result, error) {
	return dedupe.Result{StatusCode: 200, Body: []byte("done")}, nil
}

// outcomeCases drive one guarded call per outcome; the call under test
// is the last one each makes.
var outcomeCases = []struct {
	name     string
	store    faultStore
	run      func(ctx context.Context, g *dedupe.Guard, s dedupe.Store, key string) error
	outcome  string
	replayed bool
	err      bool
	children map[string]codes.Code // child span name -> status
}{
	{"executed", faultStore{}, func(ctx context.Context, g *dedupe.Guard, _ dedupe.Store, key string) error {
		_, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, ok)
		return err
	}, dedupe.OutcomeExecuted, false, false,
		map[string]codes.Code{"dedupe.claim": codes.Unset, "dedupe.handler": codes.Unset, "dedupe.complete": codes.Unset}},
	{"replayed", faultStore{}, func(ctx context.Context, g *dedupe.Guard, _ dedupe.Store, key string) error {
		g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, ok)
		_, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, ok)
		return err
	}, dedupe.OutcomeReplayed, true, false, map[string]codes.Code{"dedupe.claim": codes.Unset}},
	{"in_progress", faultStore{}, func(ctx context.Context, g *dedupe.Guard, s dedupe.Store, key string) error {
		now := time.Now()
		s.Claim(ctx, dedupe.ClaimRequest{Key: g.Key(key), Fingerprint: "fp", Token: "other",
			Now: now, LeaseUntil: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)})
		_, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, ok)
		return err
	}, dedupe.OutcomeInProgress, false, false, map[string]codes.Code{"dedupe.claim": codes.Unset}},
	{"mismatch", faultStore{}, func(ctx context.Context, g *dedupe.Guard, _ dedupe.Store, key string) error {
		g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, ok)
		_, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "other fp"}, ok)
		return err
	}, dedupe.OutcomeMismatch, false, false, map[string]codes.Code{"dedupe.claim": codes.Unset}},
	{"released", faultStore{}, func(ctx context.Context, g *dedupe.Guard, _ dedupe.Store, key string) error {
		_, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { return dedupe.Result{}, errors.New("boom") })
		return err
	}, dedupe.OutcomeReleased, false, true,
		map[string]codes.Code{"dedupe.claim": codes.Unset, "dedupe.handler": codes.Error, "dedupe.release": codes.Unset}},
	{"store_error", faultStore{claim: true}, func(ctx context.Context, g *dedupe.Guard, _ dedupe.Store, key string) error {
		_, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, ok)
		return err
	}, dedupe.OutcomeStoreError, false, true, map[string]codes.Code{"dedupe.claim": codes.Error}},
	{"not_stored", faultStore{complete: true}, func(ctx context.Context, g *dedupe.Guard, _ dedupe.Store, key string) error {
		_, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, ok)
		return err
	}, dedupe.OutcomeNotStored, false, true,
		map[string]codes.Code{"dedupe.claim": codes.Unset, "dedupe.handler": codes.Unset, "dedupe.complete": codes.Error}},
	{"invalid_key", faultStore{}, func(ctx context.Context, g *dedupe.Guard, _ dedupe.Store, _ string) error {
		_, err := g.Do(ctx, dedupe.Call{Key: "", Fingerprint: "fp"}, ok)
		return err
	}, dedupe.OutcomeInvalidKey, false, false, map[string]codes.Code{}},
}

func runOutcomes(t *testing.T, b backend) {
	for _, tc := range outcomeCases {
		t.Run(b.name+"/"+tc.name, func(t *testing.T) {
			r := newRig(t)
			fs := tc.store
			fs.Store = b.new(t)
			g := dedupe.New(&fs, &dedupe.Config{Prefix: "otel-" + rand.Text(), Tracer: r.tel, Metrics: r.tel})
			key := "order-" + rand.Text()
			err := tc.run(context.Background(), g, fs.Store, key)
			if (err != nil) != tc.err && tc.outcome != dedupe.OutcomeInProgress && tc.outcome != dedupe.OutcomeMismatch && tc.outcome != dedupe.OutcomeInvalidKey {
				t.Fatalf("err = %v", err)
			}
			span, kids := r.last(t)
			a := attrs(span)
			if got := a[dedupeotel.AttrOutcome].AsString(); got != tc.outcome {
				t.Fatalf("outcome = %q, want %q", got, tc.outcome)
			}
			if got := a[dedupeotel.AttrReplayed].AsBool(); got != tc.replayed {
				t.Errorf("replayed = %v, want %v", got, tc.replayed)
			}
			wantKey := dedupe.KeyRef(g.Key(key))
			if tc.outcome == dedupe.OutcomeInvalidKey {
				wantKey = ""
			}
			if got := a[dedupeotel.AttrKey].AsString(); got != wantKey {
				t.Errorf("dedupe.key = %q, want the KeyRef %q", got, wantKey)
			}
			for _, kv := range span.Attributes() {
				if kv.Value.Type() == attribute.STRING && key != "" && contains(kv.Value.AsString(), key) {
					t.Errorf("attribute %s carries the key: %q", kv.Key, kv.Value.AsString())
				}
			}
			if _, has := a[dedupeotel.AttrStoreCalls]; !has {
				t.Error("no dedupe.store.calls")
			}
			wantCode := codes.Unset
			if tc.err {
				wantCode = codes.Error
			}
			if got := span.Status().Code; got != wantCode {
				t.Errorf("status = %v (%q), want %v", got, span.Status().Description, wantCode)
			}
			if len(kids) != len(tc.children) {
				t.Errorf("children = %v, want %v", names(kids), tc.children)
			}
			for name, code := range tc.children {
				k, has := kids[name]
				switch {
				case !has:
					t.Errorf("no child span %s (have %v)", name, names(kids))
				case k.Status().Code != code:
					t.Errorf("%s status = %v, want %v", name, k.Status().Code, code)
				case k.StartTime().Before(span.StartTime()) || k.EndTime().After(span.EndTime()):
					t.Errorf("%s [%v, %v] outside its parent [%v, %v]", name, k.StartTime(), k.EndTime(), span.StartTime(), span.EndTime())
				}
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func names(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	return out
}

func TestOutcomeSpansMemstore(t *testing.T) { runOutcomes(t, memBackend()) }

func TestOutcomeSpansDynamoDB(t *testing.T) { runOutcomes(t, dynamoBackend(t)) }

// TestFunctionSpansNest: the function runs inside the call's span, so the
// spans it starts are the call's children.
func TestFunctionSpansNest(t *testing.T) {
	r := newRig(t)
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "nest", Tracer: r.tel})
	var inner trace.SpanContext
	g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) {
		_, s := r.tp.Tracer("app").Start(ctx, "charge")
		inner = s.SpanContext()
		s.End()
		return dedupe.Result{}, nil
	})
	span, _ := r.last(t)
	for _, s := range r.spans.Ended() {
		if s.SpanContext().SpanID() == inner.SpanID() && s.Parent().SpanID() != span.SpanContext().SpanID() {
			t.Fatalf("the function's span has parent %v, want the call's span %v", s.Parent().SpanID(), span.SpanContext().SpanID())
		}
	}
}

// TestHTTPSpan: an HTTP request's span is named by its route and carries
// the route and the status answered; a request refused before the guard
// (no key on a route that requires one) gets its span too.
func TestHTTPSpan(t *testing.T) {
	r := newRig(t)
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "http", Tracer: r.tel, Metrics: r.tel})
	h := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{SharedScope: true, RequireKey: func(string) bool { return true }},
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: "{}"}, nil
		})
	req := events.APIGatewayV2HTTPRequest{RouteKey: "POST /payments", Headers: map[string]string{"idempotency-key": "k1"}, Body: "{}"}
	req.RequestContext.HTTP.Method = "POST"
	req.RequestContext.APIID, req.RequestContext.Stage = "api", "prod"
	for _, tc := range []struct {
		headers map[string]string
		outcome string
		status  int
	}{
		{map[string]string{"idempotency-key": "k1"}, dedupe.OutcomeExecuted, 201},
		{map[string]string{"idempotency-key": "k1"}, dedupe.OutcomeReplayed, 201},
		{map[string]string{}, dedupe.OutcomeMissingKey, 400},
	} {
		req.Headers = tc.headers
		if _, err := h(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		span, _ := r.last(t)
		a := attrs(span)
		if span.Name() != "dedupe POST /payments" || a[dedupeotel.AttrRoute].AsString() != "POST /payments" ||
			a[dedupeotel.AttrOutcome].AsString() != tc.outcome || a[dedupeotel.AttrStatusCode].AsInt64() != int64(tc.status) ||
			span.Status().Code != codes.Unset {
			t.Errorf("span %q %v status %v, want %s %d", span.Name(), span.Attributes(), span.Status(), tc.outcome, tc.status)
		}
	}
	if n := len(r.spans.Ended()); n != 3+3+1 { // executed: call+3; replay: call+claim; refusal: call
		t.Errorf("%d spans ended, want 7", n)
	}
}

// TestPanicEndsSpan: a panicking function is released and re-panics; its
// call span still ends, released and Error.
func TestPanicEndsSpan(t *testing.T) {
	r := newRig(t)
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "panic", Tracer: r.tel, Metrics: r.tel})
	func() {
		defer func() {
			if recover() == nil {
				t.Error("no panic")
			}
		}()
		g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { panic("boom") })
	}()
	span, _ := r.last(t)
	if got := attrs(span)[dedupeotel.AttrOutcome].AsString(); got != dedupe.OutcomeReleased || span.Status().Code != codes.Error {
		t.Errorf("outcome %q status %v, want released, Error", got, span.Status())
	}
	if n := len(r.spans.Started()) - len(r.spans.Ended()); n != 0 {
		t.Errorf("%d spans never ended", n)
	}
}

// TestBatchSpanPerMessage: an SQS batch gets one call span per message,
// each a child of the invocation's span; the redelivered message's span is
// a replay linked to the first delivery's.
func TestBatchSpanPerMessage(t *testing.T) {
	r := newRig(t)
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "sqs", Tracer: r.tel})
	ctx, invocation := r.tp.Tracer("lambda").Start(context.Background(), "invocation")
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: `{"n":1}`}, {MessageId: "m2", Body: `{"n":2}`}, {MessageId: "m1", Body: `{"n":1}`},
	}}
	for i := range ev.Records {
		ev.Records[i].EventSourceARN = "arn:aws:sqs:eu-west-1:123456789012:orders"
	}
	resp, _ := dedupe.SQS(g, nil, func(context.Context, events.SQSMessage) error { return nil })(ctx, ev)
	invocation.End()
	if len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp)
	}
	var calls []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == "dedupe" {
			calls = append(calls, s)
		}
	}
	if len(calls) != 3 {
		t.Fatalf("%d call spans, want one per message", len(calls))
	}
	for _, s := range calls {
		if s.Parent().SpanID() != invocation.SpanContext().SpanID() {
			t.Errorf("call span's parent %v, want the invocation", s.Parent().SpanID())
		}
	}
	if o := attrs(calls[2])[dedupeotel.AttrOutcome].AsString(); o != dedupe.OutcomeReplayed ||
		len(calls[2].Links()) != 1 || calls[2].Links()[0].SpanContext.SpanID() != calls[0].SpanContext().SpanID() {
		t.Errorf("redelivery: outcome %q links %v, want replayed, linked to %v", o, calls[2].Links(), calls[0].SpanContext().SpanID())
	}
}
