package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// clock is a manual clock for tests: it moves only when told to.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// faultStore wraps a real store and lets a test inject failures per call.
// It is fault injection only: every successful path runs the real memstore.
type faultStore struct {
	dedupe.Store
	claim    func(n int) (dedupe.ClaimResult, error, bool)
	complete func(n int) error
	release  func(n int) error
	claims   int
	comps    int
	rels     int
}

func (f *faultStore) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	f.claims++
	if f.claim != nil {
		if res, err, ok := f.claim(f.claims); ok {
			return res, err
		}
	}
	return f.Store.Claim(ctx, req)
}

func (f *faultStore) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	f.comps++
	if f.complete != nil {
		if err := f.complete(f.comps); err != nil {
			return err
		}
	}
	return f.Store.Complete(ctx, req)
}

func (f *faultStore) Release(ctx context.Context, key, token string) error {
	f.rels++
	if f.release != nil {
		if err := f.release(f.rels); err != nil {
			return err
		}
	}
	return f.Store.Release(ctx, key, token)
}

var errUnavailable = fmt.Errorf("test: connection refused: %w", dedupe.ErrStoreUnavailable)

func result(body string) dedupe.Result {
	return dedupe.Result{StatusCode: 201, Headers: map[string][]string{"Content-Type": {"text/plain"}}, Body: []byte(body)}
}

// counter returns a Func that counts its runs and returns body.
func counter(n *int, body string) dedupe.Func {
	return func(context.Context) (dedupe.Result, error) {
		*n++
		return result(body), nil
	}
}

func TestRunOnceThenReplay(t *testing.T) {
	clk := newClock()
	g := dedupe.New(memstore.New(), &dedupe.Config{Now: clk.Now, Prefix: "fn"})
	ctx := context.Background()
	runs := 0

	first, err := g.Do(ctx, dedupe.Call{Key: "k1", Fingerprint: "fp"}, counter(&runs, "charged"))
	if err != nil {
		t.Fatalf("first Run: %v", err)
	}
	if !first.Stored || first.Replayed || string(first.Result.Body) != "charged" {
		t.Errorf("first outcome = %+v, want stored fresh result", first)
	}
	clk.Advance(time.Hour)
	second, err := g.Do(ctx, dedupe.Call{Key: "k1", Fingerprint: "fp"}, counter(&runs, "charged again"))
	if err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if !second.Replayed || string(second.Result.Body) != "charged" || second.Result.StatusCode != 201 {
		t.Errorf("second outcome = %+v, want replay of the first result", second)
	}
	if runs != 1 {
		t.Errorf("runs = %d, want 1", runs)
	}
	if second.Record.Key != "fn#k1" {
		t.Errorf("stored key = %q, want fn#k1", second.Record.Key)
	}
}

func TestRetention(t *testing.T) {
	tests := []struct {
		name    string
		advance time.Duration // after the first run completed
		runs    int
	}{
		{"replayed to the end of the retention", time.Minute, 1},
		{"runs again once the record expired", time.Minute + time.Second, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			g := dedupe.New(memstore.New(), &dedupe.Config{Now: clk.Now, Retention: time.Minute})
			runs := 0
			if _, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "x")); err != nil {
				t.Fatalf("first Run: %v", err)
			}
			clk.Advance(tt.advance)
			out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "x"))
			if err != nil {
				t.Fatalf("second Run: %v", err)
			}
			if runs != tt.runs || out.Replayed != (tt.runs == 1) {
				t.Errorf("got %d runs, replayed %v; want %d runs", runs, out.Replayed, tt.runs)
			}
		})
	}
}

func TestPrefixDefaultsToFunctionName(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "payments-api")
	g := dedupe.New(memstore.New(), nil)
	if got, want := g.Key("abc"), "payments-api#abc"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	if got := dedupe.New(memstore.New(), &dedupe.Config{Unprefixed: true}).Key("abc"); got != "abc" {
		t.Errorf("Key with Unprefixed = %q, want abc", got)
	}
}

