package dedupe_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// This file holds the harness that runs one behaviour table against all
// four HTTP adapters: each adapter turns a neutral request into its real
// event (loaded from a testdata fixture), calls the wrapped handler, and
// renders the response as a client would see it on the wire.

// testClock is a manual, concurrency-safe clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// faultyStore wraps a real store to inject failures. It is fault injection
// only: every successful path goes through the wrapped store.
type faultyStore struct {
	dedupe.Store
	mu          sync.Mutex
	claimErr    error // returned by every Claim when set
	completeErr error // returned by every Complete when set
	// omitOver simulates a backend item size limit: results with bodies
	// longer than this are recorded as completed without the result, and
	// Complete reports ErrResultTooLarge. Zero disables it.
	omitOver int
	omitted  map[string]bool
}

func (f *faultyStore) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	f.mu.Lock()
	err, omitted := f.claimErr, f.omitted[req.Key]
	f.mu.Unlock()
	if err != nil {
		return dedupe.ClaimResult{}, err
	}
	res, err := f.Store.Claim(ctx, req)
	if err == nil && !res.Acquired && omitted && res.Record.Status == dedupe.StatusCompleted {
		res.Record.Result, res.Record.ResultOmitted = nil, true
	}
	return res, err
}

func (f *faultyStore) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	f.mu.Lock()
	err, limit := f.completeErr, f.omitOver
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if limit > 0 && len(req.Result.Body) > limit {
		req.Result = dedupe.Result{}
		if err := f.Store.Complete(ctx, req); err != nil {
			return err
		}
		f.mu.Lock()
		if f.omitted == nil {
			f.omitted = map[string]bool{}
		}
		f.omitted[req.Key] = true
		f.mu.Unlock()
		return fmt.Errorf("faulty: item over %d bytes: %w", limit, dedupe.ErrResultTooLarge)
	}
	return f.Store.Complete(ctx, req)
}

var errStoreDown = fmt.Errorf("faulty: dial tcp: connection refused: %w", dedupe.ErrStoreUnavailable)

// request is an adapter-neutral test request.
type request struct {
	method    string
	path      string // route template for API Gateway, concrete path elsewhere
	params    map[string]string
	keyName   string   // header name; default Idempotency-Key
	keys      []string // Idempotency-Key header values; none: no header
	principal string
	headers   map[string]string
	body      []byte
	base64    bool
}

// post returns a POST /payments request by alice with key and body.
func post(key, body string) request {
	return request{method: "POST", path: "/payments", keys: []string{key}, principal: "alice", body: []byte(body)}
}

func (r request) with(f func(*request)) request { f(&r); return r }

// reply is what a neutral handler answers.
type reply struct {
	status  int
	headers map[string]string
	cookies []string
	body    []byte
	base64  bool
}

// handlerFunc is a neutral handler: it sees the decoded request body.
type handlerFunc func(ctx context.Context, body []byte) (reply, error)

// wire is a response as the client receives it.
type wire struct {
	status int
	header map[string][]string // lower-case names
	body   []byte
}

