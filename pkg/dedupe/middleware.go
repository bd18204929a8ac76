package dedupe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Middleware returns net/http middleware with the behaviour of HTTPAPI,
// for servers and for Lambda functions behind an HTTP adapter.
//
// Keys are scoped by route and principal. The route is the ServeMux
// pattern that matched (r.Pattern, prefixed with the method when the
// pattern has none), so wrap the handlers you register rather than the mux
// to get templated routes; without a pattern it is the method and path.
// There is no default principal for a plain *http.Request: set
// HTTPConfig.Principal, typically to read what your authentication
// middleware put in the request context, or SharedScope for anonymous
// callers; Middleware panics when neither is set, since every caller
// would otherwise share one scope. The path, query and body enter the
// fingerprint; the body is read (up to MaxBodyBytes) and handed on to the
// handler unchanged.
//
// A fresh response is streamed to the client as the handler writes it and
// recorded at the same time: status, the headers as the server sends them
// (frozen at WriteHeader, plus the Content-Type net/http sniffs when the
// handler set none, exactly when net/http does: not with a
// Content-Encoding, nor when the handler flushed before writing), and the
// body. A replay writes those back with
// Idempotent-Replayed: true; only the server's own Date and framing
// (chunked or Content-Length) may differ. Informational (1xx) responses
// and trailers are not recorded. A panic in the handler is re-raised after
// the key is released.
//
// A net/http handler returns no error, so Middleware tells a handler that
// gave up by what it can see: the request context ended while the
// handler ran (a server timeout, http.TimeoutHandler, a client that went
// away), or the handler answered 504 Gateway Timeout. Such a request is
// never stored: with Config.MinHold its key is held until its lease ends
// (a retry gets 409 with Retry-After), as for a Func that returned
// context.DeadlineExceeded; without MinHold it is released.
//
// Behind a router that does not set r.Pattern (anything but
// http.ServeMux, unless it sets it), the route is the raw path, which
// the routes RequireKeyOn lists ("POST /items/{id}") never match. So when
// HTTPConfig.RequireKey is set and HTTPConfig.Route is not, a guarded
// request without r.Pattern is refused with 500 (ErrRouteUnknown, logged
// at WARN) instead of passing unguarded: set HTTPConfig.Route to
// your router's route template, or wrap the handlers a ServeMux
// dispatches to.
func Middleware(g *Guard, cfg *HTTPConfig) func(http.Handler) http.Handler {
	if cfg == nil || (cfg.Principal == nil && !cfg.SharedScope) {
		panic("dedupe: Middleware needs HTTPConfig.Principal, or SharedScope for anonymous callers")
	}
	core := newHTTPCore(g, cfg)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ev := &stdEvent{r: r}
			res, respond, _ := core.serve(r.Context(), ev, func(ctx context.Context, guarded bool) (Result, error) {
				if !guarded {
					next.ServeHTTP(w, ev.r)
					return Result{}, nil
				}
				rec := &recorder{ResponseWriter: w}
				// ctx carries the claim (ClaimFrom).
				next.ServeHTTP(rec, ev.r.WithContext(ctx))
				res := rec.result()
				if err := gaveUp(ctx, res.StatusCode); err != nil {
					// The handler's outcome is unknown: with
					// Config.MinHold the key is held for its lease,
					// otherwise released, never stored.
					return res, err
				}
				return res, nil
			})
			if !respond {
				return
			}
			h := w.Header()
			for k, vs := range res.Headers {
				if !isPseudo(k) {
					h[k] = vs
				}
			}
			if _, ok := res.Headers["Content-Type"]; !ok {
				// The first response went out without one (net/http did
				// not sniff it): keep net/http from sniffing the replay.
				h["Content-Type"] = nil
			}
			w.WriteHeader(res.StatusCode)
			w.Write(res.Body)
		})
	}
}

// errHandlerTimedOut is what a Middleware handler that answered 504
// Gateway Timeout is taken to have returned.
var errHandlerTimedOut = fmt.Errorf("handler answered 504 Gateway Timeout: %w", context.DeadlineExceeded)

// gaveUp returns the error a net/http handler would have returned had it
// been able to: its request context ended while it ran (the server's
// timeout, http.TimeoutHandler, a client that went away), or it answered
// 504 Gateway Timeout (an upstream it called timed out). Either wraps
// context.DeadlineExceeded or context.Canceled, so Config.MinHold holds
// the key as for a Func that gave up.
func gaveUp(ctx context.Context, status int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("handler's request context ended: %w", err)
	}
	if status == http.StatusGatewayTimeout {
		return errHandlerTimedOut
	}
	return nil
}

// stdEvent is the httpEvent of a net/http request.
type stdEvent struct{ r *http.Request }

func (e *stdEvent) method() string { return e.r.Method }

