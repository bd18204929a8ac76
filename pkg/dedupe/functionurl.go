package dedupe

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
)

// FunctionURL wraps a Lambda Function URL handler like HTTPAPI.
//
// Function URLs have no routes: keys are scoped by the URL's domain, by
// method and raw path ("POST /payments"), unless HTTPConfig.Route says
// otherwise, and by DefaultPrincipal (the IAM caller when the URL uses
// AWS_IAM auth; with auth type NONE there is no principal, so set
// HTTPConfig.Principal if callers identify themselves otherwise, or
// SharedScope if they are anonymous). The raw query string and the body
// enter the fingerprint.
//
// A replay carries the stored status, headers, cookies and body, byte for
// byte, plus Idempotent-Replayed: true; repeated header values, which a
// Function URL response cannot carry separately, are joined with commas.
func FunctionURL(g *Guard, cfg *HTTPConfig, h func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)) func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	return lambdaAdapter(g, cfg, h,
		func(req *events.LambdaFunctionURLRequest) httpEvent { return (*urlEvent)(req) },
		func(resp events.LambdaFunctionURLResponse) Result {
			return cookieResult(resp.StatusCode, resp.Headers, resp.Cookies, resp.Body, resp.IsBase64Encoded)
		},
		func(res Result) events.LambdaFunctionURLResponse {
			r := replayCookieResponse(res)
			return events.LambdaFunctionURLResponse{StatusCode: r.status, Headers: r.headers, Cookies: r.cookies, Body: r.body, IsBase64Encoded: r.base64}
		})
}

// urlEvent is the httpEvent of a Function URL request.
type urlEvent events.LambdaFunctionURLRequest

func (e *urlEvent) method() string { return e.RequestContext.HTTP.Method }

func (e *urlEvent) route() string { return routeOf(e.RequestContext.HTTP.Method, e.RawPath) }

// routeLabel is the method and RouteNone: a Function URL matches no
// route, and its raw path is the client's.
func (e *urlEvent) routeLabel() string { return routeOf(e.RequestContext.HTTP.Method, RouteNone) }

func (e *urlEvent) scope() string { return "url:" + e.RequestContext.DomainName }

func (e *urlEvent) keyHeader() (string, int) { return lookup(e.Headers, "idempotency-key") }

func (e *urlEvent) header(lname string) (string, bool) {
	return cookieHeader(e.Headers, e.Cookies, lname)
}

// appendTarget fingerprints the raw path and the raw query string (see
// v2Event.appendTarget).
func (e *urlEvent) appendTarget(buf []byte) []byte {
	buf = appendPart(buf, e.RawPath)
	return appendPart(append(buf, 'q'), e.RawQueryString)
}

func (e *urlEvent) body(limit int64) ([]byte, bool, error) {
	return eventBody(e.Body, e.IsBase64Encoded, limit)
}

func (e *urlEvent) raw() any { return (*events.LambdaFunctionURLRequest)(e) }

// routeKnown is true: the adapter's route is the one it documents.
func (e *urlEvent) routeKnown() bool { return true }
