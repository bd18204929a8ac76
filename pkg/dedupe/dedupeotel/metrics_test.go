package dedupeotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupeotel"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestMetricsMatchEMF sends a random mix of requests (fresh, duplicate,
// mismatched, failing, store failures) through one guard whose Metrics is
// the Telemetry and whose OnOutcome is a dedupe.EMF, and checks that the
// OpenTelemetry counts per outcome and route, and the latency sums, are
// EMF's.
func TestMetricsMatchEMF(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	r := newRig(t)
	var buf bytes.Buffer
	emf := &dedupe.EMF{W: &buf, FunctionName: "fn"}
	fs := &faultStore{Store: memstore.New()}
	g := dedupe.New(fs, &dedupe.Config{Prefix: "mix", Metrics: r.tel, OnOutcome: emf.Emit})
	ctx := context.Background()
	for i := range 300 {
		key := "k" + strconv.Itoa(rng.IntN(40))
		fp := "fp"
		if rng.IntN(10) == 0 {
			fp = "other"
		}
		fs.claim, fs.complete = rng.IntN(15) == 0, rng.IntN(15) == 0
		fn := ok
		if rng.IntN(8) == 0 {
			fn = func(context.Context) (dedupe.Result, error) { return dedupe.Result{}, errors.New("boom") }
		}
		if i%50 == 0 {
			key = "" // invalid_key
		}
		g.Do(ctx, dedupe.Call{Key: key, Fingerprint: fp}, fn)
	}
	// HTTP requests on two routes: the route is the other attribute.
	fs.claim, fs.complete = false, false
	h := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{SharedScope: true, RequireKey: func(string) bool { return true }},
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "{}"}, nil
		})
	for range 60 {
		req := events.APIGatewayV2HTTPRequest{RouteKey: []string{"POST /payments", "POST /refunds"}[rng.IntN(2)], Body: "{}",
			Headers: map[string]string{"idempotency-key": "h" + strconv.Itoa(rng.IntN(10))}}
		if rng.IntN(6) == 0 {
			req.Headers = nil // missing_key
		}
		req.RequestContext.HTTP.Method = "POST"
		h(ctx, req)
	}

	// EMF: one line per event, the outcome as a metric named after it.
	type tally struct {
		n              int64
		store, handler float64 // ms
	}
	emfBy := map[string]*tally{}
	var emfStore, emfHandler float64
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		for name, v := range m {
			if _, isOutcome := outcomes[name]; isOutcome {
				tl := emfBy[name+"|"+m["Route"].(string)]
				if tl == nil {
					tl = &tally{}
					emfBy[name+"|"+m["Route"].(string)] = tl
				}
				tl.n += int64(v.(float64))
			}
		}
		emfStore += m["StoreLatency"].(float64)
		emfHandler += m["HandlerLatency"].(float64)
	}

	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	otelBy := map[string]int64{}
	var otelStore, otelHandler float64
	var samples int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name != dedupeotel.MetricOutcome {
					t.Errorf("unexpected counter %s", m.Name)
				}
				for _, p := range d.DataPoints {
					checkBounded(t, p.Attributes)
					o, _ := p.Attributes.Value(dedupeotel.AttrOutcome)
					route, has := p.Attributes.Value(dedupeotel.AttrRoute)
					rs := "-"
					if has {
						rs = route.AsString()
					}
					otelBy[o.AsString()+"|"+rs] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					checkBounded(t, p.Attributes)
					switch m.Name {
					case dedupeotel.MetricStoreDuration:
						otelStore += p.Sum * 1000
						samples += int64(p.Count)
					case dedupeotel.MetricHandlerDuration:
						otelHandler += p.Sum * 1000
						samples += int64(p.Count)
					}
				}
			}
		}
	}
	if len(otelBy) != len(emfBy) {
		t.Errorf("OTel counts %v, EMF counts %d series", otelBy, len(emfBy))
	}
	for k, tl := range emfBy {
		if otelBy[k] != tl.n {
			t.Errorf("%s: OTel counted %d, EMF %d", k, otelBy[k], tl.n)
		}
	}
	// EMF rounds each value down to the microsecond.
	tol := float64(samples) * 0.001
	if math.Abs(otelStore-emfStore) > tol || math.Abs(otelHandler-emfHandler) > tol {
		t.Errorf("latency sums: store OTel %.3f ms, EMF %.3f ms; handler OTel %.3f ms, EMF %.3f ms", otelStore, emfStore, otelHandler, emfHandler)
	}
	t.Logf("outcomes: %v", otelBy)
}

// checkBounded fails when a metric carries an attribute other than the
// outcome and the route: never a key.
func checkBounded(t *testing.T, set attribute.Set) {
	t.Helper()
	for _, kv := range set.ToSlice() {
		if kv.Key != dedupeotel.AttrOutcome && kv.Key != dedupeotel.AttrRoute {
			t.Errorf("metric attribute %s=%s: only outcome and route are allowed", kv.Key, kv.Value.Emit())
		}
	}
}