func (w wire) get(name string) string {
	if v := w.header[strings.ToLower(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// withoutReplayed returns w without the Idempotent-Replayed header.
func (w wire) withoutReplayed() wire {
	h := maps.Clone(w.header)
	delete(h, strings.ToLower(dedupe.HeaderReplayed))
	return wire{w.status, h, w.body}
}

func (w wire) String() string {
	keys := slices.Sorted(maps.Keys(w.header))
	var b strings.Builder
	fmt.Fprintf(&b, "%d", w.status)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%q", k, w.header[k])
	}
	fmt.Fprintf(&b, " body=%q", w.body)
	return b.String()
}

func equalWire(a, b wire) bool {
	if a.status != b.status || !bytes.Equal(a.body, b.body) || len(a.header) != len(b.header) {
		return false
	}
	for k, v := range a.header {
		if !slices.Equal(v, b.header[k]) {
			return false
		}
	}
	return true
}

// invoker sends one request through a wrapped handler.
type invoker func(ctx context.Context, r request) (wire, error)

// adapter builds an invoker around a neutral handler.
type adapter struct {
	name string
	wrap func(t testing.TB, g *dedupe.Guard, cfg *dedupe.HTTPConfig, h handlerFunc) invoker
	// lastHeaderWins: the event keeps only the last of repeated
	// headers (ALB without multi-value headers), so a repeated key
	// cannot be seen (scenario.repeatedHeader).
	lastHeaderWins bool
}

var adapters = []adapter{
	{name: "HTTPAPI", wrap: wrapHTTPAPI},
	{name: "RESTAPI", wrap: wrapRESTAPI},
	{name: "FunctionURL", wrap: wrapFunctionURL},
	{name: "Middleware", wrap: wrapMiddleware},
	{name: "ALB", wrap: wrapALB(false), lastHeaderWins: true},
	{name: "ALB/multi-value", wrap: wrapALB(true)},
}

// fixture reads a testdata event into v.
func fixture(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func encodeBody(b []byte, b64 bool) string {
	if b64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return string(b)
}

func decodeBody(t testing.TB, s string, b64 bool) []byte {
	if !b64 {
		return []byte(s)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Errorf("bad base64 body %q: %v", s, err)
	}
	return b
}

func lowerKeys(in map[string][]string) map[string][]string {
	out := make(map[string][]string, len(in))
	for k, v := range in {
		out[strings.ToLower(k)] = append(out[strings.ToLower(k)], v...)
	}
	return out
}

// setKeys sets the key header of a single-value header map, as API Gateway
// HTTP APIs and Function URLs deliver it: lower-cased, repeated values
// joined with ", ".
func setKeys(h map[string]string, r request, lower bool) {
	for k := range h {
		if strings.EqualFold(k, dedupe.HeaderIdempotencyKey) {
			delete(h, k)
		}
	}
	name := cmpOr(r.keyName, dedupe.HeaderIdempotencyKey)
	if lower {
		name = strings.ToLower(name)
	}
	if len(r.keys) > 0 {
		h[name] = strings.Join(r.keys, ", ")
	}
	for k, v := range r.headers {
		if lower {
			k = strings.ToLower(k)
		}
		h[k] = v
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func wrapHTTPAPI(t testing.TB, g *dedupe.Guard, cfg *dedupe.HTTPConfig, h handlerFunc) invoker {
	var base events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-jwt.json", &base)
	raw, _ := json.Marshal(base)
	wrapped := dedupe.HTTPAPI(g, cfg, func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		r, err := h(ctx, decodeBody(t, ev.Body, ev.IsBase64Encoded))
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		out := events.APIGatewayV2HTTPResponse{StatusCode: r.status, Headers: r.headers, Cookies: r.cookies}
		out.Body, out.IsBase64Encoded = encodeBody(r.body, r.base64), r.base64
		return out, nil
	})
	return func(ctx context.Context, r request) (wire, error) {
		var ev events.APIGatewayV2HTTPRequest
		json.Unmarshal(raw, &ev)
		ev.RouteKey = r.method + " " + r.path
		ev.RequestContext.RouteKey = ev.RouteKey
		ev.RequestContext.HTTP.Method = r.method
		ev.RawPath, ev.RequestContext.HTTP.Path = r.path, r.path
		ev.PathParameters = r.params
		setKeys(ev.Headers, r, r.keyName == "")
		if r.principal == "" {
			ev.RequestContext.Authorizer = nil // an anonymous caller: no authorizer
		} else {
			ev.RequestContext.Authorizer.JWT.Claims["sub"] = r.principal
		}
		ev.Body, ev.IsBase64Encoded = encodeBody(r.body, r.base64), r.base64
		resp, err := wrapped(ctx, ev)
		resp = viaRuntime(t, resp)
		w := wire{status: resp.StatusCode, header: map[string][]string{}, body: decodeBody(t, resp.Body, resp.IsBase64Encoded)}
		for k, v := range resp.Headers {
			w.header[strings.ToLower(k)] = []string{v}
		}
		if len(resp.Cookies) > 0 {
			w.header["set-cookie"] = resp.Cookies
		}
		return w, err
	}
}

func wrapRESTAPI(t testing.TB, g *dedupe.Guard, cfg *dedupe.HTTPConfig, h handlerFunc) invoker {
	var base events.APIGatewayProxyRequest
	fixture(t, "apigw-v1-cognito.json", &base)
	raw, _ := json.Marshal(base)
	wrapped := dedupe.RESTAPI(g, cfg, func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		r, err := h(ctx, decodeBody(t, ev.Body, ev.IsBase64Encoded))
		if err != nil {
			return events.APIGatewayProxyResponse{}, err
		}
		out := events.APIGatewayProxyResponse{StatusCode: r.status, Headers: r.headers}
		if len(r.cookies) > 0 {
			out.MultiValueHeaders = map[string][]string{"Set-Cookie": r.cookies}
		}
		out.Body, out.IsBase64Encoded = encodeBody(r.body, r.base64), r.base64
		return out, nil
	})
	return func(ctx context.Context, r request) (wire, error) {
		var ev events.APIGatewayProxyRequest
		json.Unmarshal(raw, &ev)
		ev.HTTPMethod, ev.RequestContext.HTTPMethod = r.method, r.method
		ev.Resource, ev.RequestContext.ResourcePath = r.path, r.path
		ev.Path = r.path
		for k, v := range r.params {
			ev.Path = strings.ReplaceAll(ev.Path, "{"+k+"}", v)
		}
		ev.PathParameters = r.params
		setKeys(ev.Headers, r, false)
		for k := range ev.MultiValueHeaders {
			if strings.EqualFold(k, dedupe.HeaderIdempotencyKey) {
				delete(ev.MultiValueHeaders, k)
			}
		}
		if len(r.keys) > 0 {
			ev.MultiValueHeaders[cmpOr(r.keyName, dedupe.HeaderIdempotencyKey)] = r.keys
			ev.Headers[cmpOr(r.keyName, dedupe.HeaderIdempotencyKey)] = r.keys[len(r.keys)-1]
		}
		for k, v := range r.headers {
			ev.MultiValueHeaders[k] = []string{v}
		}
		if r.principal == "" {
			ev.RequestContext.Authorizer = nil // an anonymous caller: no authorizer
			ev.RequestContext.Identity = events.APIGatewayRequestIdentity{SourceIP: "203.0.113.9"}
		} else {
			ev.RequestContext.Authorizer["claims"].(map[string]any)["sub"] = r.principal
		}
		ev.Body, ev.IsBase64Encoded = encodeBody(r.body, r.base64), r.base64
		resp, err := wrapped(ctx, ev)
		resp = viaRuntime(t, resp)
		// API Gateway merges headers and multiValueHeaders.
		w := wire{status: resp.StatusCode, header: map[string][]string{}, body: decodeBody(t, resp.Body, resp.IsBase64Encoded)}
		for k, v := range resp.Headers {
			if !slices.Contains(resp.MultiValueHeaders[k], v) {
				w.header[strings.ToLower(k)] = []string{v}
			}
		}
		for k, vs := range lowerKeys(resp.MultiValueHeaders) {
			w.header[k] = append(w.header[k], vs...)
		}
		return w, err
	}
}

func wrapFunctionURL(t testing.TB, g *dedupe.Guard, cfg *dedupe.HTTPConfig, h handlerFunc) invoker {
	var base events.LambdaFunctionURLRequest
	fixture(t, "function-url-iam.json", &base)
	raw, _ := json.Marshal(base)
	wrapped := dedupe.FunctionURL(g, cfg, func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		r, err := h(ctx, decodeBody(t, ev.Body, ev.IsBase64Encoded))
		if err != nil {
			return events.LambdaFunctionURLResponse{}, err
		}
		out := events.LambdaFunctionURLResponse{StatusCode: r.status, Headers: r.headers, Cookies: r.cookies}
		out.Body, out.IsBase64Encoded = encodeBody(r.body, r.base64), r.base64
		return out, nil
	})
	return func(ctx context.Context, r request) (wire, error) {
		var ev events.LambdaFunctionURLRequest
		json.Unmarshal(raw, &ev)
		ev.RequestContext.HTTP.Method = r.method
		ev.RawPath = r.path
		for k, v := range r.params {
			ev.RawPath = strings.ReplaceAll(ev.RawPath, "{"+k+"}", v)
		}
		ev.RequestContext.HTTP.Path = ev.RawPath
		setKeys(ev.Headers, r, r.keyName == "")
		ev.RequestContext.Authorizer.IAM.UserARN = ""
		ev.RequestContext.Authorizer.IAM.CallerID = ""
		if r.principal != "" {
			ev.RequestContext.Authorizer.IAM.UserARN = "arn:aws:sts::123456789012:assumed-role/client/" + r.principal
		}
		ev.Body, ev.IsBase64Encoded = encodeBody(r.body, r.base64), r.base64
		resp, err := wrapped(ctx, ev)
		resp = viaRuntime(t, resp)
		w := wire{status: resp.StatusCode, header: map[string][]string{}, body: decodeBody(t, resp.Body, resp.IsBase64Encoded)}
		for k, v := range resp.Headers {
			w.header[strings.ToLower(k)] = []string{v}
		}
		if len(resp.Cookies) > 0 {
			w.header["set-cookie"] = resp.Cookies
		}
		return w, err
	}
}

// viaRuntime passes a response through JSON, as the Lambda runtime does
// on its way to API Gateway: a body that is not valid UTF-8 and not base64
// would be mangled here.
func viaRuntime[T any](t testing.TB, resp T) T {
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatalf("marshal response: %v", err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal response: %v", err)
	}
	return out
}

// principalHeader carries the principal for Middleware tests, standing in
// for what an authentication middleware would establish.
const principalHeader = "X-Test-Principal"

func wrapMiddleware(t testing.TB, g *dedupe.Guard, cfg *dedupe.HTTPConfig, h handlerFunc) invoker {
	var c dedupe.HTTPConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Principal == nil {
		c.Principal = func(req any) string { return req.(*http.Request).Header.Get(principalHeader) }
	}
	var handlerErr error
	var mu sync.Mutex
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
		}
		rep, err := h(r.Context(), body)
		if err != nil {
			// net/http has no handler errors: a failing handler answers 500.
			mu.Lock()
			handlerErr = err
			mu.Unlock()
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		for k, v := range rep.headers {
			w.Header().Set(k, v)
		}
		for _, c := range rep.cookies {
			w.Header().Add("Set-Cookie", c)
		}
		w.WriteHeader(rep.status)
		w.Write(rep.body)
	})
	srv := dedupe.Middleware(g, &c)(next)
	return func(ctx context.Context, r request) (wire, error) {
		path := r.path
		for k, v := range r.params {
			path = strings.ReplaceAll(path, "{"+k+"}", v)
		}
		req := httptest.NewRequestWithContext(ctx, r.method, path, bytes.NewReader(r.body))
		req.Pattern = r.path // as http.ServeMux sets it
		for _, k := range r.keys {
			req.Header[http.CanonicalHeaderKey(cmpOr(r.keyName, dedupe.HeaderIdempotencyKey))] =
				append(req.Header[http.CanonicalHeaderKey(cmpOr(r.keyName, dedupe.HeaderIdempotencyKey))], k)
		}
		for k, v := range r.headers {
			req.Header.Set(k, v)
		}
		if r.principal != "" {
			req.Header.Set(principalHeader, r.principal)
		}
		rec := httptest.NewRecorder()
		mu.Lock()
		handlerErr = nil
		mu.Unlock()
		srv.ServeHTTP(rec, req)
		res := rec.Result()
		body, _ := io.ReadAll(res.Body)
		mu.Lock()
		defer mu.Unlock()
		return wire{status: res.StatusCode, header: lowerKeys(res.Header), body: body}, handlerErr
	}
}

