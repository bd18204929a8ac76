package dedupe

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPConfig configures the HTTP adapters (HTTPAPI, RESTAPI, FunctionURL,
// ALB and Middleware), which all share one implementation. The zero value
// (or a nil *HTTPConfig) is valid for the API Gateway and Function URL
// adapters and means: POST, PATCH, PUT and DELETE are guarded; a missing
// key lets the request through unguarded; routes and principals are
// resolved as DefaultPrincipal and the adapters document, and a guarded
// request with no principal is refused (500) because SharedScope is off;
// no headers are fingerprinted; bodies are limited to
// DefaultMaxBodyBytes; DefaultKeep decides what is stored; events go to
// the guard's Logger. Middleware needs Principal or SharedScope; ALB
// needs ALBAuth, Principal or SharedScope.
//
// Functions that receive the request get the adapter's event: a
// *events.APIGatewayV2HTTPRequest (HTTPAPI), *events.APIGatewayProxyRequest
// (RESTAPI), *events.LambdaFunctionURLRequest (FunctionURL),
// *events.ALBTargetGroupRequest (ALB) or an *http.Request (Middleware).
//
// How one request is decided:
//
//	method not guarded ────────────────────────────────► handler, unguarded
//	no Idempotency-Key ── RequireKey(route)? ── no ────► handler, unguarded
//	                                         └─ yes ───► 400 key missing
//	key not 1..255 printable ASCII, or repeated ───────► 400 key invalid
//	body over MaxBodyBytes ────────────────────────────► 413 (nothing claimed)
//	no principal and SharedScope off ──────────────────► 500, handler not run (logged)
//	claim scope(API and stage, route, principal, key) with the fingerprint:
//	  fresh ──► handler ── Keep(status)? ── yes ───────► stored, answered
//	                    │                 └─ no ───────► key released, answered
//	                    └── error or panic ────────────► key released, error / panic
//	  completed, same fingerprint ─────────────────────► replay + Idempotent-Replayed: true
//	  completed, response was too large to keep or lost ► 409 response unavailable
//	  completed, response not readable now (S3) ───────► 503 response unreadable + Retry-After
//	  in progress, or another writer of the key seen ──► (Config.Wait: the replay once it finishes)
//	             └─ else ──────────────────────────────► 409 + Retry-After (a hint, see ConflictError)
//	  different fingerprint (running, stranded, done) ─► 422, whatever failed after the read
//	  no answer (store unavailable) ── Config.FailOpen? ── no ► 503 + Retry-After, handler not run
//	                                        └─ yes ────► handler, unguarded (logged)
//	  any other store error (key rejected, bad record) ► 500, handler not run (logged)
type HTTPConfig struct {
	// Methods lists the methods that are guarded; others always pass
	// through. Nil means POST, PATCH, PUT and DELETE.
	Methods []string

	// RequireKey reports whether a route requires an Idempotency-Key: a
	// guarded request without one is refused with 400. Routes are
	// "METHOD /path", see Route. Nil means no route requires a key, and
	// requests without one pass through unguarded. RequireKeyOn builds
	// one from a list.
	RequireKey func(route string) bool

	// Route returns the route of a request, "METHOD /path-template", which
	// scopes keys and enters the fingerprint. Nil means: the route key of
	// an HTTP API ("$default" and "ANY" routes use the actual method and
	// path), the method and resource of a REST API, the method and path of
	// a Function URL, and the method and ServeMux pattern (else path) for
	// Middleware. What it returns also names the route in Event.Route
	// (logs, metrics, spans), so return a template, never the raw path;
	// without it, Event.Route never holds a raw path (see Event.Route).
	Route func(req any) string

	// Principal returns the caller's identity, which scopes keys so one
	// caller can never receive another's response; "" means the caller is
	// unknown. Nil means DefaultPrincipal, which finds nothing for
	// Middleware: set it there (Middleware panics at construction when
	// neither Principal nor SharedScope is set).
	Principal func(req any) string

	// SharedScope lets guarded requests with no principal share one key
	// space per API, stage and route, so that any two anonymous callers
	// sending the same key get the same answer. Set it only for APIs whose
	// callers are anonymous and whose keys are unguessable (random UUIDs);
	// the adapter logs a warning when it is built with it. Requests that do
	// carry an identity are still scoped by it. The default, false,
	// refuses a guarded request with no principal with 500 and never runs
	// the handler (ErrNoPrincipal in the log), because sharing a scope
	// silently is how one tenant receives another's response.
	SharedScope bool

	// FingerprintHeaders names request headers (case-insensitive) that
	// enter the fingerprint besides method, route, path parameters, query
	// and body. Nil means none.
	FingerprintHeaders []string

	// MaxBodyBytes refuses guarded requests with larger bodies (decoded
	// from base64 where needed) with 413, before anything is claimed.
	// Zero means DefaultMaxBodyBytes; negative means no limit.
	MaxBodyBytes int64

	// Keep reports whether a response with this status is stored and
	// replayed; otherwise the key is released so the client's retry runs
	// again. Nil means DefaultKeep.
	Keep func(status int) bool

	// OnReplay, when set, may adjust every replayed response before it is
	// sent, for example to add a header. It sees a copy: the stored
	// record is not changed.
	OnReplay func(ctx context.Context, r *Result)

	// Logger receives the adapter's warning when it is built with
	// SharedScope. Nil means the guard's Config.Logger, which also
	// receives the one event of every guarded request; set that one.
	Logger *slog.Logger

	// KeyHeader names the request header (case-insensitive) that carries
	// the idempotency key instead of Idempotency-Key, e.g. "X-Request-Id".
	// Its value is parsed as ParseKey parses Idempotency-Key. Empty means
	// HeaderIdempotencyKey. Ignored when Key is set.
	KeyHeader string

	// Key returns the idempotency key of a request from anything in it
	// (the adapter's event, see above): a header, a path parameter, a
	// field of the body. "" means the request has none (RequireKey then
	// decides). The key must be 1 to 255 printable ASCII characters, else
	// the request is refused with 400. Nil means the KeyHeader header.
	Key func(req any) string

	// Fingerprint returns what of the body enters the fingerprint
	// (CanonicalJSON when it is JSON), e.g. JSONFields(body, "amount",
	// "currency") to validate only the fields that identify the request,
	// or WithoutJSONFields(body, "sentAt"). An error refuses the request
	// with 400 (ProblemBodyUnreadable) before anything is claimed. Nil
	// means the whole body. Method, route, path parameters, query and
	// FingerprintHeaders enter the fingerprint whatever it returns.
	Fingerprint func(req any, body []byte) ([]byte, error)

	// Retention returns how long a completed request on route is
	// replayed, overriding Config.Retention for it; zero means the
	// guard's. Nil means the guard's for every route.
	Retention func(route string) time.Duration

	// ALBAuth, for ALB only, says that the load balancer's listener
	// authenticates users, and takes the caller from the user claims it
	// signs, verified (see ALBAuth). Nil means it does not: set
	// Principal or SharedScope then. The other adapters panic when it
	// is set.
	ALBAuth *ALBAuth
}

// DefaultKeep is the default HTTPConfig.Keep: every status below 500 is
// stored except the transient 408 Request Timeout, 425 Too Early and 429
// Too Many Requests. 5xx answers release the key, so retries run again.
func DefaultKeep(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status < 500
}

// RequireKeyOn returns an HTTPConfig.RequireKey that requires a key on
// exactly the given routes, written as the adapter resolves them, e.g.
// "POST /payments".
func RequireKeyOn(routes ...string) func(route string) bool {
	set := make(map[string]struct{}, len(routes))
	for _, r := range routes {
		set[r] = struct{}{}
	}
	return func(route string) bool {
		_, ok := set[route]
		return ok
	}
}

// httpEvent is one adapter's view of a request: the little the shared core
// needs, computed lazily, so unguarded requests cost almost nothing.
type httpEvent interface {
	// method returns the request method.
	method() string
	// route returns the default route, "METHOD /path".
	route() string
	// routeKnown reports whether route is the template the request
	// matched, as RequireKeyOn lists routes (false: a raw path).
	routeKnown() bool
	// routeLabel returns the request's route as Event.Route reports it,
	// for logs, metrics and spans: "METHOD template", from a route key,
	// resource, or pattern the gateway or the mux matched, never from
	// the client's path; RouteNone stands for the path where there is
	// no template.
	routeLabel() string
	// scope returns what identifies the deployment that received the
	// request: the API ID and stage, the Function URL's domain; "" when
	// the event has none (net/http).
	scope() string
	// keyHeader returns the first Idempotency-Key value and how many
	// values the request carries.
	keyHeader() (string, int)
	// header returns a request header by lower-case name, repeated values
	// joined with ",".
	header(lname string) (string, bool)
	// appendTarget appends fingerprint parts for what identifies the
	// target besides the route: path parameters, raw path, query.
	appendTarget(buf []byte) []byte
	// body returns the request body, decoded from base64 if need be.
	// tooLarge reports a body over limit (limit < 0: no limit).
	body(limit int64) (b []byte, tooLarge bool, err error)
	// raw returns the event for HTTPConfig functions.
	raw() any
}

// httpCore holds the decisions shared by every HTTP adapter.
type httpCore struct {
	g          *Guard
	methods    []string
	requireKey func(string) bool
	route      func(any) string
	principal  func(any) string
	shared     bool
	fpHeaders  []string // lower case
	maxBody    int64
	keep       func(Result) bool
	onReplay   func(context.Context, *Result)
	log        *slog.Logger
	opts       httpOptions
	typical    routeDurations

	// identify, when set, resolves the caller instead of principal, and
	// may refuse the request (ALB's verified user claims).
	identify func(context.Context, httpEvent) (string, *refusal)
}

func newHTTPCore(g *Guard, cfg *HTTPConfig) *httpCore {
	var c HTTPConfig
	if cfg != nil {
		c = *cfg
	}
	if c.ALBAuth != nil {
		panic("dedupe: HTTPConfig.ALBAuth is for the ALB adapter only; remove it")
	}
	core := &httpCore{
		g:          g,
		methods:    []string{http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete},
		requireKey: c.RequireKey,
		route:      c.Route,
		principal:  c.Principal,
		shared:     c.SharedScope,
		onReplay:   c.OnReplay,
		maxBody:    c.MaxBodyBytes,
		log:        c.Logger,
	}
	if c.Methods != nil {
		core.methods = make([]string, len(c.Methods))
		for i, m := range c.Methods {
			core.methods[i] = strings.ToUpper(m)
		}
	}
	if core.principal == nil {
		core.principal = DefaultPrincipal
	}
	for _, h := range c.FingerprintHeaders {
		core.fpHeaders = append(core.fpHeaders, strings.ToLower(h))
	}
	slices.Sort(core.fpHeaders)
	core.fpHeaders = slices.Compact(core.fpHeaders)
	if core.maxBody == 0 {
		core.maxBody = DefaultMaxBodyBytes
	}
	keep := c.Keep
	if keep == nil {
		keep = DefaultKeep
	}
	core.keep = func(r Result) bool { return keep(r.StatusCode) }
	if core.log == nil {
		core.log = g.cfg.Logger
	}
	core.opts = newHTTPOptions(&c)
	if core.shared {
		core.log.Warn("dedupe: SharedScope is on: guarded requests without a principal share one key space per route")
	}
	return core
}

// serve decides one request. run calls the wrapped handler: guarded
// reports whether its response must be converted to a Result (it is
// stored); for unguarded calls run may return a zero Result.
//
// serve returns respond true with the Result to answer (a problem or a
// replay) when the handler did not run; respond false when the adapter
// must answer with the handler's own response (it ran, guarded or not).
// A non-nil error is the handler's, returned after the key was released.
func (c *httpCore) serve(ctx context.Context, ev httpEvent, run func(ctx context.Context, guarded bool) (Result, error)) (res Result, respond bool, err error) {
	method := strings.ToUpper(ev.method())
	if !slices.Contains(c.methods, method) {
		_, err := run(ctx, false)
		return Result{}, false, err
	}
	// route scopes the key and enters the fingerprint (it may be the raw
	// path); label is its bounded name in the event (Event.Route).
	var route, label string
	if c.route != nil {
		route = c.route(ev.raw())
		label = route
	} else {
		route, label = ev.route(), ev.routeLabel()
	}
	e := Event{Route: label}
	// refuse answers a request the guard never saw, with its one event.
	refuse := func(outcome, problem string, err error) (Result, bool, error) {
		var retry time.Duration
		if problem == ProblemStoreUnavailable {
			retry = storeRetryAfter
		}
		res := problemResult(problem, retry)
		e.Outcome, e.Status, e.Err = outcome, res.StatusCode, err
		c.g.emit(ctx, e)
		return res, true, nil
	}
	if route == "" {
		return refuse(OutcomeInvalidRequest, ProblemInternal, errEmptyRoute)
	}
	if c.requireKey != nil && c.route == nil && !ev.routeKnown() {
		// RequireKey could never match a route made of the raw path: a
		// keyless request would pass unguarded. Refuse it, loudly.
		return refuse(OutcomeInvalidRequest, ProblemInternal, ErrRouteUnknown)
	}
	raw, n := c.opts.keyValue(ev)
	switch {
	case n == 0 && c.requireKey != nil && c.requireKey(route):
		return refuse(OutcomeMissingKey, ProblemKeyMissing, nil)
	case n == 0:
		_, err := run(ctx, false)
		return Result{}, false, err
	case n > 1:
		return refuse(OutcomeInvalidKey, ProblemKeyInvalid, errRepeatedKey)
	}
	key, err := c.opts.parseKey(raw)
	if err != nil {
		return refuse(OutcomeInvalidKey, ProblemKeyInvalid, err)
	}
	body, tooLarge, err := ev.body(c.maxBody)
	switch {
	case tooLarge:
		return refuse(OutcomeInvalidRequest, ProblemBodyTooLarge, nil)
	case err != nil:
		return refuse(OutcomeInvalidRequest, ProblemBodyUnreadable, err)
	}
	fpBody, err := c.opts.fingerprintBody(ev.raw(), body)
	if err != nil {
		return refuse(OutcomeInvalidRequest, ProblemBodyUnreadable, fmt.Errorf("HTTPConfig.Fingerprint: %w", err))
	}

	principal, no := c.identity(ctx, ev)
	if no != nil {
		return refuse(no.outcome, no.problem, no.err)
	}
	if principal == "" && !c.shared {
		return refuse(OutcomeInvalidRequest, ProblemInternal, ErrNoPrincipal)
	}
	call := Call{
		Key:         scopeKey(ev.scope(), route, principal, key),
		Fingerprint: c.fingerprint(method, route, ev, fpBody),
		Keep:        c.keep,
		Retention:   c.opts.retention(route),
	}
	var ran bool
	var handlerErr error
	c.g.observe(ctx, &e, func(ctx context.Context) (Outcome, error) {
		out, gerr := c.g.do(ctx, call, func(ctx context.Context) (Result, error) {
			ran = true
			r, err := run(ctx, true)
			handlerErr = err
			e.Status = r.StatusCode
			return r, err
		}, &e)
		res, respond, err = c.decide(ctx, label, out, gerr, ran, handlerErr, &e)
		return out, gerr
	})
	return res, respond, err
}

// identity returns the caller of a guarded request, or why it is refused.
func (c *httpCore) identity(ctx context.Context, ev httpEvent) (string, *refusal) {
	if c.identify != nil {
		return c.identify(ctx, ev)
	}
	return c.principal(ev.raw()), nil
}

// Errors of requests refused before the guard, for the log only.
var (
	errEmptyRoute  = errors.New("dedupe: HTTPConfig.Route returned an empty route")
	errRepeatedKey = errors.New("dedupe: Idempotency-Key header repeated")
)

// decide turns the guard's answer into the adapter's, and notes the
// status answered in e. route is the route's label (Event.Route), under
// which the handler's typical duration is kept: bounded, whatever paths
// clients send.
func (c *httpCore) decide(ctx context.Context, route string, out Outcome, err error, ran bool, handlerErr error, e *Event) (Result, bool, error) {
	if handlerErr != nil {
		e.Status = http.StatusInternalServerError // what API Gateway answers an invoke error
		return Result{}, false, handlerErr
	}
	if ran {
		// Also with ErrNotStored, ErrResultTooLarge or ErrRanUnguarded
		// (in e): the handler's real response goes to the client.
		c.typical.observe(route, e.HandlerLatency)
		return Result{}, false, nil
	}
	var res Result
	if err == nil {
		res = out.Result
		if res.Headers == nil {
			res.Headers = make(map[string][]string, 1)
		}
		res.Headers[HeaderReplayed] = []string{"true"}
		if c.onReplay != nil {
			c.onReplay(ctx, &res)
		}
	} else {
		res = errorResult(err, func(conflict *ConflictError) time.Duration {
			return conflict.RetryAfterHint(c.g.Now(), c.typical.get(route))
		})
	}
	e.Status = res.StatusCode
	return res, true, nil
}

// ErrorResult returns the response the HTTP adapters answer a guard's
// error with, for adapters written by hand over Guard.Do: its status, the
// problem document (ProblemContentType) and, where a retry may succeed
// later, Retry-After. now is the time a 409's Retry-After is computed at,
// the guard's clock (Guard.Now): the lease's end, rounded up to whole
// seconds. The body never holds the error's text.
//
//	*ConflictError wrapping ErrInProgress        409 ProblemInProgress, Retry-After
//	*ConflictError (ErrFingerprintMismatch)      422 ProblemKeyReused
//	ErrResultOmitted                             409 ProblemResultUnavailable
//	ErrResultUnreadable                          503 ProblemResultUnreadable, Retry-After 1
//	ErrStoreUnavailable                          503 ProblemStoreUnavailable, Retry-After 1
//	ErrInvalidKey                                400 ProblemKeyInvalid
//	any other error                              500 ProblemInternal
//
// Errors that come with the function's result (ErrNotStored,
// ErrResultTooLarge, ErrResultUnencodable, ErrRanUnguarded) are not
// answers: when the function ran, send its response, as the adapters do,
// and log the error. A nil err returns the zero Result.
func ErrorResult(err error, now time.Time) Result {
	if err == nil {
		return Result{}
	}
	return errorResult(err, func(conflict *ConflictError) time.Duration { return conflict.RetryAfter(now) })
}

// errorResult is ErrorResult, with the Retry-After of a 409 from
// inProgress.
func errorResult(err error, inProgress func(*ConflictError) time.Duration) Result {
	var conflict *ConflictError
	switch {
	case errors.As(err, &conflict) && errors.Is(err, ErrInProgress):
		return problemResult(ProblemInProgress, inProgress(conflict))
	case errors.As(err, &conflict):
		return problemResult(ProblemKeyReused, 0)
	case errors.Is(err, ErrResultOmitted):
		return problemResult(ProblemResultUnavailable, 0)
	case errors.Is(err, ErrResultUnreadable):
		return problemResult(ProblemResultUnreadable, storeRetryAfter)
	case errors.Is(err, ErrStoreUnavailable):
		return problemResult(ProblemStoreUnavailable, storeRetryAfter)
	case errors.Is(err, ErrInvalidKey):
		return problemResult(ProblemKeyInvalid, 0)
	}
	// A permanent failure would fail the same way on every retry: it is
	// ours, not the client's, and no reason to invite retries.
	return problemResult(ProblemInternal, 0)
}

// routeDurations keeps, per route, a moving average of how long the
// handler takes: what a 409's Retry-After is based on.
type routeDurations struct{ m sync.Map } // route -> *atomic.Int64 (ns)

// observe folds one handler duration into route's average (weight 1/4).
func (r *routeDurations) observe(route string, d time.Duration) {
	v, _ := r.m.LoadOrStore(route, new(atomic.Int64))
	avg := v.(*atomic.Int64)
	for {
		old := avg.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)/4
		}
		if avg.CompareAndSwap(old, next) {
			return
		}
	}
}

