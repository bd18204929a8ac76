package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// buildEvent turns r, whose body has been read into body, into the event an
// HTTP API sends with payload format 2.0. authorizer is what the route's
// authorizer passes on (nil on a route without one).
func (g *Gateway) buildEvent(r *http.Request, body []byte, rt *route, params map[string]string, requestID string, now time.Time, authorizer *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) events.APIGatewayV2HTTPRequest {
	headers, cookies := eventHeaders(r, len(body))
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: rt.key,
		// An HTTP API delivers the path decoded, in rawPath and http.path
		// alike (REST APIs and function URLs keep it encoded).
		RawPath:               path,
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: queryParameters(r.URL.RawQuery),
		PathParameters:        params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     rt.key,
			AccountID:    g.accountID,
			Stage:        "$default",
			RequestID:    requestID,
			APIID:        g.apiID,
			DomainName:   headers["host"],
			DomainPrefix: domainPrefix(headers["host"]),
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP(r),
				UserAgent: r.UserAgent(),
			},
		},
	}
	ev.RequestContext.Authorizer = authorizer
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type"), body) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	return ev
}

// eventHeaders returns the request's headers as an HTTP API passes them:
// names lower-cased, repeated values joined with a comma and no space (as
// payload format 2.0 documents: "Duplicate headers are combined with
// commas"; API Gateway sends "value1,value2"), the Cookie header
// moved to the cookies list, plus the headers API Gateway adds itself.
func eventHeaders(r *http.Request, bodyLen int) (map[string]string, []string) {
	headers := make(map[string]string, len(r.Header)+5)
	var cookies []string
	for name, values := range r.Header {
		lname := strings.ToLower(name)
		if lname == "cookie" {
			for _, v := range values {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		if prev, ok := headers[lname]; ok {
			values = append([]string{prev}, values...)
		}
		headers[lname] = strings.Join(values, ",")
	}
	// net/http keeps these out of r.Header.
	headers["host"] = r.Host
	if bodyLen > 0 {
		headers["content-length"] = strconv.Itoa(bodyLen)
	}
	ip := sourceIP(r)
	if prev := headers["x-forwarded-for"]; prev != "" {
		headers["x-forwarded-for"] = prev + ", " + ip
	} else {
		headers["x-forwarded-for"] = ip
	}
	_, port, _ := net.SplitHostPort(r.Host)
	if port == "" {
		port = "80"
	}
	headers["x-forwarded-port"] = port
	headers["x-forwarded-proto"] = "http"
	if headers["x-amzn-trace-id"] == "" {
		headers["x-amzn-trace-id"] = traceID(time.Now())
	}
	return headers, cookies
}

// queryParameters parses a raw query string as an HTTP API does: decoded
// names and values, repeated names' values joined with commas, nil when
// there are none.
func queryParameters(raw string) map[string]string {
	if raw == "" {
		return nil
	}
	params := map[string]string{}
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		if prev, ok := params[k]; ok {
			v = prev + "," + v
		}
		params[k] = v
	}
	if len(params) == 0 {
		return nil
	}
	return params
}

// isText reports whether a body of the given content type is passed as text
// rather than base64. AWS's documentation of payload format 2.0 states no
// rule for request bodies; what AWS states for payload 2.0 events (Lambda
// function URLs, whose event is the same format) and what HTTP APIs do is:
// unless the request's Content-Type is text/* or application/json, the
// body is base64-encoded. So a form post, application/xml, a vendor +json
// type or a body without Content-Type arrives base64-encoded, and a
// handler that reads Body without checking IsBase64Encoded breaks in AWS
// as it does here. A text body that is not valid UTF-8 is base64 too, as
// JSON cannot carry it.
func isText(contentType string, body []byte) bool {
	if contentType == "" || !utf8.Valid(body) {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json"
}

// sourceIP returns the client's address without the port.
func sourceIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// domainPrefix returns the first label of host without the port, as
// requestContext.domainPrefix holds it.
func domainPrefix(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	prefix, _, _ := strings.Cut(host, ".")
	return prefix
}

// newRequestID returns an id in the form of API Gateway's request ids
// (15 base64 characters and a pad, such as "JKJaXmPLvHcESHA=").
func newRequestID() string {
	var b [11]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

// traceID returns an X-Ray trace header value such as API Gateway adds.
func traceID(now time.Time) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("Root=1-%08x-%s", now.Unix(), hex.EncodeToString(b[:]))
}

// sortedKeys returns m's keys in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