// step is one request of a scenario and what must come of it.
type step struct {
	advance time.Duration // clock moves before the request
	req     request
	during  *step // sent from inside the handler, while this request runs

	status     int
	replayed   bool
	problem    string // problem type of an answer the adapter made itself
	retryAfter string
	runs       int32 // handler executions so far, after this step
	sameAs     int   // 1-based index of an earlier step whose response this replays
	wantErr    bool
	wantPanic  bool
	records    *int // records in the store after the step; nil: not checked
}

// scenario is one row of the behaviour table.
type scenario struct {
	name    string
	cfg     *dedupe.HTTPConfig
	guard   dedupe.Config
	faults  func(*faultyStore)
	handler func(run int32, body []byte) (reply, error)
	steps   []step
	// repeatedHeader: the scenario sends a header twice, which an
	// adapter with lastHeaderWins never sees.
	repeatedHeader bool
}

// created is the default handler: 201 with a body naming the run.
func created(run int32, body []byte) (reply, error) {
	return reply{
		status:  http.StatusCreated,
		headers: map[string]string{"Content-Type": "application/json", "Location": fmt.Sprintf("/payments/pay_%d", run)},
		body:    fmt.Appendf(nil, `{"id":"pay_%d","echo":%q}`, run, body),
	}, nil
}

