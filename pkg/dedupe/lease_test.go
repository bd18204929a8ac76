package dedupe_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// extendingStore exposes a backend's LeaseExtender and reports every
// Extend on done, so a test knows when a heartbeat has been handled.
type extendingStore struct {
	dedupe.Store
	done chan error
}

func (s *extendingStore) Extend(ctx context.Context, req dedupe.ExtendRequest) error {
	err := s.Store.(dedupe.LeaseExtender).Extend(ctx, req)
	s.done <- err
	return err
}

// testTicker is a Config.NewTicker whose ticks the test sends.
type testTicker struct {
	c       chan time.Time
	every   time.Duration
	stopped atomic.Int32
}

func newTestTicker() *testTicker {
	return &testTicker{c: make(chan time.Time)}
}

func (tt *testTicker) New(d time.Duration) (<-chan time.Time, func()) {
	tt.every = d
	return tt.c, func() { tt.stopped.Add(1) }
}

func runLease(t *testing.T, b backend) {
	t.Run("HeartbeatRenews", func(t *testing.T) { testHeartbeatRenews(t, b) })
	t.Run("HeartbeatLeaseLost", func(t *testing.T) { testHeartbeatLeaseLost(t, b) })
	t.Run("MinHold", func(t *testing.T) { testMinHold(t, b) })
}

func TestLeaseRenewal(t *testing.T) { runLease(t, memoryBackend) }

// TestHeartbeatNeedsLeaseExtender checks issue 17, case 5: a Heartbeat
// on a store that cannot extend a lease is refused at construction, not
// silently dropped (a long request's retry would take its key over).
func TestHeartbeatNeedsLeaseExtender(t *testing.T) {
	tick := newTestTicker()
	msg := mustPanic(t, func() {
		dedupe.New(&faultyStore{Store: mustStore(t, memoryBackend)}, &dedupe.Config{Heartbeat: time.Second, NewTicker: tick.New})
	})
	if !strings.Contains(msg, "Config.Heartbeat") || !strings.Contains(msg, "LeaseExtender") {
		t.Errorf("panic %q, want it to name Config.Heartbeat and LeaseExtender", msg)
	}
	// Without Heartbeat the same store is fine.
	dedupe.New(&faultyStore{Store: mustStore(t, memoryBackend)}, nil)
}

func mustStore(t *testing.T, b backend) dedupe.Store {
	s, _ := b.new(t)
	return s
}

func leaseGuard(t *testing.T, b backend, cfg dedupe.Config) (*dedupe.Guard, *extendingStore, *testClock, *testTicker) {
	store := &extendingStore{Store: mustStore(t, b), done: make(chan error, 1)}
	clock, tick := newTestClock(), newTestTicker()
	cfg.Prefix, cfg.Now, cfg.NewTicker = "lease-"+rand.Text(), clock.Now, tick.New
	return dedupe.New(store, &cfg), store, clock, tick
}

func testHeartbeatRenews(t *testing.T, b backend) {
	g, store, clock, tick := leaseGuard(t, b, dedupe.Config{Heartbeat: 10 * time.Second, DefaultLease: 30 * time.Second})
	ctx := context.Background()
	out, err := g.Do(ctx, dedupe.Call{Key: "job", Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) {
		for range 3 { // 75 s of work on a 30 s lease
			clock.Advance(25 * time.Second)
			tick.c <- clock.Now()
			if err := <-store.done; err != nil {
				t.Errorf("Extend = %v, want nil", err)
			}
			rec, err := store.Get(ctx, g.Key("job"), clock.Now())
			if err != nil || !rec.LeaseExpiresAt.Equal(clock.Now().Add(30*time.Second)) {
				t.Errorf("after a beat: lease ends %v, %v; want %v", rec.LeaseExpiresAt, err, clock.Now().Add(30*time.Second))
			}
			// A duplicate now is still in progress, 75 s after the claim.
			if _, err := g.Do(ctx, dedupe.Call{Key: "job", Fingerprint: "fp"}, nil); !errors.Is(err, dedupe.ErrInProgress) {
				t.Errorf("duplicate during renewed work: err = %v, want ErrInProgress", err)
			}
		}
		return dedupe.Result{Body: []byte("done")}, nil
	})
	if err != nil || !out.Stored {
		t.Errorf("Run = %+v, %v; want stored", out, err)
	}
	if n := tick.stopped.Load(); n != 1 {
		t.Errorf("the ticker was stopped %d times when the guard returned, want 1", n)
	}
	if tick.every != 10*time.Second {
		t.Errorf("ticker every %v, want 10s", tick.every)
	}
}

