package dedupe_test

import (
	"context"
	"io"
	"net/http"
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