// ignoreBody is created without the echo, for large request bodies.
func ignoreBody(run int32, _ []byte) (reply, error) { return created(run, nil) }

// statusOnce answers status on the first run and 201 afterwards.
func statusOnce(status int) func(int32, []byte) (reply, error) {
	return func(run int32, body []byte) (reply, error) {
		if run == 1 {
			return reply{status: status, headers: map[string]string{"Content-Type": "text/plain"}, body: []byte(http.StatusText(status))}, nil
		}
		return created(run, body)
	}
}

// backend makes the store of each scenario. records counts the records
// held, or is nil when the backend cannot.
type backend struct {
	name string
	new  func(t *testing.T) (store dedupe.Store, records func() int)
}

var memoryBackend = backend{"memstore", func(*testing.T) (dedupe.Store, func() int) {
	m := memstore.New()
	return m, m.Len
}}

// env is one scenario's world: a store, a clock, a guard and an adapter.
type env struct {
	t       *testing.T
	clock   *testClock
	store   *faultyStore
	records func() int
	invoke  invoker
	runs    atomic.Int32
	mu      sync.Mutex
	hook    func()
}

func newEnv(t *testing.T, b backend, a adapter, sc scenario) *env {
	e := &env{t: t, clock: newTestClock()}
	var inner dedupe.Store
	inner, e.records = b.new(t)
	e.store = &faultyStore{Store: inner}
	if sc.faults != nil {
		sc.faults(e.store)
	}
	gcfg := sc.guard
	gcfg.Now = e.clock.Now
	gcfg.Prefix = "test-" + rand.Text() // scenarios may share a table
	g := dedupe.New(e.store, &gcfg)
	h := sc.handler
	if h == nil {
		h = created
	}
	e.invoke = a.wrap(t, g, sc.cfg, func(ctx context.Context, body []byte) (reply, error) {
		run := e.runs.Add(1)
		e.mu.Lock()
		hook := e.hook
		e.hook = nil
		e.mu.Unlock()
		if hook != nil {
			hook()
		}
		return h(run, body)
	})
	return e
}

// do sends s.req and checks the result; got holds earlier responses.
func (e *env) do(i int, s step, got []wire) wire {
	t := e.t
	t.Helper()
	e.clock.Advance(s.advance)
	if s.during != nil {
		during := *s.during
		e.mu.Lock()
		e.hook = func() { e.do(-1, during, got) }
		e.mu.Unlock()
	}
	var w wire
	var err error
	panicked := func() (p bool) {
		defer func() {
			if recover() != nil {
				p = true
			}
		}()
		w, err = e.invoke(context.Background(), s.req)
		return false
	}()
	name := fmt.Sprintf("step %d", i+1)
	if i < 0 {
		name = "request during handler"
	}
	e.mu.Lock()
	if s.during != nil && e.hook != nil {
		e.hook = nil
		t.Errorf("%s: the handler never ran, so the request during it was not sent", name)
	}
	e.mu.Unlock()
	if panicked != s.wantPanic {
		t.Fatalf("%s: panicked = %v, want %v", name, panicked, s.wantPanic)
	}
	if panicked {
		return w
	}
	if (err != nil) != s.wantErr {
		t.Fatalf("%s: err = %v, want error %v", name, err, s.wantErr)
	}
	if n := e.runs.Load(); n != s.runs {
		t.Errorf("%s: handler runs = %d, want %d", name, n, s.runs)
	}
	if s.records != nil && e.records != nil && *s.records != e.records() {
		t.Errorf("%s: store holds %d records, want %d", name, e.records(), *s.records)
	}
	if err != nil {
		return w
	}
	if w.status != s.status {
		t.Errorf("%s: status = %d, want %d (%v)", name, w.status, s.status, w)
	}
	if got := w.get(dedupe.HeaderReplayed) == "true"; got != s.replayed {
		t.Errorf("%s: replayed = %v, want %v (%v)", name, got, s.replayed, w)
	}
	if s.problem != "" {
		var p dedupe.Problem
		if ct := w.get("Content-Type"); ct != dedupe.ProblemContentType {
			t.Errorf("%s: Content-Type = %q, want %q", name, ct, dedupe.ProblemContentType)
		}
		if err := json.Unmarshal(w.body, &p); err != nil || p.Type != s.problem || p.Status != s.status || p.Title == "" || p.Detail == "" {
			t.Errorf("%s: problem = %+v (%v), want type %q status %d", name, p, err, s.problem, s.status)
		}
	}
	if ra := w.get("Retry-After"); ra != s.retryAfter {
		t.Errorf("%s: Retry-After = %q, want %q", name, ra, s.retryAfter)
	}
	if s.sameAs > 0 {
		if orig := got[s.sameAs-1]; !equalWire(w.withoutReplayed(), orig) {
			t.Errorf("%s: replay differs from step %d:\n got %v\nwant %v", name, s.sameAs, w.withoutReplayed(), orig)
		}
	}
	return w
}

