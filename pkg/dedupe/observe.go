package dedupe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Outcomes of a guarded request, as Event.Outcome reports them: one per
// request or message.
const (
	// OutcomeExecuted: the function ran and its result was recorded.
	OutcomeExecuted = "executed"
	// OutcomeReplayed: a duplicate got the stored result; nothing ran.
	OutcomeReplayed = "replayed"
	// OutcomeWaited: a duplicate waited for the first request to finish
	// (Config.Wait) and got its result; nothing ran.
	OutcomeWaited = "waited"
	// OutcomeInProgress: a duplicate found the key in flight, or the
	// store saw another writer of the key (409).
	OutcomeInProgress = "in_progress"
	// OutcomeMismatch: the key was used with a different request (422).
	OutcomeMismatch = "mismatch"
	// OutcomeMissingKey: a route that requires a key got none (400).
	OutcomeMissingKey = "missing_key"
	// OutcomeInvalidKey: the key was malformed or repeated (400).
	OutcomeInvalidKey = "invalid_key"
	// OutcomeInvalidRequest: the request was refused before any claim:
	// a body over the limit or unreadable (413, 400), no principal
	// while SharedScope is off (500), or, with HTTPConfig.ALBAuth, user
	// claims that could not be verified (401) or whose key could not be
	// fetched (503).
	OutcomeInvalidRequest = "invalid_request"
	// OutcomeStoreError: the store failed on the claim (503, or 500 when
	// permanent), or found the key completed but could not read its
	// result now (ErrResultUnreadable, 503); with FailOpen the function
	// ran unguarded, only when no answer was received
	// (ErrStoreUnavailable).
	OutcomeStoreError = "store_error"
	// OutcomeReleased: the function failed, panicked or returned a result
	// Keep rejected; its lease was ended so a retry runs again.
	OutcomeReleased = "released"
	// OutcomeLeaseLost: the function ran, but another owner had taken the
	// key over by the time it finished; its result was not recorded.
	OutcomeLeaseLost = "lease_lost"
	// OutcomeNotStored: the function ran, but its result could not be
	// recorded (the store failed, or the result could not be encoded).
	OutcomeNotStored = "not_stored"
	// OutcomeTooLarge: the result was too large to keep (or the store
	// could not keep it elsewhere), or a duplicate asked for such a
	// result or one that is lost (409 response unavailable).
	OutcomeTooLarge = "too_large"
	// OutcomeHeld: the function gave up when its context ended
	// (Config.MinHold), so its outcome is unknown; the key is held for
	// the rest of its lease instead of released.
	OutcomeHeld = "held"

	// RouteNone stands for the path in Event.Route when a request
	// matched no route template: a Function URL, or net/http without a
	// ServeMux pattern.
	RouteNone = "(no route)"
)

// Event describes one guarded request or message: what happened, and what
// it cost. Every guarded call produces exactly one, which the guard logs
// (Config.Logger), hands to Config.Metrics and to Config.OnOutcome.
type Event struct {
	// Outcome is one of the Outcome* constants.
	Outcome string
	// Key names the stored key by its KeyRef; the key itself only when
	// Config.LogKeys is set.
	Key string
	// RequestID is the Lambda request ID (the correlation ID), when the
	// context carries one.
	RequestID string
	// OriginalRequestID is the request ID stored on the record a
	// duplicate was answered from (Record.RequestID): on a replay, the
	// execution whose result was replayed; on a 409 or 422, the owner
	// in flight or the execution that completed. Empty otherwise, and
	// for records written before the field existed.
	OriginalRequestID string
	// OriginalTrace is the trace context stored on that same record
	// (Record.Trace), for a tracer to link the duplicate to the execution
	// it was answered from; empty when the record carries none.
	OriginalTrace string
	// Route names the HTTP route ("POST /payments"), "" outside HTTP:
	// the method and the template the request matched (the HTTP API's
	// route key, "POST $default" for its $default route, the REST
	// resource, "/{proxy+}" included, the ServeMux pattern), or what
	// HTTPConfig.Route returned; never the client's raw path, so that
	// it is bounded as a metric label and holds no client data. Where no
	// template matched (a Function URL, net/http without a pattern) the
	// path is RouteNone: "POST (no route)". The key is scoped by the
	// route Route documents on HTTPConfig, which may be the raw path.
	Route string
	// Status is the HTTP status answered, or 0 outside HTTP.
	Status int
	// StoreCalls counts the Store methods called.
	StoreCalls int
	// StoreLatency sums the time spent in the store.
	StoreLatency time.Duration
	// HandlerLatency is the time the function ran, zero when it did not.
	HandlerLatency time.Duration
	// HandlerStart is when the function started, zero when it did not.
	HandlerStart time.Time
	// Waited is how long a duplicate waited for the first request.
	Waited time.Duration
	// Cached reports an answer from the warm-container cache.
	Cached bool
	// Err is the error behind the outcome, if any. It is logged, never
	// sent to a client; it names keys only by KeyRef.
	Err error

	trace *func(context.Context, Event) // Config.Tracer's end of this call, set by startTrace
}

// Emitter receives the Event of every guarded request. Implement it to
// send metrics elsewhere (OpenTelemetry, Prometheus): it is called on the
// request's goroutine after the outcome is known, so it should not block.
// EMF writes CloudWatch Embedded Metric Format.
type Emitter interface {
	Emit(ctx context.Context, ev Event)
}

