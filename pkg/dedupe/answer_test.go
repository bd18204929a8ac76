package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// answerStore answers every Claim and Get with a fixed record and error,
// as a store does that learnt something about the key and then failed a
// later step (see dedupe.Store): it stands in for the backends, whose own
// tests show each one returns these on the wire.
type answerStore struct {
	dedupe.Store
	rec dedupe.Record
	err error
}

func (s *answerStore) Claim(context.Context, dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	return dedupe.ClaimResult{Record: s.rec}, s.err
}

func (s *answerStore) Get(context.Context, string, time.Time) (dedupe.Record, error) {
	return s.rec, s.err
}

// TestAnswersNeverFailOpen checks the rule of ErrStoreUnavailable (issue
// 29): an error that comes with an answer about the key never runs the
// function, FailOpen or not, and is answered for what it is. The
// fingerprints are compared before anything else, so a different
// request gets 422 whatever failed after the read.
func TestAnswersNeverFailOpen(t *testing.T) {
	now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	completed := dedupe.Record{Key: "k", Status: dedupe.StatusCompleted, Fingerprint: "fp", Token: "first",
		ExpiresAt: now.Add(time.Hour), CreatedAt: now.Add(-time.Minute)}
	inFlight := dedupe.Record{Key: "k", Status: dedupe.StatusInProgress, Fingerprint: "fp", Token: "first",
		LeaseExpiresAt: now.Add(-time.Second), ExpiresAt: now.Add(time.Hour)}
	unreadable := fmt.Errorf("teststore: get object: SlowDown: %w", dedupe.ErrResultUnreadable)
	lost := fmt.Errorf("teststore: get object: NoSuchKey: %w", dedupe.ErrResultOmitted)
	writer := fmt.Errorf("teststore: ReplicatedWriteConflictException: %w", dedupe.ErrInProgress)
	tests := []struct {
		name        string
		rec         dedupe.Record
		err         error
		fingerprint string
		want        error // what Do's error wraps
		status      int   // what HTTPAPI answers
		problem     string
		retryAfter  bool
	}{
		{"completed, result unreadable now", completed, unreadable, "fp", dedupe.ErrResultUnreadable, 503, dedupe.ProblemResultUnreadable, true},
		{"completed, result unreadable, another request", completed, unreadable, "other", dedupe.ErrFingerprintMismatch, 422, dedupe.ProblemKeyReused, false},
		{"completed, result lost", completed, lost, "fp", dedupe.ErrResultOmitted, 409, dedupe.ProblemResultUnavailable, false},
		{"completed, result lost, another request", completed, lost, "other", dedupe.ErrFingerprintMismatch, 422, dedupe.ProblemKeyReused, false},
		{"a concurrent writer, no record read", dedupe.Record{Key: "k"}, writer, "fp", dedupe.ErrInProgress, 409, dedupe.ProblemInProgress, true},
		{"a concurrent writer, no record at all", dedupe.Record{}, writer, "fp", dedupe.ErrInProgress, 409, dedupe.ProblemInProgress, true},
		{"a concurrent writer of a stranded record", inFlight, writer, "fp", dedupe.ErrInProgress, 409, dedupe.ProblemInProgress, true},
		{"a concurrent writer of another request's record", inFlight, writer, "other", dedupe.ErrFingerprintMismatch, 422, dedupe.ProblemKeyReused, false},
	}
	for _, tt := range tests {
		for _, failOpen := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/FailOpen=%v", tt.name, failOpen), func(t *testing.T) {
				store := &answerStore{Store: memstore.New(), rec: tt.rec, err: tt.err}
				var events_ []dedupe.Event
				g := dedupe.New(store, &dedupe.Config{Prefix: "p", FailOpen: failOpen, Now: func() time.Time { return now },
					OnOutcome: func(_ context.Context, ev dedupe.Event) { events_ = append(events_, ev) }})
				runs := 0
				_, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: tt.fingerprint}, counter(&runs, "again"))
				if runs != 0 || !errors.Is(err, tt.want) || errors.Is(err, dedupe.ErrStoreUnavailable) || errors.Is(err, dedupe.ErrRanUnguarded) {
					t.Fatalf("Do = %v after %d runs; want %v, no run, not unavailable", err, runs, tt.want)
				}
				if len(events_) != 1 || events_[0].Outcome == dedupe.OutcomeExecuted {
					t.Errorf("events = %+v, want one, not executed", events_)
				}
				if errors.Is(tt.want, dedupe.ErrInProgress) {
					var conflict *dedupe.ConflictError
					if !errors.As(err, &conflict) || conflict.RetryAfter(now) < time.Second {
						t.Errorf("Do = %v, want a *ConflictError with a Retry-After", err)
					}
				}

				runs = 0
				h := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{SharedScope: true, Logger: discard},
					func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
						runs++
						return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
					})
				resp, err := h(context.Background(), events.APIGatewayV2HTTPRequest{RouteKey: "POST /pay", RawPath: "/pay",
					Headers: map[string]string{"idempotency-key": "k"}, Body: tt.fingerprint,
					RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/pay"}}})
				var p dedupe.Problem
				json.Unmarshal([]byte(resp.Body), &p)
				// HTTP fingerprints are the adapter's: "fp" never matches,
				// so every record above is another request's but for the
				// ones without a fingerprint to compare.
				wantStatus, wantProblem, wantRetry := tt.status, tt.problem, tt.retryAfter
				if tt.rec.Token != "" {
					wantStatus, wantProblem, wantRetry = 422, dedupe.ProblemKeyReused, false
				}
				if err != nil || runs != 0 || resp.StatusCode != wantStatus || p.Type != wantProblem || (resp.Headers["Retry-After"] != "") != wantRetry {
					t.Errorf("HTTPAPI = %d %s Retry-After %q, %v after %d runs; want %d %s (Retry-After %v), no run",
						resp.StatusCode, p.Type, resp.Headers["Retry-After"], err, runs, wantStatus, wantProblem, wantRetry)
				}
			})
		}
	}
}