func TestEmptyKey(t *testing.T) {
	g := dedupe.New(memstore.New(), nil)
	runs := 0
	_, err := g.Do(context.Background(), dedupe.Call{Key: "", Fingerprint: "fp"}, counter(&runs, "x"))
	if !errors.Is(err, dedupe.ErrInvalidKey) || runs != 0 {
		t.Errorf("err = %v, runs = %d; want ErrInvalidKey and no run", err, runs)
	}
}

func TestConflicts(t *testing.T) {
	clk := newClock()
	g := dedupe.New(memstore.New(), &dedupe.Config{Now: clk.Now, DefaultLease: 30 * time.Second})
	ctx := context.Background()
	var inner error
	var innerOut dedupe.Outcome
	innerRuns := 0
	_, err := g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) {
		clk.Advance(10*time.Second + 300*time.Millisecond)
		innerOut, inner = g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&innerRuns, "dup"))
		return result("first"), nil
	})
	if err != nil {
		t.Fatalf("outer Run: %v", err)
	}
	var ce *dedupe.ConflictError
	if !errors.Is(inner, dedupe.ErrInProgress) || !errors.As(inner, &ce) {
		t.Fatalf("duplicate while running: %v, want *ConflictError wrapping ErrInProgress", inner)
	}
	if got, want := ce.RetryAfter(clk.Now()), 20*time.Second; got != want {
		t.Errorf("RetryAfter = %v, want %v (19.7s left, rounded up)", got, want)
	}
	if innerRuns != 0 || innerOut.Replayed {
		t.Errorf("duplicate ran %d times, outcome %+v; want no run", innerRuns, innerOut)
	}

	_, err = g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "other-fp"}, counter(&innerRuns, "dup"))
	if !errors.Is(err, dedupe.ErrFingerprintMismatch) || !errors.As(err, &ce) || ce.Record.Fingerprint != "fp" {
		t.Errorf("different fingerprint: %v, want ConflictError wrapping ErrFingerprintMismatch", err)
	}
	if innerRuns != 0 {
		t.Errorf("mismatched duplicate ran %d times, want 0", innerRuns)
	}
}

func TestRetryAfterAtLeastOneSecond(t *testing.T) {
	now := time.Now()
	ce := &dedupe.ConflictError{Err: dedupe.ErrInProgress, Record: dedupe.Record{LeaseExpiresAt: now.Add(-time.Second)}}
	if got := ce.RetryAfter(now); got != time.Second {
		t.Errorf("RetryAfter on an expired lease = %v, want 1s", got)
	}
}

func TestFailureReleases(t *testing.T) {
	boom := errors.New("card processor exploded")
	tests := []struct {
		name    string
		fn      dedupe.Func
		keep    func(dedupe.Result) bool
		wantErr error
		panics  bool
	}{
		{name: "error", fn: func(context.Context) (dedupe.Result, error) { return dedupe.Result{}, boom }, wantErr: boom},
		{name: "panic", fn: func(context.Context) (dedupe.Result, error) { panic("boom") }, panics: true},
		{name: "unkept result", fn: func(context.Context) (dedupe.Result, error) { return dedupe.Result{StatusCode: 502}, nil },
			keep: func(r dedupe.Result) bool { return r.StatusCode < 500 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memstore.New()
			g := dedupe.New(store, nil)
			func() {
				defer func() {
					if r := recover(); (r != nil) != tt.panics {
						t.Errorf("recovered %v, want panic %v", r, tt.panics)
					}
				}()
				out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp", Keep: tt.keep}, tt.fn)
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Errorf("err = %v, want %v", err, tt.wantErr)
				}
				if out.Stored {
					t.Errorf("outcome stored = true, want false")
				}
			}()
			// Released: the lease ended, the record and its fingerprint
			// stay, so only the same request runs again.
			if rec, err := store.Get(context.Background(), g.Key("k"), time.Now()); err != nil || !rec.LeaseExpired(time.Now()) {
				t.Errorf("record after failure = %+v, %v; want it kept with its lease ended", rec, err)
			}
			if _, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp-other"}, counter(new(int), "other")); !errors.Is(err, dedupe.ErrFingerprintMismatch) {
				t.Errorf("different request after failure: err %v, want ErrFingerprintMismatch", err)
			}
			runs := 0
			if _, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "retry")); err != nil || runs != 1 {
				t.Errorf("retry: err %v, runs %d; want a fresh run", err, runs)
			}
		})
	}
}

