package dedupe

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// HTTPAPI wraps an API Gateway HTTP API handler (payload format 2.0) so
// that a request retried with the same Idempotency-Key is answered with the
// first response instead of running h again. HTTPConfig describes the
// decisions; a nil cfg means the defaults.
//
// Keys are scoped by route key and caller: "POST /payments" from the
// event's routeKey ("$default" and "ANY /x" routes use the actual method,
// and the raw path for "$default"), and DefaultPrincipal (the JWT
// authorizer's iss and sub, else the Lambda authorizer's principalId or
// sub, else the IAM caller). Path parameters, query parameters and the
// body enter the fingerprint.
//
// A replay carries the stored status, headers, cookies and body, byte for
// byte (a base64 body is stored decoded and re-encoded as it was sent),
// plus Idempotent-Replayed: true. HTTP API payload 2.0 has no
// multi-value headers: MultiValueHeaders in h's responses are ignored, as
// API Gateway ignores them; cookies belong in Cookies.
//
// Errors from h are returned as they are, after the key was released, and
// a panic in h is re-raised after the release: aws-lambda-go turns both
// into an invoke error, which the client sees as a 500. Every answer the
// adapter makes itself (400, 409, 413, 422, 503) is a response with a nil
// error.
func HTTPAPI(g *Guard, cfg *HTTPConfig, h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return lambdaAdapter(g, cfg, h,
		func(req *events.APIGatewayV2HTTPRequest) httpEvent { return (*v2Event)(req) },
		func(resp events.APIGatewayV2HTTPResponse) Result {
			return cookieResult(resp.StatusCode, resp.Headers, resp.Cookies, resp.Body, resp.IsBase64Encoded)
		},
		func(res Result) events.APIGatewayV2HTTPResponse {
			r := replayCookieResponse(res)
			return events.APIGatewayV2HTTPResponse{StatusCode: r.status, Headers: r.headers, Cookies: r.cookies, Body: r.body, IsBase64Encoded: r.base64}
		})
}

// RESTAPI wraps an API Gateway REST API handler (Lambda proxy integration,
// payload format 1.0) like HTTPAPI.
//
// Keys are scoped by the method and resource ("POST /payments/{id}") and
// by DefaultPrincipal (the Cognito user pool authorizer's iss and sub
// claims, else the Lambda authorizer's principalId, else the Cognito
// identity or IAM caller, else the API key ID). Path parameters,
// multi-value query parameters and the body enter the fingerprint.
//
// Responses are stored with headers and multi-value headers merged as API
// Gateway merges them; a replay sends single values in Headers and
// repeated ones in MultiValueHeaders, with the body and isBase64Encoded as
// first sent.
func RESTAPI(g *Guard, cfg *HTTPConfig, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return lambdaAdapter(g, cfg, h,
		func(req *events.APIGatewayProxyRequest) httpEvent { return (*v1Event)(req) },
		func(resp events.APIGatewayProxyResponse) Result {
			hdr := eventHeaders(resp.Headers, resp.MultiValueHeaders, nil)
			return Result{StatusCode: resp.StatusCode, Headers: hdr, Body: storeBody(hdr, resp.Body, resp.IsBase64Encoded)}
		},
		func(res Result) events.APIGatewayProxyResponse {
			out := events.APIGatewayProxyResponse{StatusCode: res.StatusCode, Headers: make(map[string]string, len(res.Headers))}
			for k, vs := range res.Headers {
				switch {
				case isPseudo(k):
				case len(vs) == 1:
					out.Headers[k] = vs[0]
				default:
					if out.MultiValueHeaders == nil {
						out.MultiValueHeaders = make(map[string][]string)
					}
					out.MultiValueHeaders[k] = vs
				}
			}
			out.Body, out.IsBase64Encoded = replayBody(res)
			return out
		})
}

// lambdaAdapter is the one wrapper behind HTTPAPI, RESTAPI and
// FunctionURL. Each supplies only what is particular to its event type:
// how to view a request (view), how to record a response (toResult) and
// how to rebuild one from a stored result (fromResult). The handler's own
// response is returned untouched on a fresh run or a pass-through.
func lambdaAdapter[Req, Resp any](g *Guard, cfg *HTTPConfig, h func(context.Context, Req) (Resp, error),
	view func(*Req) httpEvent, toResult func(Resp) Result, fromResult func(Result) Resp) func(context.Context, Req) (Resp, error) {
	core := newHTTPCore(g, cfg)
	return func(ctx context.Context, req Req) (Resp, error) {
		var resp Resp
		res, respond, err := core.serve(ctx, view(&req), func(ctx context.Context, guarded bool) (Result, error) {
			var err error
			resp, err = h(ctx, req)
			if err != nil || !guarded {
				return Result{}, err
			}
			return toResult(resp), nil
		})
		if err != nil || !respond {
			return resp, err
		}
		return fromResult(res), nil
	}
}