// TestAnswersHTTPSameRequest checks the adapters' answers for the same
// request as the record's (its fingerprint is the adapter's own).
func TestAnswersHTTPSameRequest(t *testing.T) {
	now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	mem := memstore.New()
	rk := &keyRecorder{Store: mem}
	g := dedupe.New(rk, &dedupe.Config{Prefix: "p", Now: func() time.Time { return now }})
	runs := 0
	h := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{SharedScope: true, Logger: discard},
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "charged"}, nil
		})
	ev := events.APIGatewayV2HTTPRequest{RouteKey: "POST /pay", RawPath: "/pay",
		Headers: map[string]string{"idempotency-key": "k"}, Body: `{"amount":1}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/pay"}}}
	if resp, err := h(context.Background(), ev); err != nil || resp.StatusCode != 201 {
		t.Fatalf("first request = %d, %v", resp.StatusCode, err)
	}
	rec, err := mem.Get(context.Background(), rk.key, now)
	if err != nil || rec.Status != dedupe.StatusCompleted {
		t.Fatalf("record after the first request: %+v, %v", rec, err)
	}
	rec.Result = nil
	for _, tt := range []struct {
		name    string
		err     error
		status  int
		problem string
	}{
		{"unreadable now", fmt.Errorf("s3: cut transfer: %w", dedupe.ErrResultUnreadable), 503, dedupe.ProblemResultUnreadable},
		{"lost", fmt.Errorf("s3: NoSuchKey: %w", dedupe.ErrResultOmitted), 409, dedupe.ProblemResultUnavailable},
	} {
		for _, failOpen := range []bool{false, true} {
			g := dedupe.New(&answerStore{Store: mem, rec: rec, err: tt.err}, &dedupe.Config{Prefix: "p", FailOpen: failOpen, Now: func() time.Time { return now }})
			h := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{SharedScope: true, Logger: discard},
				func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs++
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "charged again"}, nil
				})
			resp, err := h(context.Background(), ev)
			var p dedupe.Problem
			json.Unmarshal([]byte(resp.Body), &p)
			if err != nil || runs != 1 || resp.StatusCode != tt.status || p.Type != tt.problem {
				t.Errorf("%s, FailOpen %v: %d %s, %v after %d runs; want %d %s after the first run only", tt.name, failOpen, resp.StatusCode, p.Type, err, runs, tt.status, tt.problem)
			}
		}
	}
}

// TestWaitMeetsUnreadableResult: a duplicate waiting for the first
// request (Config.Wait) that finds it completed but cannot read the
// result answers ErrResultUnreadable, not in progress and not omitted.
func TestWaitMeetsUnreadableResult(t *testing.T) {
	clk := newClock()
	mem := memstore.New()
	g := dedupe.New(mem, &dedupe.Config{Prefix: "p", Now: clk.Now})
	// The first request holds the key.
	if _, err := mem.Claim(context.Background(), dedupe.ClaimRequest{Key: g.Key("k"), Fingerprint: "fp", Token: "first",
		Now: clk.Now(), LeaseUntil: clk.Now().Add(time.Minute), ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	done := dedupe.Record{Key: g.Key("k"), Status: dedupe.StatusCompleted, Fingerprint: "fp", Token: "first", ExpiresAt: clk.Now().Add(time.Hour)}
	ws := &waitStore{Store: mem, done: done, err: fmt.Errorf("s3: SlowDown: %w", dedupe.ErrResultUnreadable)}
	g = dedupe.New(ws, &dedupe.Config{Prefix: "p", Now: clk.Now, Wait: time.Second,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	runs := 0
	_, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "again"))
	var conflict *dedupe.ConflictError
	if runs != 0 || !errors.Is(err, dedupe.ErrResultUnreadable) || errors.As(err, &conflict) {
		t.Errorf("Run = %v after %d runs; want ErrResultUnreadable, no run", err, runs)
	}
}

// waitStore answers every Get with a completed record whose result
// cannot be read.
type waitStore struct {
	dedupe.Store
	done dedupe.Record
	err  error
}

func (s *waitStore) Get(context.Context, string, time.Time) (dedupe.Record, error) {
	return s.done, s.err
}

// keyRecorder remembers the last key claimed.
type keyRecorder struct {
	dedupe.Store
	key string
}

func (s *keyRecorder) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	s.key = req.Key
	return s.Store.Claim(ctx, req)
}

var discard = slog.New(slog.DiscardHandler)