func (e *stdEvent) route() string {
	if p := e.r.Pattern; p != "" {
		if strings.HasPrefix(p, "/") || !strings.Contains(p, " ") {
			return routeOf(e.r.Method, p)
		}
		return p
	}
	return routeOf(e.r.Method, e.r.URL.Path)
}

// routeKnown reports whether a ServeMux (or a router that sets it) set
// r.Pattern: without it the route is the raw path.
func (e *stdEvent) routeKnown() bool { return e.r.Pattern != "" }

// routeLabel is route when a pattern matched, else the method and
// RouteNone: never the raw path.
func (e *stdEvent) routeLabel() string {
	if e.r.Pattern == "" {
		return routeOf(e.r.Method, RouteNone)
	}
	return e.route()
}

// scope is empty: a server has no API ID or stage in its requests. Give
// each deployment that shares a table its own Config.Prefix.
func (e *stdEvent) scope() string { return "" }

func (e *stdEvent) keyHeader() (string, int) {
	vs := e.r.Header.Values(HeaderIdempotencyKey)
	if len(vs) == 0 {
		return "", 0
	}
	return vs[0], len(vs)
}

func (e *stdEvent) header(lname string) (string, bool) {
	vs := e.r.Header.Values(lname)
	if len(vs) == 0 {
		return "", false
	}
	return strings.Join(vs, ","), true
}

func (e *stdEvent) appendTarget(buf []byte) []byte {
	buf = appendPart(buf, e.r.URL.EscapedPath())
	if e.r.URL.RawQuery != "" {
		return appendSortedMulti(buf, "query", e.r.URL.Query())
	}
	return buf
}

// body reads the whole body, up to limit, and puts it back for the
// handler.
func (e *stdEvent) body(limit int64) ([]byte, bool, error) {
	if limit >= 0 && e.r.ContentLength > limit {
		return nil, true, nil
	}
	if e.r.Body == nil || e.r.Body == http.NoBody {
		return nil, false, nil
	}
	src := io.Reader(e.r.Body)
	if limit >= 0 {
		src = io.LimitReader(src, limit+1)
	}
	b, err := io.ReadAll(src)
	if err != nil {
		return nil, false, err
	}
	if limit >= 0 && int64(len(b)) > limit {
		return nil, true, nil
	}
	r := *e.r
	r.Body = io.NopCloser(bytes.NewReader(b))
	e.r = &r
	return b, false, nil
}

func (e *stdEvent) raw() any { return e.r }

// recorder passes a response through to the client and records it as
// the server sends it.
type recorder struct {
	http.ResponseWriter
	status  int
	header  http.Header // as cloned when the status was written
	body    []byte
	flushed int // body bytes written before the first flush; -1: none
}

// WriteHeader records the first final status and passes every status on.
func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.begin(code)
	}
	rec.ResponseWriter.WriteHeader(code)
}

// begin records the status and the headers, which net/http freezes at
// this point too.
func (rec *recorder) begin(code int) {
	rec.status = code
	rec.header = rec.ResponseWriter.Header().Clone()
	rec.flushed = -1
}

// Write records p and passes it on.
func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		// An implicit 200: let the server write it, so it sniffs the
		// Content-Type exactly as without the middleware.
		rec.begin(http.StatusOK)
	}
	rec.body = append(rec.body, p...)
	return rec.ResponseWriter.Write(p)
}

// Flush implements http.Flusher when the underlying writer does.
func (rec *recorder) Flush() {
	if rec.status == 0 {
		rec.begin(http.StatusOK)
	}
	if rec.flushed < 0 {
		rec.flushed = len(rec.body)
	}
	http.NewResponseController(rec.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// result returns the response as it went out. net/http adds a sniffed
// Content-Type when the handler set none (and did not suppress it with a
// nil value), set no Content-Encoding or Transfer-Encoding, and the first
// chunk it sends holds data; the result carries it so a replay sends the
// same header. A flush before the first write sends the headers with an
// empty first chunk, so nothing is sniffed. A handler that wrote nothing
// sent an empty 200.
func (rec *recorder) result() Result {
	if rec.status == 0 {
		return Result{StatusCode: http.StatusOK, Headers: rec.ResponseWriter.Header().Clone()}
	}
	h := rec.header
	first := rec.body
	if rec.flushed >= 0 {
		first = first[:rec.flushed]
	}
	_, set := h["Content-Type"]
	if !set && len(first) > 0 && h.Get("Content-Encoding") == "" && h.Get("Transfer-Encoding") == "" && bodyAllowed(rec.status) {
		h.Set("Content-Type", http.DetectContentType(first))
	}
	return Result{StatusCode: rec.status, Headers: h, Body: rec.body}
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified && (status < 100 || status >= 200)
}