func TestTimedOutOwnerCannotOverwriteTakeover(t *testing.T) {
	clk := newClock()
	store := memstore.New()
	g := dedupe.New(store, &dedupe.Config{Now: clk.Now, LeaseMargin: time.Second})
	deadline, cancel := context.WithDeadline(context.Background(), clk.Now().Add(5*time.Second))
	defer cancel()

	var second dedupe.Outcome
	var secondErr error
	first, err := g.Do(deadline, dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
		// The first invocation overruns its deadline and its lease (5s + 1s
		// margin); meanwhile a retry takes the key over and completes.
		clk.Advance(7 * time.Second)
		second, secondErr = g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
			return result("second"), nil
		})
		return result("first"), nil
	})
	if secondErr != nil || !second.Stored {
		t.Fatalf("takeover: %+v, %v; want a stored fresh run", second, secondErr)
	}
	if !errors.Is(err, dedupe.ErrNotStored) || !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("late owner err = %v, want ErrNotStored wrapping ErrLeaseLost", err)
	}
	if string(first.Result.Body) != "first" || first.Stored {
		t.Errorf("late owner outcome = %+v, want its own result, not stored", first)
	}
	rec, err := store.Get(context.Background(), g.Key("k"), clk.Now())
	if err != nil || string(rec.Result.Body) != "second" {
		t.Errorf("stored = %+v, %v; want the takeover's result", rec, err)
	}
}

func TestLease(t *testing.T) {
	clk := newClock()
	tests := []struct {
		name     string
		deadline time.Duration // 0: no deadline
		want     time.Duration
	}{
		{"no deadline uses DefaultLease", 0, 5 * time.Minute},
		{"deadline plus margin", 10 * time.Second, 12 * time.Second},
		{"capped at MaxLease, then the margin", time.Hour, 15*time.Minute + 2*time.Second},
		// Issue 9, case 5: a function near Lambda's 900 s limit keeps its
		// whole margin past its deadline.
		{"near the cap keeps the margin", 15*time.Minute - time.Second, 15*time.Minute + time.Second},
		{"past deadline gets the margin", -time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memstore.New()
			g := dedupe.New(store, &dedupe.Config{Now: clk.Now})
			ctx := context.Background()
			if tt.deadline != 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, clk.Now().Add(tt.deadline))
				defer cancel()
			}
			var rec dedupe.Record
			_, err := g.Do(ctx, dedupe.Call{Key: tt.name, Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) {
				var err error
				rec, err = store.Get(ctx, g.Key(tt.name), clk.Now())
				return dedupe.Result{}, err
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := rec.LeaseExpiresAt.Sub(clk.Now()); got != tt.want {
				t.Errorf("lease = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStoreDown(t *testing.T) {
	down := func(int) (dedupe.ClaimResult, error, bool) { return dedupe.ClaimResult{}, errUnavailable, true }
	t.Run("fail closed", func(t *testing.T) {
		g := dedupe.New(&faultStore{Store: memstore.New(), claim: down}, nil)
		runs := 0
		out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "x"))
		if !errors.Is(err, dedupe.ErrStoreUnavailable) || runs != 0 || out.Stored {
			t.Errorf("err = %v, runs = %d; want ErrStoreUnavailable and no run", err, runs)
		}
	})
	t.Run("fail open", func(t *testing.T) {
		g := dedupe.New(&faultStore{Store: memstore.New(), claim: down}, &dedupe.Config{FailOpen: true})
		runs := 0
		out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "unguarded"))
		if !errors.Is(err, dedupe.ErrRanUnguarded) || !errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("err = %v, want ErrRanUnguarded wrapping the store error", err)
		}
		if runs != 1 || string(out.Result.Body) != "unguarded" || out.Stored {
			t.Errorf("runs = %d, outcome %+v; want one unguarded run", runs, out)
		}
	})
}

