package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"time"
)

// Defaults for the zero values of Config.
const (
	// DefaultIntegrationTimeout is API Gateway's limit on a synchronous
	// integration: a function that has not answered after it gets a 503.
	DefaultIntegrationTimeout = 30 * time.Second

	// DefaultMaxBodyBytes is API Gateway's payload limit, 10 MB.
	DefaultMaxBodyBytes = 10 << 20

	// DefaultMaxHeaderBytes is API Gateway HTTP API's limit on the total
	// combined size of the request line and header values, 10240 bytes.
	DefaultMaxHeaderBytes = 10240

	// DefaultMaxPayloadBytes is Lambda's limit on a synchronous
	// invocation's payload, 6 MB, which holds for the event (the JSON the
	// gateway sends, base64 bodies included) and for the function's
	// response alike.
	DefaultMaxPayloadBytes = 6 << 20

	// DefaultAPIID and DefaultAccountID fill requestContext.apiId and
	// accountId when Config leaves them empty.
	DefaultAPIID     = "local"
	DefaultAccountID = "123456789012"
)

// Config configures a [Gateway]. Only Routes is required.
type Config struct {
	// Routes are the API's routes. Each request goes to the most specific
	// route that matches it, else to "$default" if declared, else gets 404.
	Routes []Route

	// IntegrationTimeout is how long the gateway waits for a function
	// before it answers 503. The invocation itself runs on. Zero means
	// DefaultIntegrationTimeout.
	IntegrationTimeout time.Duration

	// MaxBodyBytes is the largest request body accepted; larger ones get
	// 413. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// MaxHeaderBytes bounds the request line and the header values
	// together; a larger request gets 431 and never reaches the function.
	// Zero means DefaultMaxHeaderBytes.
	MaxHeaderBytes int

	// MaxPayloadBytes is the function's invocation payload limit. An
	// event larger than this is not sent (413, as when Lambda refuses the
	// invocation with RequestEntityTooLargeException), and a response
	// larger than this is answered 500, as Lambda reports it as a function
	// error (Function.ResponseSizeTooLarge) to API Gateway. Neither
	// replaces the execution environment. Zero means
	// DefaultMaxPayloadBytes.
	MaxPayloadBytes int

	// APIID and AccountID fill requestContext. Empty means DefaultAPIID
	// and DefaultAccountID.
	APIID     string
	AccountID string

	// Now returns the current time for requestContext.time and timeEpoch
	// and for JWT expiry. Nil means time.Now.
	Now func() time.Time

	// Logger gets one line per request (method, route, status, latency,
	// whether the response was an idempotent replay) and a line per failed
	// invocation. Nil discards them.
	Logger *log.Logger
}

// Gateway serves an HTTP API's routes by invoking the functions behind
// them. It is an http.Handler, safe for concurrent use.
type Gateway struct {
	routes    *routeTable
	timeout   time.Duration
	maxBody   int64
	maxHeader int
	maxEvent  int
	apiID     string
	accountID string
	now       func() time.Time
	log       *log.Logger
}

// New checks cfg's routes and returns a Gateway. It logs once that
// authorizers are mirrored without verifying signatures.
func New(cfg Config) (*Gateway, error) {
	routes, err := newRouteTable(cfg.Routes)
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		routes:    routes,
		timeout:   cfg.IntegrationTimeout,
		maxBody:   cfg.MaxBodyBytes,
		maxHeader: cfg.MaxHeaderBytes,
		maxEvent:  cfg.MaxPayloadBytes,
		apiID:     cfg.APIID,
		accountID: cfg.AccountID,
		now:       cfg.Now,
		log:       cfg.Logger,
	}
	if g.timeout <= 0 {
		g.timeout = DefaultIntegrationTimeout
	}
	if g.maxBody <= 0 {
		g.maxBody = DefaultMaxBodyBytes
	}
	if g.maxHeader <= 0 {
		g.maxHeader = DefaultMaxHeaderBytes
	}
	if g.maxEvent <= 0 {
		g.maxEvent = DefaultMaxPayloadBytes
	}
	if g.apiID == "" {
		g.apiID = DefaultAPIID
	}
	if g.accountID == "" {
		g.accountID = DefaultAccountID
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.log == nil {
		g.log = log.New(io.Discard, "", 0)
	}
	g.log.Printf("note: authorizers are mirrored WITHOUT verifying signatures (local use only): AWS_IAM routes need a SigV4-shaped Authorization header, whose access key ID names the caller; JWT routes decode the bearer token's claims; other routes pass no identity")
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	requestID := newRequestID()
	routeKey := "-"
	resp := g.serve(r, requestID, &routeKey)
	resp.write(w, requestID)
	replayed := "no"
	if resp.header.Get("Idempotent-Replayed") == "true" {
		replayed = "yes"
	}
	g.log.Printf("%s %s route=%q status=%d latency=%v replayed=%s id=%s",
		r.Method, r.URL.RequestURI(), routeKey, resp.status, time.Since(start).Round(100*time.Microsecond), replayed, requestID)
}

