// Package dedupeotel traces and measures a dedupe.Guard with
// OpenTelemetry, so that the core package keeps no OpenTelemetry
// dependency.
//
// A Telemetry is both a dedupe.Tracer and a dedupe.Emitter:
//
//	tel, err := dedupeotel.New(&dedupeotel.Config{})
//	guard := dedupe.New(store, &dedupe.Config{Tracer: tel, Metrics: tel})
//
// Every guarded request or message then gets a span ("dedupe" or "dedupe
// POST /payments") with its outcome, the key's KeyRef (the key itself only
// with Config.LogKeys), the route, whether it was replayed or cached, the
// store calls and the store and handler latencies; child spans
// "dedupe.claim", "dedupe.handler" and "dedupe.complete" (or
// "dedupe.release") show where the time went. The function runs inside
// the span, so its own spans are the span's children. A replay or a 409
// leaves the status unset; a store failure, a result that was not
// recorded, and failed work set it to Error.
//
// The metrics are those of dedupe.EMF, through the OpenTelemetry meter:
// the counter dedupe.outcome and the histograms dedupe.store.duration,
// dedupe.handler.duration and dedupe.wait.duration, with the attributes
// dedupe.outcome and http.route only (no keys, so cardinality stays
// bounded). See docs/opentelemetry.md.
package dedupeotel