func TestCompleteRetriesTransientFailures(t *testing.T) {
	tests := []struct {
		name       string
		failures   int
		wantStored bool
	}{
		{"recovers", 2, true},
		{"gives up", 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := &faultStore{Store: memstore.New(), complete: func(n int) error {
				if n <= tt.failures {
					return errUnavailable
				}
				return nil
			}}
			g := dedupe.New(fs, nil)
			runs := 0
			out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "done"))
			if out.Stored != tt.wantStored || string(out.Result.Body) != "done" {
				t.Errorf("outcome = %+v, want stored %v with the real result", out, tt.wantStored)
			}
			if tt.wantStored && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			if !tt.wantStored && !errors.Is(err, dedupe.ErrNotStored) {
				t.Errorf("err = %v, want ErrNotStored", err)
			}
		})
	}
}

// TestCancelledCallerStillRecords cancels the caller's context while the
// function runs: the guard must still record the result, or release the
// key after a failure, since the work has been done either way.
func TestCancelledCallerStillRecords(t *testing.T) {
	tests := []struct {
		name       string
		fnErr      error
		wantStored bool
		wantLen    int // records left
	}{
		{"result is completed", nil, true, 1},
		{"failure releases the key (its record stays, lease ended)", errors.New("processor down"), false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memstore.New()
			g := dedupe.New(store, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out, err := g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
				cancel()
				return result("done"), tt.fnErr
			})
			if !errors.Is(err, tt.fnErr) || (tt.fnErr == nil && err != nil) {
				t.Errorf("err = %v, want %v", err, tt.fnErr)
			}
			if out.Stored != tt.wantStored {
				t.Errorf("stored = %v, want %v", out.Stored, tt.wantStored)
			}
			if got := store.Len(); got != tt.wantLen {
				t.Errorf("got %d records, want %d", got, tt.wantLen)
			}
		})
	}
}

func TestReleaseFailureIsReported(t *testing.T) {
	boom := errors.New("handler failed")
	fs := &faultStore{Store: memstore.New(), release: func(int) error { return errUnavailable }}
	g := dedupe.New(fs, nil)
	_, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
		return dedupe.Result{}, boom
	})
	if !errors.Is(err, boom) || !errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Errorf("err = %v, want both the handler error and the release failure", err)
	}
}

func TestClaimRaceIsRetried(t *testing.T) {
	clk := newClock()
	now := clk.Now()
	tests := []struct {
		name  string
		found dedupe.Record // what the first, failed claim read back
	}{
		{"record vanished before the read", dedupe.Record{}},
		{"lease ran out before the read", dedupe.Record{Key: "k", Status: dedupe.StatusInProgress, Fingerprint: "fp",
			Token: "old", LeaseExpiresAt: now.Add(-time.Millisecond), ExpiresAt: now.Add(time.Hour)}},
		{"record expired before the read", dedupe.Record{Key: "k", Status: dedupe.StatusCompleted, Fingerprint: "fp",
			Token: "old", Result: &dedupe.Result{StatusCode: 200}, ExpiresAt: now.Add(-time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := &faultStore{Store: memstore.New(), claim: func(n int) (dedupe.ClaimResult, error, bool) {
				return dedupe.ClaimResult{Record: tt.found}, nil, n == 1
			}}
			g := dedupe.New(fs, &dedupe.Config{Now: clk.Now})
			runs := 0
			out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "x"))
			if err != nil || runs != 1 || !out.Stored || fs.claims != 2 {
				t.Errorf("got %+v, %v after %d runs and %d claims; want one stored run after 2 claims", out, err, runs, fs.claims)
			}
		})
	}
	// A record that keeps changing under every claim is evidence of
	// concurrent writers: in flight, never unavailable, so that FailOpen
	// does not run the function beside them.
	for _, failOpen := range []bool{false, true} {
		runs := 0
		always := &faultStore{Store: memstore.New(), claim: func(int) (dedupe.ClaimResult, error, bool) {
			return dedupe.ClaimResult{}, nil, true
		}}
		_, err := dedupe.New(always, &dedupe.Config{FailOpen: failOpen}).Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "x"))
		var conflict *dedupe.ConflictError
		if !errors.As(err, &conflict) || !errors.Is(err, dedupe.ErrInProgress) || errors.Is(err, dedupe.ErrStoreUnavailable) || always.claims != 3 || runs != 0 {
			t.Errorf("FailOpen %v: err = %v after %d claims and %d runs, want a ConflictError in progress after 3 claims, no run", failOpen, err, always.claims, runs)
		}
	}
}

