package dedupe

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// ALB wraps the handler of an Application Load Balancer's Lambda target
// like HTTPAPI.
//
// Keys are scoped by the target group's ARN (requestContext.elb;
// a guarded request without one is refused with 500, ErrNoEventSource
// in the log), by method and raw path ("POST /payments"), unless
// HTTPConfig.Route says otherwise, and by the caller. ALB has no
// authorizer, and a client can send the x-amzn-oidc-* headers itself, so
// DefaultPrincipal finds no caller in an ALB request. Set exactly one of:
//
//   - HTTPConfig.ALBAuth, when the listener rule authenticates users
//     (authenticate-oidc or authenticate-cognito): the caller is the
//     "sub" of the user claims the load balancer signed, verified (see
//     ALBAuth);
//   - HTTPConfig.Principal, when the function identifies callers itself;
//   - HTTPConfig.SharedScope, when callers are anonymous.
//
// ALB panics, at construction, when none of them is set (every guarded
// request would be refused), when ALBAuth is set together with
// Principal, and when ALBAuth is invalid.
//
// The query string parameters (as ALB passes them: URL-encoded as the
// client sent them, never decoded) and the body enter the fingerprint,
// so a retry must send its query string as it sent it the first time.
// ALB sends either single-value headers and query parameters, or, when
// the target group has lambda.multi_value_headers.enabled, multi-value
// ones; the adapter reads the one the request carries, and answers in
// the same form, since ALB ignores the other. In single-value mode ALB
// keeps only the last of repeated headers, so a repeated Idempotency-Key
// can be refused (400) only in multi-value mode.
//
// A replay carries the stored status, status description, headers and
// body, byte for byte, plus Idempotent-Replayed: true. In single-value
// mode, repeated header values are joined with commas, except
// Set-Cookie, of which the last is sent: a single-value response can
// carry no more.
func ALB(g *Guard, cfg *HTTPConfig, h func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error)) func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
	core := newALBCore(g, cfg)
	return func(ctx context.Context, req events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		multi := albMultiValue(&req)
		var resp events.ALBTargetGroupResponse
		res, respond, err := core.serve(ctx, (*albEvent)(&req), func(ctx context.Context, guarded bool) (Result, error) {
			var err error
			resp, err = h(ctx, req)
			if err != nil || !guarded {
				return Result{}, err
			}
			return albResult(resp, multi), nil
		})
		if err != nil || !respond {
			return resp, err
		}
		return albResponse(res, multi), nil
	}
}

// newALBCore builds the shared core for ALB, with the identity rule
// ALB documents.
func newALBCore(g *Guard, cfg *HTTPConfig) *httpCore {
	var c HTTPConfig
	if cfg != nil {
		c = *cfg
	}
	auth := c.ALBAuth
	c.ALBAuth = nil // newHTTPCore refuses it: it is ALB's alone
	switch {
	case auth != nil && c.Principal != nil:
		panic("dedupe: ALB: set HTTPConfig.ALBAuth or HTTPConfig.Principal, not both: ALBAuth takes the caller from the user claims the load balancer signed")
	case auth == nil && c.Principal == nil && !c.SharedScope:
		panic("dedupe: ALB needs HTTPConfig.ALBAuth (the listener authenticates users), HTTPConfig.Principal (the function identifies callers), or SharedScope (anonymous callers): ALB requests carry no caller otherwise")
	}
	var v *albVerifier
	if auth != nil {
		var err error
		if v, err = newALBVerifier(auth); err != nil {
			panic(err.Error())
		}
	}
	core := newHTTPCore(g, &c)
	core.identify = func(ctx context.Context, ev httpEvent) (string, *refusal) {
		e := ev.(*albEvent)
		if e.RequestContext.ELB.TargetGroupArn == "" {
			return "", &refusal{OutcomeInvalidRequest, ProblemInternal, errNoTargetGroup}
		}
		if v == nil {
			return core.principal(ev.raw()), nil
		}
		return v.principal(ctx, e, g.Now())
	}
	return core
}

// errNoTargetGroup is the error of an ALB request without the ARN its
// keys are scoped by.
var errNoTargetGroup = fmt.Errorf("dedupe: ALB request without requestContext.elb.targetGroupArn: %w", ErrNoEventSource)

// albMultiValue reports whether an ALB request came from a target group
// with multi-value headers: ALB then sends multiValueHeaders (never
// empty: it adds X-Forwarded-For and others) instead of headers.
func albMultiValue(req *events.ALBTargetGroupRequest) bool {
	return len(req.MultiValueHeaders) > 0 || len(req.MultiValueQueryStringParameters) > 0
}

// hdrStatusDescription keeps an ALB response's statusDescription in the
// stored result (a pseudo-header, never sent as a header).
const hdrStatusDescription = ":alb-status-description"