var outcomes = map[string]struct{}{
	dedupe.OutcomeExecuted: {}, dedupe.OutcomeReplayed: {}, dedupe.OutcomeWaited: {}, dedupe.OutcomeInProgress: {},
	dedupe.OutcomeMismatch: {}, dedupe.OutcomeMissingKey: {}, dedupe.OutcomeInvalidKey: {}, dedupe.OutcomeInvalidRequest: {},
	dedupe.OutcomeStoreError: {}, dedupe.OutcomeReleased: {}, dedupe.OutcomeLeaseLost: {}, dedupe.OutcomeNotStored: {},
	dedupe.OutcomeTooLarge: {}, dedupe.OutcomeHeld: {},
}

// TestRouteLabelsBounded sends 300 requests with 300 different paths,
// each carrying a client's e-mail address, through every adapter whose
// key is scoped by the raw path ($default and greedy routes, Function
// URLs, net/http without a pattern): the metrics (OpenTelemetry and
// EMF), the spans and the log name one route each, never the path.
func TestRouteLabelsBounded(t *testing.T) {
	type adapter struct {
		name, want string
		send       func(g *dedupe.Guard) func(path string)
	}
	cfg := &dedupe.HTTPConfig{SharedScope: true}
	v2 := func(routeKey string) func(g *dedupe.Guard) func(string) {
		return func(g *dedupe.Guard) func(string) {
			h := dedupe.HTTPAPI(g, cfg, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
			})
			return func(path string) {
				req := events.APIGatewayV2HTTPRequest{RouteKey: routeKey, RawPath: path, Headers: map[string]string{"idempotency-key": "k" + path}}
				req.RequestContext.HTTP.Method = "POST"
				h(context.Background(), req)
			}
		}
	}
	adapters := []adapter{
		{"HTTP API $default", "POST $default", v2("$default")},
		{"HTTP API ANY /{proxy+}", "POST /{proxy+}", v2("ANY /{proxy+}")},
		{"REST API /{proxy+}", "POST /{proxy+}", func(g *dedupe.Guard) func(string) {
			h := dedupe.RESTAPI(g, cfg, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				return events.APIGatewayProxyResponse{StatusCode: 201}, nil
			})
			return func(path string) {
				h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/{proxy+}", Path: path,
					Headers: map[string]string{"Idempotency-Key": "k" + path}})
			}
		}},
		{"Function URL", "POST " + dedupe.RouteNone, func(g *dedupe.Guard) func(string) {
			h := dedupe.FunctionURL(g, cfg, func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
				return events.LambdaFunctionURLResponse{StatusCode: 201}, nil
			})
			return func(path string) {
				req := events.LambdaFunctionURLRequest{RawPath: path, Headers: map[string]string{"idempotency-key": "k" + path}}
				req.RequestContext.HTTP.Method = "POST"
				h(context.Background(), req)
			}
		}},
		{"net/http without a pattern", "POST " + dedupe.RouteNone, func(g *dedupe.Guard) func(string) {
			h := dedupe.Middleware(g, cfg)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) }))
			return func(path string) {
				r := httptest.NewRequest("POST", "http://api.example"+path, nil)
				r.Header.Set("Idempotency-Key", "k"+path)
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		}},
		{"net/http with a pattern", "POST /users/{email}", func(g *dedupe.Guard) func(string) {
			mux := http.NewServeMux()
			mux.Handle("POST /users/{email}", dedupe.Middleware(g, cfg)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) })))
			return func(path string) {
				r := httptest.NewRequest("POST", "http://api.example"+path, nil)
				r.Header.Set("Idempotency-Key", "k"+path)
				mux.ServeHTTP(httptest.NewRecorder(), r)
			}
		}},
	}
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			r := newRig(t)
			var emfLines, logs bytes.Buffer
			emf := &dedupe.EMF{W: &emfLines, FunctionName: "fn"}
			g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "routes", Metrics: r.tel, Tracer: r.tel, OnOutcome: emf.Emit,
				Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			send := a.send(g)
			for i := range 300 {
				send("/users/client" + strconv.Itoa(i) + "@example.com")
			}
			routes := map[string]int{}
			var rm metricdata.ResourceMetrics
			if err := r.reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if d, ok := m.Data.(metricdata.Sum[int64]); ok {
						for _, p := range d.DataPoints {
							v, _ := p.Attributes.Value(dedupeotel.AttrRoute)
							routes["otel "+v.AsString()] += int(p.Value)
						}
					}
				}
			}
			for _, line := range bytes.Split(bytes.TrimSpace(emfLines.Bytes()), []byte("\n")) {
				var m struct{ Route string }
				json.Unmarshal(line, &m)
				routes["emf "+m.Route]++
			}
			for _, s := range r.spans.Ended() {
				if s.Name() != "dedupe" && !strings.HasPrefix(s.Name(), "dedupe.") {
					routes["span "+s.Name()]++
				}
				for _, kv := range s.Attributes() {
					if kv.Key == dedupeotel.AttrRoute {
						routes["span attribute "+kv.Value.AsString()]++
					}
				}
			}
			want := map[string]int{"otel " + a.want: 300, "emf " + a.want: 300, "span dedupe " + a.want: 300, "span attribute " + a.want: 300}
			if !reflect.DeepEqual(routes, want) {
				t.Errorf("routes named = %v\nwant %v", routes, want)
			}
			if strings.Contains(logs.String(), "@example.com") || strings.Count(logs.String(), `"route":"`+a.want+`"`) != 300 {
				t.Errorf("the log names the client's path, or not the route %q 300 times", a.want)
			}
		})
	}
}
