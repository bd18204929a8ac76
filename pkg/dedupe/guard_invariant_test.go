package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// The tests in this file pin decisions of guard.go that mutation testing
// (make mutate PKG=./pkg/dedupe) found no test of the package noticing.

// ownClaimNotAcquired is a store that reports every claim it grants as
// not acquired, returning the record the claim wrote: what a store
// answers when an SDK retry of an applied conditional write fails its
// condition on the guard's own record and the store reads it back.
type ownClaimNotAcquired struct{ dedupe.Store }

func (s ownClaimNotAcquired) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, req)
	res.Acquired = false
	return res, err
}

// TestOwnClaimIsRecognized: a claim answered with the guard's own
// IN_PROGRESS record (its token) is the guard's, even from a store that
// says it was not acquired. The function runs once and its result is
// stored, rather than the guard claiming again until it gives up with a
// 409 for a record that is its own.
func TestOwnClaimIsRecognized(t *testing.T) {
	store := memstore.New()
	g := dedupe.New(ownClaimNotAcquired{store}, nil)
	runs := 0
	out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "x"))
	if err != nil || runs != 1 || !out.Stored {
		t.Fatalf("got stored %v, %v after %d runs; want one stored run", out.Stored, err, runs)
	}
	// The record is complete: a retry through a conforming store replays.
	out, err = dedupe.New(store, nil).Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "y"))
	if err != nil || !out.Replayed || string(out.Result.Body) != "x" || runs != 1 {
		t.Errorf("retry: got replayed %v %q, %v after %d runs; want the replay of x", out.Replayed, out.Result.Body, err, runs)
	}
}

// TestMinRetentionIsAccepted: MinRetention itself is a valid per-call
// retention; only shorter ones are refused.
func TestMinRetentionIsAccepted(t *testing.T) {
	runs := 0
	g := dedupe.New(memstore.New(), nil)
	out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp", Retention: dedupe.MinRetention}, counter(&runs, "x"))
	if err != nil || !out.Stored || runs != 1 {
		t.Errorf("Retention MinRetention: stored %v, %v after %d runs; want one stored run", out.Stored, err, runs)
	}
	_, err = g.Do(context.Background(), dedupe.Call{Key: "k2", Fingerprint: "fp", Retention: dedupe.MinRetention - time.Second}, counter(&runs, "x"))
	if !errors.Is(err, dedupe.ErrInvalidRetention) || runs != 1 {
		t.Errorf("Retention below MinRetention: %v after %d runs, want ErrInvalidRetention and no run", err, runs)
	}
	// HandlerConfig.Retention has the same bound.
	if _, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: "id", Scope: "'svc'", Retention: dedupe.MinRetention},
		func(context.Context, map[string]any) (string, error) { return "", nil }); err != nil {
		t.Errorf("HandlerConfig.Retention MinRetention: %v, want it accepted", err)
	}
}

// TestInFlightAnswerNamesTheKey: a claim that fails with evidence of a
// concurrent writer is a 409 whose record names the key in flight; when
// the store read that writer's record, the 409 carries it (the first
// request's id included).
func TestInFlightAnswerNamesTheKey(t *testing.T) {
	for _, tt := range []struct {
		name  string
		found dedupe.Record
	}{
		{"writer seen, record not read", dedupe.Record{}},
		{"writer's record read", dedupe.Record{Key: "dedupe-test#k", Status: dedupe.StatusInProgress, Fingerprint: "fp", Token: "other", RequestID: "req-first"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs := &faultStore{Store: memstore.New(), claim: func(int) (dedupe.ClaimResult, error, bool) {
				return dedupe.ClaimResult{Record: tt.found}, fmt.Errorf("test: condition failed: %w", dedupe.ErrInProgress), true
			}}
			g := dedupe.New(fs, nil)
			runs := 0
			_, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "x"))
			var conflict *dedupe.ConflictError
			if !errors.As(err, &conflict) || !errors.Is(err, dedupe.ErrInProgress) || runs != 0 {
				t.Fatalf("got %v after %d runs, want a 409 ConflictError and no run", err, runs)
			}
			want := tt.found
			if want.Key == "" {
				want = dedupe.Record{Key: g.Key("k"), Status: dedupe.StatusInProgress}
			}
			if got := conflict.Record; got.Key != want.Key || got.Status != want.Status || got.RequestID != want.RequestID {
				t.Errorf("409's record: key %q, status %s, request %q; want %q, %s, %q", got.Key, got.Status, got.RequestID, want.Key, want.Status, want.RequestID)
			}
		})
	}
}