// get returns route's average, 0 when none was seen.
func (r *routeDurations) get(route string) time.Duration {
	if v, ok := r.m.Load(route); ok {
		return time.Duration(v.(*atomic.Int64).Load())
	}
	return 0
}

// fingerprint hashes what identifies a request: method, route, target,
// the configured headers and the body.
func (c *httpCore) fingerprint(method, route string, ev httpEvent, body []byte) string {
	buf := make([]byte, 0, 64+len(route)+len(body))
	buf = appendPart(buf, method)
	buf = appendPart(buf, route)
	buf = ev.appendTarget(buf)
	for _, name := range c.fpHeaders {
		buf = appendPart(buf, name)
		if v, ok := ev.header(name); ok {
			buf = appendPart(append(buf, 1), v)
		} else {
			buf = append(buf, 0)
		}
	}
	return sumHex(appendBody(buf, body))
}

// appendSorted appends tag and the entries of m in key order, each
// length-prefixed, to buf. Nothing is appended for an empty map.
func appendSorted(buf []byte, tag string, m map[string]string) []byte {
	if len(m) == 0 {
		return buf
	}
	buf = appendPart(buf, tag)
	buf = appendPart(buf, strconv.Itoa(len(m)))
	for _, k := range slices.Sorted(mapKeys(m)) {
		buf = appendPart(appendPart(buf, k), m[k])
	}
	return buf
}

