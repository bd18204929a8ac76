package dedupeotel

import (
	"context"
	"strings"

	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Header names of the two trace-context formats a record can hold.
const (
	traceparentHeader = "traceparent"     // W3C Trace Context
	xrayHeader        = "X-Amzn-Trace-Id" // AWS X-Ray
)

// traceString returns the trace context of ctx's span as p writes it: the
// string the guard stores on the record (dedupe.WithTrace), or "" when the
// span has no valid context (a no-op provider). Only a traceparent or an
// X-Ray header is ever stored, the first of p's fields that is one: never
// what else p writes (baggage, which may carry personal data, tracestate,
// a vendor's header), which the replay could not link anyway.
func traceString(ctx context.Context, p propagation.TextMapPropagator) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	p.Inject(ctx, c)
	for _, f := range p.Fields() {
		if traceField(f) {
			if v := c.Get(f); v != "" {
				return v
			}
		}
	}
	return ""
}

// traceField reports whether f is a header of the two trace-context
// formats a record holds and parseTrace reads.
func traceField(f string) bool {
	return strings.EqualFold(f, traceparentHeader) || strings.EqualFold(f, xrayHeader)
}

// parseTrace returns the span context a record's trace string names: a W3C
// traceparent (what New's default propagator stores) or an X-Ray trace
// header (what the guard stores by default on Lambda with active tracing,
// and what xray.Propagator stores). It reports false for anything else,
// and for records written without one: they replay, unlinked.
func parseTrace(s string) (trace.SpanContext, bool) {
	var p propagation.TextMapPropagator
	var c propagation.MapCarrier
	switch {
	case strings.HasPrefix(s, "Root=") || strings.Contains(s, ";Root=") || strings.Contains(s, "Root=1-"):
		p, c = xray.Propagator{}, propagation.MapCarrier{xrayHeader: s}
	case strings.Count(s, "-") == 3:
		p, c = propagation.TraceContext{}, propagation.MapCarrier{traceparentHeader: s}
	default:
		return trace.SpanContext{}, false
	}
	sc := trace.SpanContextFromContext(p.Extract(context.Background(), c))
	return sc, sc.IsValid()
}

// link adds to span a link to the execution whose record answered ev.
func link(span trace.Span, ev dedupe.Event) {
	if ev.OriginalRequestID != "" {
		span.SetAttributes(AttrOriginalRequestID.String(ev.OriginalRequestID))
	}
	if ev.OriginalTrace == "" {
		return
	}
	sc, ok := parseTrace(ev.OriginalTrace)
	if !ok {
		return
	}
	l := trace.Link{SpanContext: sc}
	if ev.OriginalRequestID != "" {
		l.Attributes = append(l.Attributes, AttrOriginalRequestID.String(ev.OriginalRequestID))
	}
	span.AddLink(l)
}
