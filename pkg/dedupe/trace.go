package dedupe

import "context"

// Tracer traces guarded calls; pkg/dedupe/dedupeotel implements it over
// OpenTelemetry, so that this package needs no tracing dependency.
type Tracer interface {
	// Start is called as a guarded call begins (Guard.Do, an HTTP
	// adapter's guarded request, a batch message), before its first
	// store call. The call then runs with the context Start returns:
	// the function, the store calls and the emission of its Event see
	// it. End is called exactly once, after the call's Event was logged
	// and emitted, with that context and Event (also when the function
	// panicked). A request refused before any claim (a missing key, an
	// oversized body) gets a Start and an End at its emission. The
	// function it returns is that End.
	Start(ctx context.Context) (context.Context, func(ctx context.Context, ev Event))
}

// startTrace starts the trace of one guarded call, whose Event is ev.
func (g *Guard) startTrace(ctx context.Context, ev *Event) context.Context {
	if g.cfg.Tracer == nil {
		return ctx
	}
	ctx, end := g.cfg.Tracer.Start(ctx)
	ev.trace = &end
	return ctx
}

// endTrace ends the trace of ev, at its emission; an event that had no
// start (a refusal before the guard) starts and ends here.
func (g *Guard) endTrace(ctx context.Context, ev Event) {
	switch {
	case ev.trace != nil:
		(*ev.trace)(ctx, ev)
	case g.cfg.Tracer != nil:
		ctx, end := g.cfg.Tracer.Start(ctx)
		end(ctx, ev)
	}
}