// run plays every step of sc.
func (sc scenario) run(t *testing.T, b backend, a adapter) *env {
	e := newEnv(t, b, a, sc)
	var got []wire
	for i, s := range sc.steps {
		got = append(got, e.do(i, s, got))
	}
	return e
}

func keyOf(n int) string { return strings.Repeat("k", n) }

// behaviours is the table of issue 3's behaviour list, run against every
// adapter.
func behaviours() []scenario {
	const body = `{"amount":1250,"currency":"EUR","source":"tok_visa"}`
	req := post("order-42", body)
	fresh := step{req: req, status: 201, runs: 1}
	replay := step{req: req, status: 201, replayed: true, runs: 1, sameAs: 1}
	invalid := func(keys ...string) step {
		return step{req: req.with(func(r *request) { r.keys = keys }), status: 400, problem: dedupe.ProblemKeyInvalid}
	}

	sc := []scenario{
		{name: "fresh request runs, duplicate replays byte for byte", steps: []step{fresh, replay, replay}},
		{name: "quoted and bare keys are the same key", steps: []step{
			{req: post(`"order-42"`, body), status: 201, runs: 1},
			{req: post(`order-42`, body), status: 201, replayed: true, runs: 1, sameAs: 1},
			{req: post(` "order-42"  `, body), status: 201, replayed: true, runs: 1, sameAs: 1},
		}},
		{name: "header name is case-insensitive", steps: []step{
			{req: req.with(func(r *request) { r.keyName = "IDEMPOTENCY-KEY" }), status: 201, runs: 1},
			{req: req.with(func(r *request) { r.keyName = "idempotency-key" }), status: 201, replayed: true, runs: 1, sameAs: 1},
		}},
		{name: "safe methods pass through", steps: []step{
			{req: req.with(func(r *request) { r.method = "GET" }), status: 201, runs: 1},
			{req: req.with(func(r *request) { r.method = "GET" }), status: 201, runs: 2},
		}},
		{name: "unsafe methods are all guarded", steps: []step{
			{req: req.with(func(r *request) { r.method = "PUT" }), status: 201, runs: 1},
			{req: req.with(func(r *request) { r.method = "PUT" }), status: 201, replayed: true, runs: 1, sameAs: 1},
			{req: req.with(func(r *request) { r.method = "PATCH" }), status: 201, runs: 2},
			{req: req.with(func(r *request) { r.method = "PATCH" }), status: 201, replayed: true, runs: 2, sameAs: 3},
			{req: req.with(func(r *request) { r.method = "DELETE" }), status: 201, runs: 3},
			{req: req.with(func(r *request) { r.method = "DELETE" }), status: 201, replayed: true, runs: 3, sameAs: 5},
		}},
		{name: "guarded methods are configurable", cfg: &dedupe.HTTPConfig{Methods: []string{"post"}}, steps: []step{
			{req: req.with(func(r *request) { r.method = "PUT" }), status: 201, runs: 1},
			{req: req.with(func(r *request) { r.method = "PUT" }), status: 201, runs: 2},
			{req: req, status: 201, runs: 3},
			{req: req, status: 201, replayed: true, runs: 3, sameAs: 3},
		}},
		{name: "missing key passes through unguarded", steps: []step{
			{req: req.with(func(r *request) { r.keys = nil }), status: 201, runs: 1, records: ptr(0)},
			{req: req.with(func(r *request) { r.keys = nil }), status: 201, runs: 2, records: ptr(0)},
		}},
		{name: "missing key on a route that requires one is 400", cfg: &dedupe.HTTPConfig{RequireKey: dedupe.RequireKeyOn("POST /payments")}, steps: []step{
			{req: req.with(func(r *request) { r.keys = nil }), status: 400, problem: dedupe.ProblemKeyMissing},
			{req: req.with(func(r *request) { r.keys = nil; r.path = "/refunds" }), status: 201, runs: 1},
			fresh.with(2),
		}},
		{name: "invalid keys are 400 and never run", steps: []step{
			invalid(""),
			invalid(`""`),
			invalid(keyOf(256)),
			invalid(`"` + keyOf(256) + `"`),
			invalid("ключ"),
			invalid("a\x01b"),
			invalid(`"abc`),
			invalid(`"abc"def`),
			invalid(`"a\b"`),
			{req: post(keyOf(255), body), status: 201, runs: 1},
		}},
		{name: "a repeated key header is 400", repeatedHeader: true, steps: []step{
			invalid(`"first"`, `"second"`),
			invalid("same", "same"),
		}},
		{name: "re-serialised JSON body is the same request", steps: []step{
			{req: post("k", `{"b":[1,2,{"y":true,"x":null}],"a":"é"}`), status: 201, runs: 1},
			{req: post("k", "{\n  \"a\": \"\\u00e9\",\n  \"b\": [1, 2, {\"x\": null, \"y\": true}]\n}\n"), status: 201, replayed: true, runs: 1, sameAs: 1},
		}},
		{name: "same key, different body is 422", steps: []step{
			fresh,
			{req: post("order-42", `{"amount":9999,"currency":"EUR","source":"tok_visa"}`), status: 422, problem: dedupe.ProblemKeyReused, runs: 1},
			{req: post("order-42", `{"amount":1250.0,"currency":"EUR","source":"tok_visa"}`), status: 422, problem: dedupe.ProblemKeyReused, runs: 1},
			replay,
		}},
		{name: "configured headers enter the fingerprint", cfg: &dedupe.HTTPConfig{FingerprintHeaders: []string{"X-Account-Region"}}, steps: []step{
			{req: req.with(func(r *request) { r.headers = map[string]string{"X-Account-Region": "eu"} }), status: 201, runs: 1},
			{req: req.with(func(r *request) { r.headers = map[string]string{"X-Account-Region": "us"} }), status: 422, problem: dedupe.ProblemKeyReused, runs: 1},
			{req: req, status: 422, problem: dedupe.ProblemKeyReused, runs: 1},
			{req: req.with(func(r *request) { r.headers = map[string]string{"X-Account-Region": "eu"} }), status: 201, replayed: true, runs: 1, sameAs: 1},
		}},
		// Issue 17: with no typical duration known, Retry-After is the
		// lease's end (5 min less the 100 s run), not a 1 s guess.
		{name: "duplicate while in flight is 409 with Retry-After at the lease's end", steps: []step{
			{req: req, status: 201, runs: 1, during: &step{advance: 100 * time.Second, req: req, status: 409, problem: dedupe.ProblemInProgress, retryAfter: "200", runs: 1}},
			{req: req, status: 201, replayed: true, runs: 1, sameAs: 1},
		}},
		{name: "in-flight duplicate with a different body is 422", steps: []step{
			{req: req, status: 201, runs: 1, during: &step{req: post("order-42", `{}`), status: 422, problem: dedupe.ProblemKeyReused, runs: 1}},
		}},
		{name: "request outliving its lease is taken over", steps: []step{
			// The first run's lease (5 min without a deadline) runs out
			// while it is still going: the retry takes the key over, and
			// the first run's late result is answered but not recorded.
			{req: req, status: 201, runs: 2, during: &step{advance: 6 * time.Minute, req: req, status: 201, runs: 2}},
			{req: req, status: 201, replayed: true, runs: 2},
		}},
		{name: "store unavailable is 503 and the handler does not run", faults: func(f *faultyStore) { f.claimErr = errStoreDown }, steps: []step{
			{req: req, status: 503, problem: dedupe.ProblemStoreUnavailable, retryAfter: "1"},
			{req: req, status: 503, problem: dedupe.ProblemStoreUnavailable, retryAfter: "1"},
		}},
		// Issue 9, case 3: a permanent store error is ours, answered 500
		// without Retry-After, and never a reason to fail open.
		{name: "a permanent claim failure is 500, not 503", faults: func(f *faultyStore) { f.claimErr = errors.New("faulty: malformed item") }, steps: []step{
			{req: req, status: 500, problem: dedupe.ProblemInternal, records: ptr(0)},
			{req: req, status: 500, problem: dedupe.ProblemInternal, records: ptr(0)},
		}},
		{name: "fail open never runs the handler on a permanent failure", guard: dedupe.Config{FailOpen: true}, faults: func(f *faultyStore) {
			f.claimErr = fmt.Errorf("faulty: %w", dedupe.ErrKeyRejected)
		}, steps: []step{
			{req: req, status: 500, problem: dedupe.ProblemInternal},
			{req: req, status: 500, problem: dedupe.ProblemInternal},
		}},
		{name: "fail open serves the handler's response", guard: dedupe.Config{FailOpen: true}, faults: func(f *faultyStore) { f.claimErr = errStoreDown }, steps: []step{
			{req: req, status: 201, runs: 1},
			{req: req, status: 201, runs: 2},
		}},
		{name: "response too large to keep is answered 409, never run again", faults: func(f *faultyStore) { f.omitOver = 10 }, steps: []step{
			{req: req, status: 201, runs: 1},
			{req: req, status: 409, problem: dedupe.ProblemResultUnavailable, runs: 1},
			{advance: time.Hour, req: req, status: 409, problem: dedupe.ProblemResultUnavailable, runs: 1},
		}},
		{name: "response that could not be recorded is still answered", faults: func(f *faultyStore) { f.completeErr = errStoreDown }, steps: []step{
			{req: req, status: 201, runs: 1},
			{req: req, status: 409, problem: dedupe.ProblemInProgress, retryAfter: "1", runs: 1},
		}},
		{name: "handler error releases the key", handler: func(run int32, body []byte) (reply, error) {
			if run == 1 {
				return reply{}, errors.New("database exploded")
			}
			return created(run, body)
		}, steps: []step{
			{req: req, wantErr: true, runs: 1},
			{req: req, status: 201, runs: 2},
			{req: req, status: 201, replayed: true, runs: 2, sameAs: 2},
		}},
		{name: "handler panic releases the key and re-panics", handler: func(run int32, body []byte) (reply, error) {
			if run == 1 {
				panic("card processor exploded")
			}
			return created(run, body)
		}, steps: []step{
			{req: req, wantPanic: true, runs: 1},
			{req: req, status: 201, runs: 2},
			{req: req, status: 201, replayed: true, runs: 2, sameAs: 2},
		}},
		{name: "body over the limit is 413 before any claim", cfg: &dedupe.HTTPConfig{MaxBodyBytes: 12}, steps: []step{
			{req: req, status: 413, problem: dedupe.ProblemBodyTooLarge, records: ptr(0)},
			{req: req.with(func(r *request) { r.body = []byte(`{"amount":12}`) }), status: 413, problem: dedupe.ProblemBodyTooLarge, records: ptr(0)},
			{req: req.with(func(r *request) { r.body = []byte(`{"amount":1}`) }), status: 201, runs: 1, records: ptr(1)},
			{req: req.with(func(r *request) { r.method = "GET" }), status: 201, runs: 2, records: ptr(1)},
		}},
		// 1 MiB is written out, not taken from DefaultMaxBodyBytes, so that
		// a change to the default fails here.
		{name: "default body limit is 1 MiB", handler: ignoreBody, steps: []step{
			{req: req.with(func(r *request) { r.body = bytes.Repeat([]byte("a"), 1<<20+1) }), status: 413, problem: dedupe.ProblemBodyTooLarge, records: ptr(0)},
			{req: req.with(func(r *request) { r.body = bytes.Repeat([]byte("a"), 1<<20) }), status: 201, runs: 1, records: ptr(1)},
		}},
		{name: "negative body limit means none", cfg: &dedupe.HTTPConfig{MaxBodyBytes: -1}, handler: ignoreBody, steps: []step{
			{req: req.with(func(r *request) { r.body = bytes.Repeat([]byte("a"), 1<<20+1) }), status: 201, runs: 1, records: ptr(1)},
		}},
		{name: "base64 body over the limit is 413", cfg: &dedupe.HTTPConfig{MaxBodyBytes: 8}, steps: []step{
			{req: req.with(func(r *request) { r.body, r.base64 = bytes.Repeat([]byte{0xff}, 9), true }), status: 413, problem: dedupe.ProblemBodyTooLarge},
			{req: req.with(func(r *request) { r.body, r.base64 = bytes.Repeat([]byte{0xff}, 8), true }), status: 201, runs: 1},
		}},
		{name: "binary bodies replay byte for byte", handler: func(run int32, body []byte) (reply, error) {
			return reply{status: 200, headers: map[string]string{"Content-Type": "image/png"}, body: append([]byte("\x89PNG\r\n\x1a\n\x00\xff"), body...), base64: true}, nil
		}, steps: []step{
			{req: req.with(func(r *request) { r.body, r.base64 = []byte{0, 1, 2, 0xfe, 0xff}, true }), status: 200, runs: 1},
			{req: req.with(func(r *request) { r.body, r.base64 = []byte{0, 1, 2, 0xfe, 0xff}, true }), status: 200, replayed: true, runs: 1, sameAs: 1},
			{req: req.with(func(r *request) { r.body, r.base64 = []byte{0, 1, 2, 0xfe, 0xfe}, true }), status: 422, problem: dedupe.ProblemKeyReused, runs: 1},
		}},
		{name: "headers and cookies replay", handler: func(run int32, body []byte) (reply, error) {
			return reply{
				status:  201,
				headers: map[string]string{"Content-Type": "application/json", "Location": "/payments/pay_1", "Cache-Control": "no-store", "X-Request-Cost": "3, 4"},
				cookies: []string{"session=abc; Path=/; HttpOnly", "theme=dark; Max-Age=3600"},
				body:    []byte(`{"id":"pay_1"}`),
			}, nil
		}, steps: []step{fresh, replay}},
		{name: "keys are scoped by principal", steps: []step{
			{req: req, status: 201, runs: 1},
			{req: req.with(func(r *request) { r.principal = "bob" }), status: 201, runs: 2},
			{req: req, status: 201, replayed: true, runs: 2, sameAs: 1},
			{req: req.with(func(r *request) { r.principal = "bob" }), status: 201, replayed: true, runs: 2, sameAs: 2},
			// Issue 9, case 1: no identity and no SharedScope is refused.
			{req: req.with(func(r *request) { r.principal = "" }), status: 500, problem: dedupe.ProblemInternal, runs: 2},
		}},
		{name: "SharedScope lets anonymous callers share a scope", cfg: &dedupe.HTTPConfig{SharedScope: true}, steps: []step{
			{req: req.with(func(r *request) { r.principal = "" }), status: 201, runs: 1},
			{req: req.with(func(r *request) { r.principal = "" }), status: 201, replayed: true, runs: 1, sameAs: 1},
			{req: req, status: 201, runs: 2},
		}},
		// Issue 9, case 3: a path so long that the escaped scope is over
		// DynamoDB's 2048-byte key limit is guarded like any other.
		{name: "a long path is guarded, not refused", steps: []step{
			{req: req.with(func(r *request) { r.path = "/" + strings.Repeat("%7C|é", 700) }), status: 201, runs: 1},
			{req: req.with(func(r *request) { r.path = "/" + strings.Repeat("%7C|é", 700) }), status: 201, replayed: true, runs: 1, sameAs: 1},
			{req: req.with(func(r *request) { r.path = "/" + strings.Repeat("%7C|é", 700) + "x" }), status: 201, runs: 2},
		}},
		// Issue 9, case 8: after the first run's lease ran out, only the
		// same request may take its key over.
		{name: "a stranded key is not taken over by a different request", steps: []step{
			{req: req, status: 201, runs: 1, during: &step{advance: 6 * time.Minute, req: post("order-42", `{"amount":2}`), status: 422, problem: dedupe.ProblemKeyReused, runs: 1}},
			{req: req, status: 201, replayed: true, runs: 1, sameAs: 1},
		}},
		{name: "keys are scoped by route", steps: []step{
			{req: req, status: 201, runs: 1},
			{req: req.with(func(r *request) { r.path = "/refunds" }), status: 201, runs: 2},
			{req: req.with(func(r *request) { r.method = "PUT" }), status: 201, runs: 3},
			{req: req, status: 201, replayed: true, runs: 3, sameAs: 1},
			{req: req.with(func(r *request) { r.path = "/refunds" }), status: 201, replayed: true, runs: 3, sameAs: 2},
		}},
		{name: "separator characters cannot merge scopes", steps: []step{
			{req: req.with(func(r *request) { r.path = "/a"; r.keys = []string{"b|c"}; r.principal = "p" }), status: 201, runs: 1},
			{req: req.with(func(r *request) { r.path = "/a|b"; r.keys = []string{"c"}; r.principal = "p" }), status: 201, runs: 2},
			{req: req.with(func(r *request) { r.path = "/a"; r.keys = []string{"b%7Cc"}; r.principal = "p" }), status: 201, runs: 3},
			{req: req.with(func(r *request) { r.path = "/a"; r.keys = []string{"b|c"}; r.principal = "p" }), status: 201, replayed: true, runs: 3, sameAs: 1},
		}},
	}

	// What is stored: every status below 500 except 408, 425 and 429. The
	// expectations are written out, not asked of DefaultKeep, so that a
	// change to the default fails here.
	keep := []struct {
		status int
		kept   bool
	}{
		{200, true}, {201, true}, {202, true}, {204, true}, {301, true}, {400, true}, {402, true},
		{404, true}, {409, true}, {410, true}, {422, true}, {499, true},
		{408, false}, {425, false}, {429, false}, {500, false}, {502, false}, {503, false}, {504, false},
	}
	for _, k := range keep {
		status, kept := k.status, k.kept
		second := step{req: req, status: 201, runs: 2}
		if kept {
			second = step{req: req, status: status, replayed: true, runs: 1, sameAs: 1}
		}
		sc = append(sc, scenario{
			name:    fmt.Sprintf("status %d kept=%v", status, kept),
			handler: statusOnce(status),
			steps:   []step{{req: req, status: status, runs: 1}, second},
		})
	}
	sc = append(sc, scenario{
		name:    "keep predicate is configurable",
		cfg:     &dedupe.HTTPConfig{Keep: func(status int) bool { return status < 300 }},
		handler: statusOnce(402),
		steps:   []step{{req: req, status: 402, runs: 1}, {req: req, status: 201, runs: 2}, {req: req, status: 201, replayed: true, runs: 2, sameAs: 2}},
	})
	return sc
}