// v2Event is the httpEvent of an HTTP API request.
type v2Event events.APIGatewayV2HTTPRequest

func (e *v2Event) method() string { return e.RequestContext.HTTP.Method }

func (e *v2Event) route() string {
	method := e.RequestContext.HTTP.Method
	rk := e.RouteKey
	if rk == "" {
		rk = e.RequestContext.RouteKey
	}
	m, path, ok := strings.Cut(rk, " ")
	switch {
	case !ok || isGreedy(path): // "$default", empty, or "/{proxy+}"
		return routeOf(method, e.RawPath)
	case m == "ANY":
		return routeOf(method, path)
	}
	return rk
}

// routeLabel is the route key the API matched ("POST /payments", "POST
// /{proxy+}"; an ANY route with the actual method), "POST $default" for
// the $default route, never the raw path.
func (e *v2Event) routeLabel() string {
	method := e.RequestContext.HTTP.Method
	rk := e.RouteKey
	if rk == "" {
		rk = e.RequestContext.RouteKey
	}
	m, path, ok := strings.Cut(rk, " ")
	switch {
	case rk == "":
		return routeOf(method, RouteNone)
	case !ok: // "$default"
		return routeOf(method, rk)
	case m == "ANY":
		return routeOf(method, path)
	}
	return rk
}

func (e *v2Event) scope() string {
	return "http:" + e.RequestContext.APIID + "/" + e.RequestContext.Stage
}

func (e *v2Event) keyHeader() (string, int) { return lookup(e.Headers, "idempotency-key") }

func (e *v2Event) header(lname string) (string, bool) {
	return cookieHeader(e.Headers, e.Cookies, lname)
}

// appendTarget fingerprints the raw query string: the parsed parameters
// join repeated values with commas, so ?to=a&to=b and ?to=a%2Cb would
// compare equal.
func (e *v2Event) appendTarget(buf []byte) []byte {
	buf = appendSorted(buf, "path", e.PathParameters)
	return appendPart(append(buf, 'q'), e.RawQueryString)
}

func (e *v2Event) body(limit int64) ([]byte, bool, error) {
	return eventBody(e.Body, e.IsBase64Encoded, limit)
}

func (e *v2Event) raw() any { return (*events.APIGatewayV2HTTPRequest)(e) }

// v1Event is the httpEvent of a REST API request.
type v1Event events.APIGatewayProxyRequest

func (e *v1Event) method() string { return e.HTTPMethod }

// route resolves the method and resource; a greedy resource
// ("/{proxy+}", "/files/{path+}") resolves to the actual path, since it
// would otherwise put every path behind it in one scope (and
// RequireKeyOn("POST /orders") would never match). ANY resources carry
// the actual method in HTTPMethod already.
func (e *v1Event) route() string {
	if e.Resource != "" && !isGreedy(e.Resource) {
		return routeOf(e.HTTPMethod, e.Resource)
	}
	return routeOf(e.HTTPMethod, e.Path)
}

// routeLabel is the method and the resource the API matched, a greedy
// one ("/{proxy+}") included, never the raw path.
func (e *v1Event) routeLabel() string {
	if e.Resource == "" {
		return routeOf(e.HTTPMethod, RouteNone)
	}
	return routeOf(e.HTTPMethod, e.Resource)
}

func (e *v1Event) scope() string {
	return "rest:" + e.RequestContext.APIID + "/" + e.RequestContext.Stage
}

func (e *v1Event) keyHeader() (string, int) { return keyHeader2(e.MultiValueHeaders, e.Headers) }

func (e *v1Event) header(lname string) (string, bool) {
	return header2(e.MultiValueHeaders, e.Headers, lname)
}

// keyHeader2 returns the Idempotency-Key header of an event that carries
// headers in two modes (REST API, ALB): the multi-value map first, where
// a repeated header shows, then the single-value one; and how many values
// it has.
func keyHeader2(multi map[string][]string, single map[string]string) (string, int) {
	if vs := lookupMulti(multi, "idempotency-key"); len(vs) > 0 {
		return vs[0], len(vs)
	}
	return lookup(single, "idempotency-key")
}

