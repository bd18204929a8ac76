package dedupeotel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupeotel"

// Attribute keys set on spans and metrics. Where the OpenTelemetry
// semantic conventions have a name (http.route, http.response.status_code,
// faas.invocation_id, error.type), it is used.
const (
	AttrOutcome        = attribute.Key("dedupe.outcome")
	AttrKey            = attribute.Key("dedupe.key")
	AttrReplayed       = attribute.Key("dedupe.replayed")
	AttrCached         = attribute.Key("dedupe.cached")
	AttrStoreCalls     = attribute.Key("dedupe.store.calls")
	AttrStoreLatency   = attribute.Key("dedupe.store.latency_ms")
	AttrHandlerLatency = attribute.Key("dedupe.handler.latency_ms")
	AttrWaited         = attribute.Key("dedupe.waited_ms")
	AttrRoute          = attribute.Key("http.route")
	AttrStatusCode     = attribute.Key("http.response.status_code")
	AttrInvocationID   = attribute.Key("faas.invocation_id")
	AttrErrorType      = attribute.Key("error.type")
	// AttrOriginalRequestID names, on a duplicate's span and on its link,
	// the request ID of the execution whose record answered it.
	AttrOriginalRequestID = attribute.Key("dedupe.original_request_id")
)

// Metric names.
const (
	MetricOutcome         = "dedupe.outcome"
	MetricStoreDuration   = "dedupe.store.duration"
	MetricHandlerDuration = "dedupe.handler.duration"
	MetricWaitDuration    = "dedupe.wait.duration"
)

// durationBuckets are the histograms' bucket boundaries, in seconds: from
// a warm-cache store call to Lambda's 900 s limit.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900}

// Config configures a Telemetry. The zero value uses the global providers
// (otel.GetTracerProvider, otel.GetMeterProvider).
type Config struct {
	// TracerProvider makes the tracer. Nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter. Nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator writes the span context of each guarded call into the
	// record it claims and completes (dedupe.WithTrace, Record.Trace), so
	// that a later duplicate's span links to it. Nil means W3C Trace
	// Context (a traceparent); xray.Propagator{} (go.opentelemetry.io/
	// contrib/propagators/aws/xray) stores an X-Ray trace header instead.
	// Either format, and the X-Ray header the guard stores without this
	// package, is linked when read back. A composite propagator (the
	// application's, with Baggage) may be given: the record stores only
	// the first traceparent or X-Ray header among its fields, never
	// baggage, tracestate or any other field. New refuses a propagator
	// that writes neither (ErrPropagator).
	Propagator propagation.TextMapPropagator
}

// Telemetry traces and measures guarded calls: set it as both
// dedupe.Config.Tracer and dedupe.Config.Metrics. It is safe for
// concurrent use.
type Telemetry struct {
	prop    propagation.TextMapPropagator
	tracer  trace.Tracer
	outcome metric.Int64Counter
	store   metric.Float64Histogram
	handler metric.Float64Histogram
	wait    metric.Float64Histogram
}

var (
	_ dedupe.Tracer  = (*Telemetry)(nil)
	_ dedupe.Emitter = (*Telemetry)(nil)
)

// ErrPropagator reports a Config.Propagator that writes no trace
// context a record can hold: neither a traceparent (propagation.
// TraceContext) nor an X-Ray header (xray.Propagator), alone or in a
// composite. Its span contexts could not be stored, and a replay could
// not link to them.
var ErrPropagator = errors.New("dedupeotel: Config.Propagator writes neither traceparent nor X-Amzn-Trace-Id")