// serve answers one request; it sets *routeKey to the matched route.
func (g *Gateway) serve(r *http.Request, requestID string, routeKey *string) *response {
	now := g.now()
	if n := headerSize(r); n > g.maxHeader {
		g.log.Printf("%s: request line and header values of %d bytes exceed %d", requestID, n, g.maxHeader)
		return message(http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large")
	}
	rt, params := g.routes.lookup(r.Method, r.URL.Path)
	if rt == nil {
		return message(http.StatusNotFound, "Not Found")
	}
	*routeKey = rt.key

	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, g.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return message(http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		}
		return message(http.StatusBadRequest, "Bad Request")
	}
	authorizer, refused := g.authorize(r, rt, requestID, now)
	if refused != nil {
		return refused
	}
	payload, err := json.Marshal(g.buildEvent(r, body, rt, params, requestID, now, authorizer))
	if err != nil {
		g.log.Printf("%s: encode event: %v", requestID, err)
		return message(http.StatusInternalServerError, "Internal Server Error")
	}
	if len(payload) > g.maxEvent {
		g.log.Printf("%s: %s: event of %d bytes exceeds the invocation payload limit of %d: not invoked", requestID, rt.key, len(payload), g.maxEvent)
		return message(http.StatusRequestEntityTooLarge, "Request Entity Too Large")
	}

	timeout := g.timeout
	if rt.timeout > 0 {
		timeout = rt.timeout
	}
	result, err := invoke(r.Context(), rt.fn, payload, timeout)
	switch {
	case errors.Is(err, errIntegrationTimeout):
		g.log.Printf("%s: %s: no answer within %v", requestID, rt.key, timeout)
		return message(http.StatusServiceUnavailable, "Service Unavailable")
	case errors.Is(err, ErrThrottled):
		g.log.Printf("%s: %s: %v", requestID, rt.key, err)
		return message(http.StatusTooManyRequests, "Too Many Requests")
	case err != nil:
		g.log.Printf("%s: %s: invocation failed: %v", requestID, rt.key, err)
		return message(http.StatusInternalServerError, "Internal Server Error")
	}
	if len(result) > g.maxEvent {
		g.log.Printf("%s: %s: response of %d bytes exceeds the invocation payload limit of %d (Function.ResponseSizeTooLarge)", requestID, rt.key, len(result), g.maxEvent)
		return message(http.StatusInternalServerError, "Internal Server Error")
	}
	resp, ignored, err := mapResult(result)
	if err != nil {
		g.log.Printf("%s: %s: %v", requestID, rt.key, err)
		return message(http.StatusInternalServerError, "Internal Server Error")
	}
	if len(ignored) > 0 {
		g.log.Printf("%s: %s: warning: multiValueHeaders %v ignored: payload format 2.0 has none (use headers with comma-joined values, and cookies)", requestID, rt.key, ignored)
	}
	return resp
}

// headerSize returns what API Gateway counts against its header limit:
// the request line and every header value (Host included).
func headerSize(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + len(r.Host)
	for _, vs := range r.Header {
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
}

// errIntegrationTimeout means the function did not answer within the
// integration timeout.
var errIntegrationTimeout = errors.New("integration timeout")

// invoke calls fn and waits at most timeout, the integration timeout. The
// invocation is not cancelled when the client goes away or the timeout
// passes: as behind API Gateway, the function runs to its own end.
func invoke(ctx context.Context, fn Invoker, payload []byte, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), timeout, errIntegrationTimeout)
	defer cancel()
	result, err := fn.Invoke(ctx, payload)
	if err != nil && ctx.Err() != nil && context.Cause(ctx) == errIntegrationTimeout {
		return nil, errIntegrationTimeout
	}
	return result, err
}
