package dedupe_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestMiddlewareEventRouteNeverTheRawPath states Event.Route's invariant
// for Middleware: a request a ServeMux pattern matched is labelled with
// the method and the pattern; one that matched none is labelled
// "METHOD (no route)" (RouteNone), never with the path the client sent.
func TestMiddlewareEventRouteNeverTheRawPath(t *testing.T) {
	var seen []string
	g := dedupe.New(memstore.New(), &dedupe.Config{OnOutcome: func(_ context.Context, ev dedupe.Event) {
		seen = append(seen, ev.Route)
	}})
	mw := dedupe.Middleware(g, &dedupe.HTTPConfig{SharedScope: true})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	mux := http.NewServeMux()
	mux.Handle("PUT /orders/{id}", h)
	mux.Handle("/things/", h)

	serve(mux, "PUT", "/orders/secret-1", "k1", "")
	serve(mux, "POST", "/things/secret-2", "k2", "")
	serve(h, "POST", "/secret-3", "k3", "") // no mux: no pattern
	want := []string{"PUT /orders/{id}", "POST /things/", "POST " + dedupe.RouteNone}
	if len(seen) != len(want) {
		t.Fatalf("events %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("event %d: route %q, want %q", i+1, seen[i], want[i])
		}
	}
}

// TestMiddlewareQueryEntersTheFingerprint states that the query is part
// of what a key identifies for Middleware, as the path is: the same key
// with another query string, or with one where there was none, is 422;
// the same query again replays.
func TestMiddlewareQueryEntersTheFingerprint(t *testing.T) {
	runs := 0
	mw := dedupe.Middleware(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{SharedScope: true})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { runs++; io.WriteString(w, "ok") }))
	for i, s := range []struct {
		target string
		status int
		runs   int
	}{
		{"/pay?to=a", 200, 1},
		{"/pay?to=a", 200, 1},
		{"/pay?to=b", 422, 1},
		{"/pay", 422, 1},
	} {
		if rec := serve(h, "POST", s.target, "k", `{}`); rec.Code != s.status || runs != s.runs {
			t.Errorf("step %d: POST %s: %d after %d runs, want %d after %d", i+1, s.target, rec.Code, runs, s.status, s.runs)
		}
	}
	runs = 0
	for i, s := range []struct {
		target string
		status int
	}{{"/pay", 200}, {"/pay?to=a", 422}} {
		if rec := serve(h, "POST", s.target, "k-2", `{}`); rec.Code != s.status {
			t.Errorf("no query first, step %d: POST %s: %d, want %d", i+1, s.target, rec.Code, s.status)
		}
	}
}

// TestMiddlewareNoBodyLimit states what a negative MaxBodyBytes means for
// Middleware: no limit, and nothing else changes. A body of any size, of
// unknown length too, reaches the handler whole and enters the
// fingerprint (another body with the same key is 422).
func TestMiddlewareNoBodyLimit(t *testing.T) {
	big := strings.Repeat("x", dedupe.DefaultMaxBodyBytes+1)
	var got []string
	mw := dedupe.Middleware(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{MaxBodyBytes: -1, SharedScope: true})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
	}))
	for i, s := range []struct {
		body   string
		status int
	}{{big, 200}, {big, 200}, {big + "y", 422}} {
		req := httptest.NewRequest("POST", "/x", io.MultiReader(strings.NewReader(s.body)))
		req.ContentLength = -1
		req.Header.Set(dedupe.HeaderIdempotencyKey, "k")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != s.status {
			t.Errorf("step %d: %d, want %d", i+1, rec.Code, s.status)
		}
	}
	if len(got) != 1 || got[0] != big {
		t.Errorf("the handler ran %d times, with %d bytes in all; want once with %d", len(got), len(strings.Join(got, "")), len(big))
	}
}