// New returns a Telemetry over cfg's providers (nil cfg means the zero
// Config). It fails when the meter refuses an instrument, and with
// ErrPropagator for a propagator it cannot store.
func New(cfg *Config) (*Telemetry, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.Propagator == nil {
		c.Propagator = propagation.TraceContext{}
	}
	if !slices.ContainsFunc(c.Propagator.Fields(), traceField) {
		return nil, fmt.Errorf("%w (its fields: %v): use propagation.TraceContext{} or xray.Propagator{}, alone or in a composite with the others", ErrPropagator, c.Propagator.Fields())
	}
	t := &Telemetry{prop: c.Propagator, tracer: c.TracerProvider.Tracer(ScopeName)}
	m := c.MeterProvider.Meter(ScopeName)
	var errs [4]error
	t.outcome, errs[0] = m.Int64Counter(MetricOutcome,
		metric.WithDescription("Guarded requests and messages, by outcome."),
		metric.WithUnit("{request}"))
	t.store, errs[1] = m.Float64Histogram(MetricStoreDuration,
		metric.WithDescription("Time a guarded request spent in the store, all its store calls together."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	t.handler, errs[2] = m.Float64Histogram(MetricHandlerDuration,
		metric.WithDescription("Time the guarded function ran."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	t.wait, errs[3] = m.Float64Histogram(MetricWaitDuration,
		metric.WithDescription("Time a duplicate waited for the first request (dedupe.Config.Wait)."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("dedupeotel: instruments: %w", err)
	}
	return t, nil
}

// Emit implements dedupe.Emitter: it counts ev's outcome and records its
// latencies. The store duration is recorded when the request made store
// calls, the handler duration when the function ran, the wait when a
// duplicate waited: their sums equal those of dedupe.EMF's StoreLatency
// and HandlerLatency, while requests without the latency (a replay has
// no handler time) do not drag the percentiles to zero.
func (t *Telemetry) Emit(ctx context.Context, ev dedupe.Event) {
	var set attribute.Set
	if ev.Route != "" {
		set = attribute.NewSet(AttrOutcome.String(ev.Outcome), AttrRoute.String(ev.Route))
	} else {
		set = attribute.NewSet(AttrOutcome.String(ev.Outcome))
	}
	attrs := metric.WithAttributeSet(set)
	t.outcome.Add(ctx, 1, attrs)
	if ev.StoreCalls > 0 {
		t.store.Record(ctx, ev.StoreLatency.Seconds(), attrs)
	}
	if !ev.HandlerStart.IsZero() {
		t.handler.Record(ctx, ev.HandlerLatency.Seconds(), attrs)
	}
	if ev.Waited > 0 {
		t.wait.Record(ctx, ev.Waited.Seconds(), attrs)
	}
}

// Start implements dedupe.Tracer: it starts the call's span, which the
// returned end finishes with the call's Event, and puts the span's trace
// context in ctx (dedupe.WithTrace) for the guard to store on the record.
func (t *Telemetry) Start(ctx context.Context) (context.Context, func(context.Context, dedupe.Event)) {
	start := time.Now()
	ctx, span := t.tracer.Start(ctx, "dedupe", trace.WithTimestamp(start))
	if s := traceString(ctx, t.prop); s != "" {
		ctx = dedupe.WithTrace(ctx, s)
	}
	return ctx, func(ctx context.Context, ev dedupe.Event) { t.end(ctx, span, start, ev) }
}

// end finishes span, started at start, with ev.
func (t *Telemetry) end(ctx context.Context, span trace.Span, start time.Time, ev dedupe.Event) {
	now := time.Now()
	if ev.Route != "" {
		span.SetName("dedupe " + ev.Route)
	}
	if span.IsRecording() {
		span.SetAttributes(attributes(ev)...)
		link(span, ev)
		t.phases(ctx, start, now, ev)
	}
	if failed(ev) {
		span.SetAttributes(AttrErrorType.String(ev.Outcome))
		span.SetStatus(codes.Error, describe(ev))
	}
	span.End(trace.WithTimestamp(now))
}

// attributes returns the span attributes of ev.
func attributes(ev dedupe.Event) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 12)
	a = append(a,
		AttrOutcome.String(ev.Outcome),
		AttrReplayed.Bool(ev.Outcome == dedupe.OutcomeReplayed || ev.Outcome == dedupe.OutcomeWaited),
		AttrCached.Bool(ev.Cached),
		AttrStoreCalls.Int(ev.StoreCalls),
		AttrStoreLatency.Float64(ms(ev.StoreLatency)),
		AttrHandlerLatency.Float64(ms(ev.HandlerLatency)))
	if ev.Key != "" {
		a = append(a, AttrKey.String(ev.Key)) // a KeyRef unless Config.LogKeys
	}
	if ev.Route != "" {
		a = append(a, AttrRoute.String(ev.Route))
	}
	if ev.Status != 0 {
		a = append(a, AttrStatusCode.Int(ev.Status))
	}
	if ev.RequestID != "" {
		a = append(a, AttrInvocationID.String(ev.RequestID))
	}
	if ev.Waited > 0 {
		a = append(a, AttrWaited.Float64(ms(ev.Waited)))
	}
	return a
}

// phases records the claim, the handler and the completion as child spans
// of the call's span (in ctx), from the timestamps ev carries: the claim
// from the call's start to the handler's (or the end, for a duplicate),
// then the handler, then the completion or release to the end.
func (t *Telemetry) phases(ctx context.Context, start, end time.Time, ev dedupe.Event) {
	if ev.StoreCalls == 0 {
		return // answered from the cache, or refused before any claim
	}
	claimEnd := end
	if !ev.HandlerStart.IsZero() {
		claimEnd = ev.HandlerStart
	}
	t.child(ctx, "dedupe.claim", start, claimEnd, ev.Outcome == dedupe.OutcomeStoreError, ev)
	if ev.HandlerStart.IsZero() {
		return
	}
	handlerEnd := ev.HandlerStart.Add(ev.HandlerLatency)
	handlerFailed := ev.Outcome == dedupe.OutcomeReleased || ev.Outcome == dedupe.OutcomeHeld
	t.child(ctx, "dedupe.handler", ev.HandlerStart, handlerEnd, handlerFailed, ev)
	switch ev.Outcome {
	case dedupe.OutcomeReleased:
		t.child(ctx, "dedupe.release", handlerEnd, end, false, ev)
	case dedupe.OutcomeExecuted, dedupe.OutcomeNotStored, dedupe.OutcomeLeaseLost, dedupe.OutcomeTooLarge:
		t.child(ctx, "dedupe.complete", handlerEnd, end, ev.Outcome != dedupe.OutcomeExecuted, ev)
	}
}

// child records one finished child span.
func (t *Telemetry) child(ctx context.Context, name string, start, end time.Time, failed bool, ev dedupe.Event) {
	_, s := t.tracer.Start(ctx, name, trace.WithTimestamp(start))
	if failed {
		s.SetStatus(codes.Error, describe(ev))
	}
	s.End(trace.WithTimestamp(end))
}

// failed reports whether ev's outcome is an error of the service: a store
// failure, work that failed or whose result was not recorded, a 5xx. A
// replay, a 409, a 422 or a refused request (4xx) is not.
func failed(ev dedupe.Event) bool {
	switch ev.Outcome {
	case dedupe.OutcomeStoreError, dedupe.OutcomeNotStored, dedupe.OutcomeLeaseLost,
		dedupe.OutcomeReleased, dedupe.OutcomeHeld:
		return true
	case dedupe.OutcomeTooLarge:
		return ev.Err != nil // the result was not kept; a duplicate's 409 is no error
	}
	return ev.Status >= 500
}

// describe returns the status description of ev: its error, which names
// keys only by KeyRef, or its outcome.
func describe(ev dedupe.Event) string {
	if ev.Err != nil {
		return ev.Err.Error()
	}
	return ev.Outcome
}

// ms returns d in milliseconds, to the microsecond, as dedupe.EMF does.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