// TestReplayFromStoreIsCached: with a Cache, a replay the guard read from
// the store (a record another environment completed) is cached, so the
// next replay of it costs no store call.
func TestReplayFromStoreIsCached(t *testing.T) {
	store := memstore.New()
	runs := 0
	if _, err := dedupe.New(store, nil).Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "paid")); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: store}
	g := dedupe.New(cs, &dedupe.Config{Cache: dedupe.NewCache(0, 0)})
	for i := range 2 {
		out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "again"))
		if err != nil || !out.Replayed || string(out.Result.Body) != "paid" {
			t.Fatalf("replay %d: %+v, %v; want the replay of paid", i+1, out, err)
		}
	}
	if got := cs.calls.Load(); got != 1 || runs != 1 {
		t.Errorf("two replays cost %d store calls after %d runs, want 1 (the second from the cache) after 1", got, runs)
	}
}

// TestWaitStaysWithinItsBudget: a duplicate that waits (Config.Wait) for
// a request in flight pauses at most Wait in all, even on a clock that
// does not move; it never pauses for nothing, so it stops when the clock
// reaches the wait's end rather than reading again without a pause.
func TestWaitStaysWithinItsBudget(t *testing.T) {
	const wait = time.Second
	for _, jump := range []bool{false, true} {
		clk := newClock()
		store := memstore.New()
		g := dedupe.New(store, &dedupe.Config{Now: clk.Now, Wait: wait})
		now := clk.Now()
		if _, err := store.Claim(context.Background(), dedupe.ClaimRequest{Key: g.Key("k"), Fingerprint: "fp", Token: "other",
			Now: now, LeaseUntil: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		var paused time.Duration
		pauses := 0
		g = dedupe.New(store, &dedupe.Config{Now: clk.Now, Wait: wait, Sleep: func(ctx context.Context, d time.Duration) error {
			if d <= 0 {
				t.Errorf("clock jumps %v: paused %v", jump, d)
				return context.Canceled
			}
			paused += d
			pauses++
			if jump && pauses == 3 {
				clk.Advance(now.Add(wait).Sub(clk.Now())) // reads took the rest of the budget
			}
			return nil
		}})
		runs := 0
		_, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "x"))
		if !errors.Is(err, dedupe.ErrInProgress) || runs != 0 {
			t.Errorf("clock jumps %v: %v after %d runs, want ErrInProgress and no run", jump, err, runs)
		}
		if paused > wait {
			t.Errorf("clock jumps %v: paused %v in all, want at most Wait (%v)", jump, paused, wait)
		}
	}
}

// TestReleaseFailureIsInTheEvent: the event of a call whose key was
// released reports a failed release, and only a failed one.
func TestReleaseFailureIsInTheEvent(t *testing.T) {
	for _, tt := range []struct {
		name       string
		panics     bool
		releaseErr error
	}{
		{"Keep rejects, release fails", false, errUnavailable},
		{"function panics, release succeeds", true, nil},
		{"function panics, release fails", true, errUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ev dedupe.Event
			fs := &faultStore{Store: memstore.New(), release: func(int) error { return tt.releaseErr }}
			g := dedupe.New(fs, &dedupe.Config{OnOutcome: func(_ context.Context, e dedupe.Event) { ev = e }})
			call := dedupe.Call{Key: "k", Fingerprint: "fp", Keep: func(dedupe.Result) bool { return false }}
			func() {
				defer func() { _ = recover() }()
				g.Do(context.Background(), call, func(context.Context) (dedupe.Result, error) {
					if tt.panics {
						panic("boom")
					}
					return result("x"), nil
				})
			}()
			switch {
			case ev.Outcome != dedupe.OutcomeReleased:
				t.Errorf("outcome %s, want %s", ev.Outcome, dedupe.OutcomeReleased)
			case tt.releaseErr != nil && !errors.Is(ev.Err, tt.releaseErr):
				t.Errorf("event error %v, want the release's %v", ev.Err, tt.releaseErr)
			case tt.releaseErr == nil && (ev.Err == nil || ev.Err.Error() != "function panicked"):
				t.Errorf("event error %v, want \"function panicked\" alone", ev.Err)
			}
		})
	}
}