func TestReplayOfOmittedResult(t *testing.T) {
	omitted := dedupe.Record{Key: "k", Status: dedupe.StatusCompleted, Fingerprint: "fp", ResultOmitted: true}
	fs := &faultStore{Store: memstore.New(), claim: func(int) (dedupe.ClaimResult, error, bool) {
		return dedupe.ClaimResult{Record: omitted}, nil, true
	}}
	runs := 0
	out, err := dedupe.New(fs, nil).Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, counter(&runs, "x"))
	if !errors.Is(err, dedupe.ErrResultOmitted) || runs != 0 || !out.Replayed {
		t.Errorf("err = %v, runs = %d, outcome %+v; want ErrResultOmitted without a run", err, runs, out)
	}
}

func TestConcurrentRunsExecuteOnce(t *testing.T) {
	g := dedupe.New(memstore.New(), nil)
	var mu sync.Mutex
	runs := 0
	var wg sync.WaitGroup
	results := make(chan error, 200)
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
				mu.Lock()
				runs++
				mu.Unlock()
				return result("once"), nil
			})
			if err == nil && string(out.Result.Body) != "once" {
				err = fmt.Errorf("body %q", out.Result.Body)
			}
			if err != nil && !errors.Is(err, dedupe.ErrInProgress) {
				results <- err
			}
		}()
	}
	wg.Wait()
	close(results)
	for err := range results {
		t.Errorf("unexpected: %v", err)
	}
	if runs != 1 {
		t.Errorf("runs = %d, want 1", runs)
	}
}

// TestGuardKeyBounds checks issue 9, case 3 for caller-chosen keys: a key
// of any length is guarded (shortened to fit every store), a key that is
// not UTF-8 is refused before any store call, and no error quotes a key.
func TestGuardKeyBounds(t *testing.T) {
	store := memstore.New()
	g := dedupe.New(store, &dedupe.Config{Prefix: "fn"})
	long := "customer:alice@example.com/" + strings.Repeat("order-", 1000)
	runs := 0
	for range 2 {
		if _, err := g.Do(context.Background(), dedupe.Call{Key: long, Fingerprint: "fp"}, counter(&runs, "done")); err != nil {
			t.Fatalf("Run(%d-byte key): %v", len(long), err)
		}
	}
	if runs != 1 {
		t.Errorf("runs = %d, want 1 (the long key replays)", runs)
	}
	if k := g.Key(long); len(k) > dedupe.MaxStoreKeyBytes || !strings.HasPrefix(k, "fn#customer:") {
		t.Errorf("Key(%d bytes) = %d bytes %.20q…, want at most %d with a readable prefix", len(long), len(k), k, dedupe.MaxStoreKeyBytes)
	}
	if g.Key(long) == g.Key(long+"x") {
		t.Error("two long keys share a stored key")
	}
	if _, err := g.Do(context.Background(), dedupe.Call{Key: "bad\xffkey", Fingerprint: "fp"}, counter(&runs, "x")); !errors.Is(err, dedupe.ErrInvalidKey) || runs != 1 {
		t.Errorf("Run(invalid UTF-8) = %v after %d runs, want ErrInvalidKey and no run", err, runs)
	}
	// A permanent store error names the key by its KeyRef only.
	_, err := g.Do(context.Background(), dedupe.Call{Key: "alice@example.com", Fingerprint: "fp2"}, counter(&runs, "x"))
	_, err = g.Do(context.Background(), dedupe.Call{Key: "alice@example.com", Fingerprint: "fp3"}, counter(&runs, "x"))
	if err == nil || strings.Contains(err.Error(), "alice@example.com") {
		t.Errorf("error %v, want one that does not quote the key", err)
	}
}