// albResult is the Result of an ALB response, from the header field ALB
// reads in the request's mode.
func albResult(resp events.ALBTargetGroupResponse, multi bool) Result {
	var hdr map[string][]string
	if multi {
		hdr = eventHeaders(nil, resp.MultiValueHeaders, nil)
	} else {
		hdr = eventHeaders(resp.Headers, nil, nil)
	}
	if resp.StatusDescription != "" {
		hdr[hdrStatusDescription] = []string{resp.StatusDescription}
	}
	return Result{StatusCode: resp.StatusCode, Headers: hdr, Body: storeBody(hdr, resp.Body, resp.IsBase64Encoded)}
}

// albResponse turns a stored or problem result into an ALB response in
// the request's mode.
func albResponse(res Result, multi bool) events.ALBTargetGroupResponse {
	out := events.ALBTargetGroupResponse{StatusCode: res.StatusCode, StatusDescription: first(res.Headers[hdrStatusDescription])}
	if out.StatusDescription == "" {
		out.StatusDescription = statusLine(res.StatusCode)
	}
	if multi {
		out.MultiValueHeaders = make(map[string][]string, len(res.Headers))
	} else {
		out.Headers = make(map[string]string, len(res.Headers))
	}
	for k, vs := range res.Headers {
		switch {
		case isPseudo(k) || len(vs) == 0:
		case multi:
			out.MultiValueHeaders[k] = vs
		case isSetCookie(k):
			out.Headers[k] = vs[len(vs)-1]
		default:
			out.Headers[k] = strings.Join(vs, ",")
		}
	}
	out.Body, out.IsBase64Encoded = replayBody(res)
	return out
}

// albEvent is the httpEvent of an ALB request.
type albEvent events.ALBTargetGroupRequest

func (e *albEvent) method() string { return e.HTTPMethod }

func (e *albEvent) route() string { return routeOf(e.HTTPMethod, e.Path) }

// routeKnown is true: the adapter's route is the one it documents.
func (e *albEvent) routeKnown() bool { return true }

// routeLabel is the method and RouteNone: ALB forwards by listener rule,
// and the raw path is the client's.
func (e *albEvent) routeLabel() string { return routeOf(e.HTTPMethod, RouteNone) }

func (e *albEvent) scope() string { return "alb:" + e.RequestContext.ELB.TargetGroupArn }

func (e *albEvent) keyHeader() (string, int) { return keyHeader2(e.MultiValueHeaders, e.Headers) }

func (e *albEvent) header(lname string) (string, bool) {
	return header2(e.MultiValueHeaders, e.Headers, lname)
}

// headerValues returns every value of header lname, in either mode.
func (e *albEvent) headerValues(lname string) []string {
	if vs := lookupMulti(e.MultiValueHeaders, lname); len(vs) > 0 {
		return vs
	}
	if _, n := lookup(e.Headers, lname); n > 0 {
		var out []string
		for k, v := range e.Headers {
			if strings.EqualFold(k, lname) {
				out = append(out, v)
			}
		}
		return out
	}
	return nil
}

// appendTarget fingerprints the query parameters as ALB passes them,
// still URL-encoded; the raw path is in the route.
func (e *albEvent) appendTarget(buf []byte) []byte {
	if len(e.MultiValueQueryStringParameters) > 0 {
		return appendSortedMulti(buf, "query", e.MultiValueQueryStringParameters)
	}
	return appendSorted(buf, "query", e.QueryStringParameters)
}

func (e *albEvent) body(limit int64) ([]byte, bool, error) {
	return eventBody(e.Body, e.IsBase64Encoded, limit)
}

func (e *albEvent) raw() any { return (*events.ALBTargetGroupRequest)(e) }

// statusLine is the statusDescription ALB wants with a status: the code
// and its reason phrase.
func statusLine(code int) string {
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// albKeyRule is what KeyOfEvent does differently for an ALB request: it
// refuses one without a target group, and with cfg.ALBAuth it returns cfg
// without it and a principal rule that takes the caller from the user
// claims the configured load balancer signed, unverified (see
// KeyOfEvent). Other events pass as they are.
func albKeyRule(cfg *HTTPConfig, ev httpEvent) (*HTTPConfig, func() (string, error), error) {
	e, ok := ev.(*albEvent)
	if !ok {
		return cfg, nil, nil
	}
	if e.RequestContext.ELB.TargetGroupArn == "" {
		return nil, nil, errNoTargetGroup
	}
	if cfg == nil || cfg.ALBAuth == nil {
		return cfg, nil, nil
	}
	v, err := newALBVerifier(&ALBAuth{LoadBalancerARN: cfg.ALBAuth.LoadBalancerARN, PublicKey: cfg.ALBAuth.PublicKey})
	if err != nil {
		return nil, nil, err
	}
	c := *cfg
	c.ALBAuth = nil
	return &c, func() (string, error) { return v.unverifiedPrincipal(e) }, nil
}