// appendSortedMulti is appendSorted for multi-valued maps.
func appendSortedMulti(buf []byte, tag string, m map[string][]string) []byte {
	if len(m) == 0 {
		return buf
	}
	buf = appendPart(buf, tag)
	buf = appendPart(buf, strconv.Itoa(len(m)))
	for _, k := range slices.Sorted(mapKeys(m)) {
		buf = appendPart(buf, k)
		buf = appendPart(buf, strconv.Itoa(len(m[k])))
		for _, v := range m[k] {
			buf = appendPart(buf, v)
		}
	}
	return buf
}

// mapKeys iterates over the keys of m.
func mapKeys[V any](m map[string]V) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// routeOf builds "METHOD path".
func routeOf(method, path string) string {
	return strings.ToUpper(method) + " " + path
}

// The body encoding of a stored event response is kept in a pseudo-header,
// which no real header can collide with (':' is not a token character) and
// which the adapters never send.
const (
	hdrBodyEncoding = ":dedupe-body"
	// encBase64 marks a body stored decoded that was sent base64-encoded
	// (standard encoding, padded): it is re-encoded on replay.
	encBase64 = "base64"
	// encVerbatim marks a base64 body that did not round-trip through the
	// standard encoding; it is stored and replayed as sent.
	encVerbatim = "verbatim"
)

