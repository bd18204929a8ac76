package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Invoker runs a function synchronously: payload is the event, the result
// is what the function returned. A *Pool is an Invoker; tests may use any
// other.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// InvokerFunc adapts a function to the Invoker interface.
type InvokerFunc func(ctx context.Context, payload []byte) ([]byte, error)

// Invoke calls f(ctx, payload).
func (f InvokerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

// Route connects an HTTP API route key to the function behind it.
type Route struct {
	// Key is the route key as a template declares it: "METHOD /path",
	// where METHOD is an HTTP method or ANY and the path may hold path
	// variables ("/payments/{id}") and end in a greedy one
	// ("/files/{proxy+}"); or "$default", which catches every request that
	// no other route matches.
	Key string

	// Function is the integration: the function the request is sent to.
	Function Invoker

	// Timeout is the route's integration timeout. Zero means
	// Config.IntegrationTimeout.
	Timeout time.Duration

	// Auth is the route's authorizer, as the template declares it. The
	// zero value is no authorizer: the function gets no claims or
	// identity, as in AWS.
	Auth Auth
}

// segment is one path segment of a route: a literal, a path variable or a
// greedy path variable.
type segment struct {
	literal string
	param   string
	greedy  bool
}

// rank orders segments by specificity: a literal beats a variable, which
// beats a greedy variable.
func (s segment) rank() int {
	switch {
	case s.param == "":
		return 2
	case !s.greedy:
		return 1
	default:
		return 0
	}
}

// route is a parsed Route.
type route struct {
	key      string
	method   string // upper case; "ANY" matches every method
	segments []segment
	fn       Invoker
	timeout  time.Duration // zero: the gateway's
	auth     Auth
}

// parseRoute parses r.Key.
func parseRoute(r Route) (*route, error) {
	if r.Function == nil {
		return nil, fmt.Errorf("%w: %q has no function", ErrRoute, r.Key)
	}
	if err := r.Auth.check(r.Key); err != nil {
		return nil, err
	}
	if r.Key == "$default" {
		return &route{key: r.Key, fn: r.Function, timeout: r.Timeout, auth: r.Auth}, nil
	}
	method, path, ok := strings.Cut(r.Key, " ")
	if !ok || method == "" || method != strings.ToUpper(method) || !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%w: %q is not \"METHOD /path\" or \"$default\"", ErrRoute, r.Key)
	}
	rt := &route{key: r.Key, method: method, fn: r.Function, timeout: r.Timeout, auth: r.Auth}
	if path == "/" {
		return rt, nil
	}
	parts := strings.Split(path[1:], "/")
	for i, p := range parts {
		var s segment
		switch {
		case p == "":
			return nil, fmt.Errorf("%w: %q has an empty path segment", ErrRoute, r.Key)
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "+}"):
			if i != len(parts)-1 {
				return nil, fmt.Errorf("%w: %q: a greedy path variable must come last", ErrRoute, r.Key)
			}
			s = segment{param: p[1 : len(p)-2], greedy: true}
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
			s = segment{param: p[1 : len(p)-1]}
		case strings.ContainsAny(p, "{}"):
			return nil, fmt.Errorf("%w: %q: a path variable must be a whole segment", ErrRoute, r.Key)
		default:
			s = segment{literal: p}
		}
		if s.param == "" && s.literal == "" {
			return nil, fmt.Errorf("%w: %q has a path variable without a name", ErrRoute, r.Key)
		}
		rt.segments = append(rt.segments, s)
	}
	return rt, nil
}

// match reports whether the route serves method on the path split into
// decoded segments, and returns the path parameters.
func (rt *route) match(method string, parts []string) (map[string]string, bool) {
	if rt.method != "ANY" && rt.method != method {
		return nil, false
	}
	var params map[string]string
	set := func(k, v string) {
		if params == nil {
			params = map[string]string{}
		}
		params[k] = v
	}
	for i, s := range rt.segments {
		if i >= len(parts) {
			return nil, false
		}
		switch {
		case s.greedy:
			rest := strings.Join(parts[i:], "/")
			if rest == "" {
				return nil, false
			}
			set(s.param, rest)
			return params, true
		case s.param != "":
			if parts[i] == "" {
				return nil, false
			}
			set(s.param, parts[i])
		case s.literal != parts[i]:
			return nil, false
		}
	}
	if len(parts) != len(rt.segments) {
		return nil, false
	}
	return params, true
}

// moreSpecific reports whether a should win over b when both match a
// request: segment by segment, literals before variables before greedy
// variables; then a route for the request's method before ANY.
func moreSpecific(a, b *route) bool {
	for i := 0; i < len(a.segments) && i < len(b.segments); i++ {
		if ra, rb := a.segments[i].rank(), b.segments[i].rank(); ra != rb {
			return ra > rb
		}
	}
	if len(a.segments) != len(b.segments) {
		return len(a.segments) > len(b.segments)
	}
	return a.method != "ANY" && b.method == "ANY"
}

// routeTable matches requests to routes.
type routeTable struct {
	routes []*route
	def    *route // $default, or nil
}

// newRouteTable parses routes and rejects duplicates.
func newRouteTable(routes []Route) (*routeTable, error) {
	t := &routeTable{}
	seen := map[string]bool{}
	for _, r := range routes {
		rt, err := parseRoute(r)
		if err != nil {
			return nil, err
		}
		if seen[rt.key] {
			return nil, fmt.Errorf("%w: %q is declared twice", ErrRoute, rt.key)
		}
		seen[rt.key] = true
		if rt.key == "$default" {
			t.def = rt
			continue
		}
		t.routes = append(t.routes, rt)
	}
	return t, nil
}

// lookup returns the route for a request, with its path parameters, or nil
// when none matches. path is the decoded path.
func (t *routeTable) lookup(method, path string) (*route, map[string]string) {
	var parts []string
	if path != "/" && path != "" {
		parts = strings.Split(strings.TrimPrefix(path, "/"), "/")
	}
	var best *route
	var bestParams map[string]string
	for _, rt := range t.routes {
		params, ok := rt.match(method, parts)
		if ok && (best == nil || moreSpecific(rt, best)) {
			best, bestParams = rt, params
		}
	}
	if best == nil && t.def != nil {
		return t.def, nil
	}
	return best, bestParams
}
