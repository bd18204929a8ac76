package dedupeotel

import (
	"context"

	"go.opentelemetry.io/otel"
)

// Flushed wraps a Lambda handler so that every flush runs, in order, after
// h returned and before the invocation ends: typically the
// TracerProvider's and the MeterProvider's ForceFlush. Lambda freezes the
// execution environment as soon as the handler returns, so spans and
// metrics still buffered would wait for the next invocation, or be lost
// with the environment. The flushes run even when the invocation's
// context was cancelled. A flush error never fails the invocation (lost
// telemetry must not make Lambda retry the work): it goes to OpenTelemetry's
// error handler (otel.Handle, set with otel.SetErrorHandler).
func Flushed[In, Out any](h func(context.Context, In) (Out, error), flush ...func(context.Context) error) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		out, err := h(ctx, in)
		fctx := context.WithoutCancel(ctx)
		for _, f := range flush {
			if ferr := f(fctx); ferr != nil {
				otel.Handle(ferr)
			}
		}
		return out, err
	}
}
