package dedupeotel_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupeotel"
)

// linkCases run on every backend: the record keeps the trace context of
// the execution whose result it holds, and a replay's span links to that
// execution's span.
func runLinks(t *testing.T, b backend) {
	t.Run(b.name+"/W3C", func(t *testing.T) {
		r := newRig(t)
		testReplayLinks(t, r, b.new(t), "00-", context.Background())
	})
	t.Run(b.name+"/XRayPropagator", func(t *testing.T) {
		r := &rig{spans: tracetest.NewSpanRecorder()}
		r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans), sdktrace.WithIDGenerator(xray.NewIDGenerator()))
		tel, err := dedupeotel.New(&dedupeotel.Config{TracerProvider: r.tp, MeterProvider: sdkmetric.NewMeterProvider(),
			Propagator: xray.Propagator{}})
		if err != nil {
			t.Fatal(err)
		}
		r.tel = tel
		testReplayLinks(t, r, b.new(t), "Root=1-", context.Background())
	})
	t.Run(b.name+"/CompositeWithBaggage", func(t *testing.T) {
		// The application's propagator, Baggage first: the record keeps
		// the traceparent only, never the caller's baggage.
		r := &rig{spans: tracetest.NewSpanRecorder()}
		r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
		tel, err := dedupeotel.New(&dedupeotel.Config{TracerProvider: r.tp, MeterProvider: sdkmetric.NewMeterProvider(),
			Propagator: propagation.NewCompositeTextMapPropagator(propagation.Baggage{}, propagation.TraceContext{})})
		if err != nil {
			t.Fatal(err)
		}
		r.tel = tel
		m, _ := baggage.NewMemberRaw("user.email", "alice@example.com")
		bag, _ := baggage.New(m)
		rec := testReplayLinks(t, r, b.new(t), "00-", baggage.ContextWithBaggage(context.Background(), bag))
		if strings.Contains(rec.Trace, "user.email") || strings.Contains(rec.Trace, "alice") || strings.Count(rec.Trace, "-") != 3 {
			t.Errorf("record's trace = %q; want the traceparent alone", rec.Trace)
		}
	})
	t.Run(b.name+"/OldRecord", func(t *testing.T) {
		r := newRig(t)
		store := b.new(t)
		g := dedupe.New(store, &dedupe.Config{Prefix: "old-" + rand.Text(), Tracer: r.tel})
		// A record written before records named their execution: no
		// request ID, no trace.
		key, now := g.Key("k"), time.Now()
		claim, err := store.Claim(context.Background(), dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "t",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
		if err != nil || !claim.Acquired {
			t.Fatal(claim, err)
		}
		if err := store.Complete(context.Background(), dedupe.CompleteRequest{Key: key, Token: "t", Now: now,
			ExpiresAt: now.Add(time.Hour), Result: dedupe.Result{StatusCode: 200, Body: []byte("old")}}); err != nil {
			t.Fatal(err)
		}
		out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, ok)
		if err != nil || !out.Replayed || string(out.Result.Body) != "old" {
			t.Fatalf("old record: %+v, %v", out, err)
		}
		span, _ := r.last(t)
		if len(span.Links()) != 0 {
			t.Errorf("links %v on a replay of a record without a trace", span.Links())
		}
		if got := attrs(span)[dedupeotel.AttrOutcome].AsString(); got != dedupe.OutcomeReplayed {
			t.Errorf("outcome %q", got)
		}
	})
	t.Run(b.name+"/LambdaXRayHeader", func(t *testing.T) {
		// A guard without this package stores the X-Ray header the Lambda
		// runtime puts in the context (aws-lambda-go's "x-amzn-trace-id"
		// value); a traced replay links to that segment.
		store := b.new(t)
		prefix := "xray-" + rand.Text()
		header := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
		lambdaCtx := context.WithValue(context.Background(), "x-amzn-trace-id", header) //nolint:staticcheck // the runtime's own key
		if _, err := dedupe.New(store, &dedupe.Config{Prefix: prefix}).Do(lambdaCtx, dedupe.Call{Key: "k", Fingerprint: "fp"}, ok); err != nil {
			t.Fatal(err)
		}
		r := newRig(t)
		out, err := dedupe.New(store, &dedupe.Config{Prefix: prefix, Tracer: r.tel}).Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, ok)
		if err != nil || !out.Replayed {
			t.Fatal(out, err)
		}
		span, _ := r.last(t)
		if len(span.Links()) != 1 {
			t.Fatalf("links = %v, want one to the X-Ray segment", span.Links())
		}
		sc := span.Links()[0].SpanContext
		if sc.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || sc.SpanID().String() != "53995c3f42cd8ad8" {
			t.Errorf("link to %v/%v, want the header's Root and Parent", sc.TraceID(), sc.SpanID())
		}
	})
}