// level is the log level of an outcome.
func (ev Event) level() slog.Level {
	switch ev.Outcome {
	case OutcomeExecuted, OutcomeReplayed, OutcomeWaited, OutcomeMissingKey, OutcomeInvalidKey, OutcomeMismatch, OutcomeInProgress:
		return slog.LevelInfo
	case OutcomeStoreError:
		return slog.LevelError
	}
	return slog.LevelWarn
}

// emit logs ev and passes it to the configured metrics and hook.
func (g *Guard) emit(ctx context.Context, ev Event) {
	ev.RequestID = requestIDFrom(ctx)
	if l := g.cfg.Logger; l.Enabled(ctx, ev.level()) {
		attrs := make([]slog.Attr, 0, 12)
		attrs = append(attrs, slog.String("outcome", ev.Outcome), slog.String("key", ev.Key))
		if ev.RequestID != "" {
			attrs = append(attrs, slog.String("request_id", ev.RequestID))
		}
		if ev.OriginalRequestID != "" {
			attrs = append(attrs, slog.String("original_request_id", ev.OriginalRequestID))
		}
		if ev.Route != "" {
			attrs = append(attrs, slog.String("route", ev.Route))
		}
		if ev.Status != 0 {
			attrs = append(attrs, slog.Int("status", ev.Status))
		}
		attrs = append(attrs,
			slog.Int("store_calls", ev.StoreCalls),
			slog.Float64("store_ms", ms(ev.StoreLatency)),
			slog.Float64("handler_ms", ms(ev.HandlerLatency)))
		if ev.Waited > 0 {
			attrs = append(attrs, slog.Float64("waited_ms", ms(ev.Waited)))
		}
		if ev.Cached {
			attrs = append(attrs, slog.Bool("cached", true))
		}
		if ev.Err != nil {
			attrs = append(attrs, slog.String("err", ev.Err.Error()))
		}
		l.LogAttrs(ctx, ev.level(), "dedupe: request", attrs...)
	}
	if g.cfg.Metrics != nil {
		g.cfg.Metrics.Emit(ctx, ev)
	}
	if g.cfg.OnOutcome != nil {
		g.cfg.OnOutcome(ctx, ev)
	}
	g.endTrace(ctx, ev)
}

// ms returns d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// EMF is an Emitter that writes one CloudWatch Embedded Metric Format line
// per event to W (a Lambda function's stdout goes to CloudWatch Logs,
// which turns the line into metrics: no PutMetricData call and no added
// latency). Each line counts the outcome (a metric named after it, value
// 1) and records StoreLatency and HandlerLatency in milliseconds, under
// the dimensions FunctionName and Route. An EMF is safe for concurrent
// use; lines never interleave.
type EMF struct {
	// W receives the lines. Required.
	W io.Writer
	// Namespace is the metric namespace. Empty means EMFNamespace.
	Namespace string
	// FunctionName is the FunctionName dimension. Empty means
	// $AWS_LAMBDA_FUNCTION_NAME as lambdacontext reads it.
	FunctionName string
	// Now stamps the lines. Nil means time.Now.
	Now func() time.Time

	mu sync.Mutex
}

// Emit implements Emitter.
func (e *EMF) Emit(_ context.Context, ev Event) {
	route := ev.Route
	if route == "" {
		route = "-"
	}
	// A lost metrics line must never fail the request.
	_ = e.Write(map[string]string{"FunctionName": e.function(), "Route": route}, []Metric{
		{Name: ev.Outcome, Unit: "Count", Value: 1},
		{Name: "StoreLatency", Unit: "Milliseconds", Value: ms(ev.StoreLatency)},
		{Name: "HandlerLatency", Unit: "Milliseconds", Value: ms(ev.HandlerLatency)},
	})
}

// Metric is one value of an EMF line.
type Metric struct {
	// Name is the metric name.
	Name string
	// Unit is a CloudWatch unit ("Count", "Milliseconds").
	Unit string
	// Value is the value.
	Value float64
}

// Write writes one EMF line with the given dimensions (all of them form
// one dimension set) and metrics, timestamped by Now. Other emitters, such
// as the reaper's counts, use it to share the format.
func (e *EMF) Write(dims map[string]string, metrics []Metric) error {
	type metricDef struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	type directive struct {
		Namespace  string      `json:"Namespace"`
		Dimensions [][]string  `json:"Dimensions"`
		Metrics    []metricDef `json:"Metrics"`
	}
	line := make(map[string]any, len(dims)+len(metrics)+1)
	d := directive{Namespace: e.Namespace, Dimensions: [][]string{{}}}
	if d.Namespace == "" {
		d.Namespace = EMFNamespace
	}
	for k, v := range dims {
		d.Dimensions[0] = append(d.Dimensions[0], k)
		line[k] = v
	}
	slices.Sort(d.Dimensions[0])
	for _, m := range metrics {
		d.Metrics = append(d.Metrics, metricDef{Name: m.Name, Unit: m.Unit})
		line[m.Name] = m.Value
	}
	line["_aws"] = map[string]any{
		"Timestamp":         e.now().UnixMilli(),
		"CloudWatchMetrics": []directive{d},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("dedupe: encode metrics: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.W.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("dedupe: write metrics: %w", err)
	}
	return nil
}

func (e *EMF) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *EMF) function() string {
	if e.FunctionName != "" {
		return e.FunctionName
	}
	return lambdacontext.FunctionName
}
