package dedupe

import (
	"bytes"
	"context"
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
// middleware put in the request context. The path, query and body enter
// the fingerprint; the body is read (up to MaxBodyBytes) and handed on to
// the handler unchanged.
//
// A fresh response is streamed to the client as the handler writes it and
// recorded at the same time: status, the headers at the time of
// WriteHeader, and the body. A replay writes those back with
// Idempotent-Replayed: true. Informational (1xx) responses and trailers
// are not recorded. A panic in the handler is re-raised after the key is
// released.
func Middleware(g *Guard, cfg *HTTPConfig) func(http.Handler) http.Handler {
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
				next.ServeHTTP(rec, ev.r)
				return rec.result(), nil
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
			w.WriteHeader(res.StatusCode)
			w.Write(res.Body)
		})
	}
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

// recorder passes a response through to the client and records it.
type recorder struct {
	http.ResponseWriter
	status int
	header http.Header
	body   []byte
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.status = code
		rec.header = rec.ResponseWriter.Header().Clone()
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	rec.body = append(rec.body, p...)
	return rec.ResponseWriter.Write(p)
}

// Flush implements http.Flusher when the underlying writer does.
func (rec *recorder) Flush() {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(rec.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// result returns what was recorded; a handler that wrote nothing sent an
// empty 200.
func (rec *recorder) result() Result {
	if rec.status == 0 {
		return Result{StatusCode: http.StatusOK, Headers: rec.ResponseWriter.Header().Clone()}
	}
	return Result{StatusCode: rec.status, Headers: rec.header, Body: rec.body}
}