// testReplayLinks executes a key in one "container" from the context
// base and replays it in another (two guards over one store, no cache),
// then checks the record's trace, the link and its request ID, and
// returns the record.
func testReplayLinks(t *testing.T, r *rig, store dedupe.Store, format string, base context.Context) dedupe.Record {
	t.Helper()
	prefix := "link-" + rand.Text()
	first := dedupe.New(store, &dedupe.Config{Prefix: prefix, Tracer: r.tel})
	second := dedupe.New(store, &dedupe.Config{Prefix: prefix, Tracer: r.tel})
	ctx := dedupe.WithRequestID(base, "req-original")
	if _, err := first.Do(ctx, dedupe.Call{Key: "order-1", Fingerprint: "fp"}, ok); err != nil {
		t.Fatal(err)
	}
	run, _ := r.last(t)
	rec, err := store.Get(context.Background(), first.Key("order-1"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rec.Trace, format) || rec.RequestID != "req-original" {
		t.Fatalf("record names %q %q, want a %q trace and req-original", rec.RequestID, rec.Trace, format)
	}
	out, err := second.Do(dedupe.WithRequestID(context.Background(), "req-retry"), dedupe.Call{Key: "order-1", Fingerprint: "fp"}, ok)
	if err != nil || !out.Replayed {
		t.Fatal(out, err)
	}
	replay, _ := r.last(t)
	if replay.SpanContext().SpanID() == run.SpanContext().SpanID() {
		t.Fatal("no replay span")
	}
	links := replay.Links()
	if len(links) != 1 {
		t.Fatalf("replay links = %v, want one", links)
	}
	want := run.SpanContext()
	got := links[0].SpanContext
	if got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() {
		t.Errorf("link to %v/%v, want the run's span %v/%v", got.TraceID(), got.SpanID(), want.TraceID(), want.SpanID())
	}
	if !hasAttr(links[0].Attributes, "req-original") || attrs(replay)[dedupeotel.AttrOriginalRequestID].AsString() != "req-original" {
		t.Errorf("link attributes %v, span %v: want dedupe.original_request_id req-original", links[0].Attributes, replay.Attributes())
	}
	if attrs(replay)[dedupeotel.AttrInvocationID].AsString() != "req-retry" {
		t.Errorf("replay's faas.invocation_id = %v", attrs(replay)[dedupeotel.AttrInvocationID])
	}
	return rec
}

// fieldsOnly is a propagator that writes its own headers only.
type fieldsOnly []string

func (f fieldsOnly) Inject(_ context.Context, c propagation.TextMapCarrier) {
	for _, k := range f {
		c.Set(k, "v")
	}
}
func (fieldsOnly) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context {
	return ctx
}
func (f fieldsOnly) Fields() []string { return f }

// TestNewRefusesPropagator: a propagator that writes no traceparent and
// no X-Ray header (Baggage alone, B3) is refused at construction; with
// either among its fields it is accepted.
func TestNewRefusesPropagator(t *testing.T) {
	tests := []struct {
		name string
		p    propagation.TextMapPropagator
		ok   bool
	}{
		{"baggage alone", propagation.Baggage{}, false},
		{"B3", fieldsOnly{"x-b3-traceid", "x-b3-spanid"}, false},
		{"vendor header", fieldsOnly{"uber-trace-id"}, false},
		{"trace context", propagation.TraceContext{}, true},
		{"x-ray", xray.Propagator{}, true},
		{"baggage and trace context", propagation.NewCompositeTextMapPropagator(propagation.Baggage{}, propagation.TraceContext{}), true},
		{"B3 and x-ray", propagation.NewCompositeTextMapPropagator(fieldsOnly{"x-b3-traceid"}, xray.Propagator{}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dedupeotel.New(&dedupeotel.Config{TracerProvider: sdktrace.NewTracerProvider(), MeterProvider: sdkmetric.NewMeterProvider(), Propagator: tt.p})
			if tt.ok != (err == nil) || (!tt.ok && !errors.Is(err, dedupeotel.ErrPropagator)) {
				t.Errorf("New = %v; want accepted %v (ErrPropagator otherwise)", err, tt.ok)
			}
		})
	}
}

// hasAttr reports whether kvs carry dedupe.original_request_id = id.
func hasAttr(kvs []attribute.KeyValue, id string) bool {
	for _, kv := range kvs {
		if kv.Key == dedupeotel.AttrOriginalRequestID && kv.Value.AsString() == id {
			return true
		}
	}
	return false
}

func TestReplayLinksMemstore(t *testing.T) { runLinks(t, memBackend()) }

// TestReplayLinksDynamoDB: the done-when test, through dynamostore on
// dynalite.
func TestReplayLinksDynamoDB(t *testing.T) { runLinks(t, dynamoBackend(t)) }
