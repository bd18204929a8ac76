package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// userHeader carries the caller's identity, set by the authenticating
// proxy in front of the container (an ALB with OIDC, a service mesh); the
// server must not be reachable around it.
const userHeader = "X-Authenticated-User"

// NewServer returns the API: POST /jobs starts a job once per
// Idempotency-Key and caller; GET /healthz is never guarded.
//
// Middleware wraps each handler, not the mux, so keys are scoped by the
// ServeMux pattern ("POST /jobs"). The principal comes from the
// authenticating proxy's header: without one, a guarded request is
// refused (500) rather than sharing one key space among callers.
func NewServer(g *dedupe.Guard, logger *slog.Logger) http.Handler {
	guard := dedupe.Middleware(g, &dedupe.HTTPConfig{
		Principal:  func(req any) string { return req.(*http.Request).Header.Get(userHeader) },
		RequireKey: dedupe.RequireKeyOn("POST /jobs"),
		Logger:     logger,
	})
	var seq atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("POST /jobs", guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The claim's key goes to whatever runs the job, so it can
		// deduplicate too (see dedupe.ClaimFrom).
		claim, _ := dedupe.ClaimFrom(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"job":"j-%d","ref":%q}`, seq.Add(1), claim.Ref)
	})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}