// storeBody returns the bytes to store for an event response body and sets
// the encoding pseudo-header in h when the body was base64.
func storeBody(h map[string][]string, body string, isBase64 bool) []byte {
	if !isBase64 {
		return []byte(body)
	}
	dec, err := base64.StdEncoding.DecodeString(body)
	if err != nil || base64.StdEncoding.EncodedLen(len(dec)) != len(body) {
		h[hdrBodyEncoding] = []string{encVerbatim}
		return []byte(body)
	}
	h[hdrBodyEncoding] = []string{encBase64}
	return dec
}

// replayBody returns the event body and base64 flag for a stored result,
// exactly as the handler first sent them.
func replayBody(r Result) (string, bool) {
	switch first(r.Headers[hdrBodyEncoding]) {
	case encBase64:
		return base64.StdEncoding.EncodeToString(r.Body), true
	case encVerbatim:
		return string(r.Body), true
	}
	return string(r.Body), false
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// isPseudo reports whether a stored header is internal.
func isPseudo(name string) bool { return strings.HasPrefix(name, ":") }

// isSetCookie reports whether name is Set-Cookie, in any case.
func isSetCookie(name string) bool { return strings.EqualFold(name, "Set-Cookie") }

// eventHeaders merges an event response's headers into the stored form,
// as API Gateway merges them: a single value is kept unless the same
// key-value pair is in multi, then multi values, then cookies; every
// Set-Cookie spelling goes under "Set-Cookie".
func eventHeaders(single map[string]string, multi map[string][]string, cookies []string) map[string][]string {
	h := make(map[string][]string, len(single)+len(multi)+1)
	// One backing array for the single values; capacity-limited slices
	// keep a later append from overwriting a neighbour.
	vals := make([]string, 0, len(single))
	for k, v := range single {
		if slices.Contains(multi[k], v) {
			continue
		}
		if isSetCookie(k) {
			h["Set-Cookie"] = append(h["Set-Cookie"], v)
			continue
		}
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	for k, vs := range multi {
		if isSetCookie(k) {
			k = "Set-Cookie"
		}
		h[k] = append(h[k], vs...)
	}
	if len(cookies) > 0 {
		h["Set-Cookie"] = append(h["Set-Cookie"], cookies...)
	}
	return h
}