func ptr[T any](v T) *T { return &v }

// with returns s expecting runs handler executions.
func (s step) with(runs int32) step { s.runs = runs; return s }

func TestHTTPBehaviour(t *testing.T) { runBehaviours(t, memoryBackend) }

// runBehaviours runs the behaviour table on every adapter over b.
func runBehaviours(t *testing.T, b backend) {
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			for _, sc := range behaviours() {
				if sc.repeatedHeader && a.lastHeaderWins {
					continue // TestALBSingleValueKeepsLastHeader
				}
				t.Run(sc.name, func(t *testing.T) { sc.run(t, b, a) })
			}
		})
	}
}

// TestHTTPConcurrentDuplicates sends 100 identical requests at once: the
// handler runs exactly once, and every other answer is a 409 or a
// byte-identical replay. In the gated case the handler holds until the 99
// others have been answered, so all of them must be 409s; in the free case
// they race the handler and get a mix.
func TestHTTPConcurrentDuplicates(t *testing.T) { runConcurrentDuplicates(t, memoryBackend) }

func runConcurrentDuplicates(t *testing.T, b backend) {
	const n = 100
	for _, a := range adapters {
		for _, gated := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/gated=%v", a.name, gated), func(t *testing.T) {
				var answered atomic.Int32
				gate := make(chan struct{})
				sc := scenario{}
				if gated {
					sc.handler = func(run int32, body []byte) (reply, error) {
						<-gate
						return created(run, body)
					}
				}
				e := newEnv(t, b, a, sc)
				req := post("same-key", `{"amount":1250,"currency":"EUR","source":"tok_visa"}`)
				var wg sync.WaitGroup
				results := make([]wire, n)
				errs := make([]error, n)
				start := make(chan struct{})
				for i := range n {
					wg.Go(func() {
						<-start
						results[i], errs[i] = e.invoke(context.Background(), req)
						if answered.Add(1) == n-1 && gated {
							close(gate)
						}
					})
				}
				close(start)
				wg.Wait()
				if runs := e.runs.Load(); runs != 1 {
					t.Fatalf("handler ran %d times, want 1", runs)
				}
				var fresh []wire
				var replays, conflicts int
				for i, w := range results {
					switch {
					case errs[i] != nil:
						t.Fatalf("request %d: %v", i, errs[i])
					case w.status == 409:
						conflicts++
					case w.get(dedupe.HeaderReplayed) == "true":
						replays++
						defer func() {
							if !equalWire(w.withoutReplayed(), fresh[0]) {
								t.Errorf("request %d: replay %v differs from %v", i, w, fresh[0])
							}
						}()
					default:
						fresh = append(fresh, w)
					}
				}
				if len(fresh) != 1 {
					t.Fatalf("got %d fresh answers, want 1", len(fresh))
				}
				if gated && conflicts != n-1 {
					t.Errorf("got %d conflicts, want %d", conflicts, n-1)
				}
				last, _ := e.invoke(context.Background(), req)
				if !equalWire(last.withoutReplayed(), fresh[0]) || last.get(dedupe.HeaderReplayed) != "true" {
					t.Errorf("later retry = %v, want replay of %v", last, fresh[0])
				}
				t.Logf("1 fresh, %d replays, %d conflicts", replays, conflicts)
			})
		}
	}
}