// header2 returns header lname of an event that carries headers in two
// modes, its values joined with commas.
func header2(multi map[string][]string, single map[string]string, lname string) (string, bool) {
	if vs := lookupMulti(multi, lname); len(vs) > 0 {
		return strings.Join(vs, ","), true
	}
	v, n := lookup(single, lname)
	return v, n > 0
}

func (e *v1Event) appendTarget(buf []byte) []byte {
	buf = appendSorted(buf, "path", e.PathParameters)
	if len(e.MultiValueQueryStringParameters) > 0 {
		return appendSortedMulti(buf, "query", e.MultiValueQueryStringParameters)
	}
	return appendSorted(buf, "query", e.QueryStringParameters)
}

func (e *v1Event) body(limit int64) ([]byte, bool, error) {
	return eventBody(e.Body, e.IsBase64Encoded, limit)
}

func (e *v1Event) raw() any { return (*events.APIGatewayProxyRequest)(e) }

// isGreedy reports whether a route or resource path has a greedy path
// variable, "{name+}".
func isGreedy(path string) bool { return strings.Contains(path, "+}") }

// cookieHeader returns header lname from an event that moved its cookies
// out of the headers (payload 2.0, Function URLs): "cookie" is rebuilt
// from them, joined with "; " as a client sends them.
func cookieHeader(headers map[string]string, cookies []string, lname string) (string, bool) {
	if lname == "cookie" && len(cookies) > 0 {
		return strings.Join(cookies, "; "), true
	}
	v, n := lookup(headers, lname)
	return v, n > 0
}

// lookup returns the value of header lname (lower case) in m and how many
// keys carry it: the exact lower-case key first, as API Gateway HTTP APIs
// and Function URLs send headers, else every key equal under case folding.
func lookup(m map[string]string, lname string) (string, int) {
	if v, ok := m[lname]; ok {
		return v, 1
	}
	var v string
	n := 0
	for k, val := range m {
		if strings.EqualFold(k, lname) {
			if n == 0 {
				v = val
			}
			n++
		}
	}
	return v, n
}

// lookupMulti returns every value of header lname in m, whatever the case
// of its keys.
func lookupMulti(m map[string][]string, lname string) []string {
	if vs, ok := m[lname]; ok {
		return vs
	}
	var out []string
	for k, vs := range m {
		if strings.EqualFold(k, lname) {
			out = append(out, vs...)
		}
	}
	return out
}

// eventBody returns an event's request body as bytes, decoding base64.
// A body that claims base64 but does not decode is taken as sent.
func eventBody(body string, isBase64 bool, limit int64) ([]byte, bool, error) {
	if isBase64 {
		if limit >= 0 && int64(len(body))/4*3-2 > limit {
			return nil, true, nil
		}
		if dec, err := base64.StdEncoding.DecodeString(body); err == nil {
			return dec, limit >= 0 && int64(len(dec)) > limit, nil
		}
	}
	if limit >= 0 && int64(len(body)) > limit {
		return nil, true, nil
	}
	return []byte(body), false, nil
}

// cookieResult is the Result of a response shaped as payload 2.0 and
// Function URLs shape them: single-value headers, cookies apart, a body
// that may be base64.
func cookieResult(status int, headers map[string]string, cookies []string, body string, isBase64 bool) Result {
	hdr := eventHeaders(headers, nil, cookies)
	return Result{StatusCode: status, Headers: hdr, Body: storeBody(hdr, body, isBase64)}
}

// cookieResponse holds the fields of a payload 2.0 or Function URL
// response, which are the same.
type cookieResponse struct {
	status  int
	headers map[string]string
	cookies []string
	body    string
	base64  bool
}

// replayCookieResponse turns a stored result back into a payload 2.0 or
// Function URL response: Set-Cookie values go to the cookies, repeated
// header values are joined with commas, pseudo-headers are dropped.
func replayCookieResponse(res Result) cookieResponse {
	out := cookieResponse{status: res.StatusCode, headers: make(map[string]string, len(res.Headers))}
	for k, vs := range res.Headers {
		switch {
		case isPseudo(k):
		case isSetCookie(k):
			out.cookies = append(out.cookies, vs...)
		default:
			out.headers[k] = strings.Join(vs, ",")
		}
	}
	out.body, out.base64 = replayBody(res)
	return out
}

// routeKnown is true: the adapter's route is the one it documents.
func (e *v2Event) routeKnown() bool { return true }

// routeKnown is true: the adapter's route is the one it documents.
func (e *v1Event) routeKnown() bool { return true }