func testHeartbeatLeaseLost(t *testing.T, b backend) {
	g, store, clock, tick := leaseGuard(t, b, dedupe.Config{Heartbeat: 10 * time.Second, DefaultLease: 30 * time.Second})
	ctx := context.Background()
	_, err := g.Do(ctx, dedupe.Call{Key: "job", Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) {
		// The process stalls past its lease (a GC pause, a frozen
		// container); a retry takes the key over meanwhile.
		clock.Advance(31 * time.Second)
		tookOver := make(chan error, 1)
		go func() {
			_, err := g.Do(context.Background(), dedupe.Call{Key: "job", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
				return dedupe.Result{Body: []byte("second")}, nil
			})
			tookOver <- err
		}()
		if err := <-tookOver; err != nil {
			t.Errorf("takeover: %v", err)
		}
		tick.c <- clock.Now()
		if err := <-store.done; !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Errorf("Extend after a takeover = %v, want ErrLeaseLost", err)
		}
		<-ctx.Done()
		return dedupe.Result{}, context.Cause(ctx)
	})
	if !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Run = %v, want the work cancelled with ErrLeaseLost", err)
	}
	out, err := g.Do(ctx, dedupe.Call{Key: "job", Fingerprint: "fp"}, nil)
	if err != nil || string(out.Result.Body) != "second" {
		t.Errorf("after: %q, %v; want the takeover's result replayed", out.Result.Body, err)
	}
}

func testMinHold(t *testing.T, b backend) {
	g, _, clock, _ := leaseGuard(t, b, dedupe.Config{MinHold: 10 * time.Minute})
	runs := 0
	withdraw := func(ctx context.Context) (dedupe.Result, error) {
		runs++
		if runs == 1 {
			// The bank did not answer before the deadline: the
			// withdrawal may or may not have happened.
			return dedupe.Result{}, context.DeadlineExceeded
		}
		return dedupe.Result{Body: []byte("ok")}, nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(3*time.Second))
	defer cancel()
	if _, err := g.Do(ctx, dedupe.Call{Key: "w-1", Fingerprint: "fp"}, withdraw); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first = %v, want DeadlineExceeded", err)
	}
	clock.Advance(9 * time.Minute)
	_, err := g.Do(context.Background(), dedupe.Call{Key: "w-1", Fingerprint: "fp"}, withdraw)
	var conflict *dedupe.ConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, dedupe.ErrInProgress) || runs != 1 {
		t.Fatalf("retry after 9 minutes = %v after %d runs; want ErrInProgress after 1", err, runs)
	}
	if ra := conflict.RetryAfter(clock.Now()); ra != time.Minute {
		t.Errorf("Retry-After = %v, want the minute left of the hold", ra)
	}
	clock.Advance(61 * time.Second)
	if out, err := g.Do(context.Background(), dedupe.Call{Key: "w-1", Fingerprint: "fp"}, withdraw); err != nil || !out.Stored || runs != 2 {
		t.Errorf("retry after the hold = %+v, %v after %d runs; want a second run", out, err, runs)
	}
	// Other errors release at once, as without MinHold.
	if _, err := g.Do(context.Background(), dedupe.Call{Key: "w-2", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
		return dedupe.Result{}, errors.New("declined")
	}); err == nil {
		t.Fatal("want the error")
	}
	if out, err := g.Do(context.Background(), dedupe.Call{Key: "w-2", Fingerprint: "fp"}, withdraw); err != nil || !out.Stored {
		t.Errorf("retry after a plain error = %+v, %v; want it run at once", out, err)
	}
}

// A panic stops the renewals before the key is released, so no beat can
// revive the lease after the release, and the retry runs at once.
func TestHeartbeatStopsOnPanic(t *testing.T) {
	g, _, _, tick := leaseGuard(t, memoryBackend, dedupe.Config{Heartbeat: time.Second, DefaultLease: 5 * time.Second})
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("the panic was not re-raised")
			}
		}()
		g.Do(context.Background(), dedupe.Call{Key: "p", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { panic("boom") })
	}()
	if n := tick.stopped.Load(); n != 1 {
		t.Errorf("ticker stopped %d times, want 1", n)
	}
	out, err := g.Do(context.Background(), dedupe.Call{Key: "p", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { return dedupe.Result{}, nil })
	if err != nil || !out.Stored {
		t.Errorf("retry after the panic = %+v, %v; want it run at once", out, err)
	}
}
