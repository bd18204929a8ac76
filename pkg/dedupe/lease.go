package dedupe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// LeaseExtender is an optional Store capability: a store that implements
// it lets the guard renew a lease while the work runs (Config.Heartbeat).
// pkg/memstore and pkg/dynamostore implement it. It is a separate
// interface so that stores written against Store keep compiling; the
// guard checks for it with a type assertion.
type LeaseExtender interface {
	// Extend sets the lease of the record for req.Key to req.LeaseUntil
	// and its expiry to req.ExpiresAt, but only if the record still
	// carries req.Token, is IN_PROGRESS, has not expired and its lease has
	// not run out at req.Now (Record.LeaseExpired). Otherwise it returns an
	// error wrapping ErrLeaseLost and changes nothing: a renewal can never
	// revive a key that was taken over, completed or released, nor one
	// whose lease ran out (a claim may be taking it over at that moment). Transient
	// failures wrap ErrStoreUnavailable, as for Store.
	Extend(ctx context.Context, req ExtendRequest) error
}

// ExtendRequest is the input of LeaseExtender.Extend.
type ExtendRequest struct {
	// Key is the full, namespaced key.
	Key string
	// Token must match the record's owner token.
	Token string
	// Now is the time of the renewal; the expiry check compares to it.
	Now time.Time
	// LeaseUntil is the new end of the lease.
	LeaseUntil time.Time
	// ExpiresAt is the new expiry of the IN_PROGRESS record.
	ExpiresAt time.Time
}

// retention returns how long the record of call is kept once completed.
func (g *Guard) retention(call Call) time.Duration {
	if call.Retention > 0 {
		return call.Retention
	}
	return g.cfg.Retention
}

// holds reports whether a failed fn keeps its key until the lease ends
// instead of releasing it: with Config.MinHold, when fn gave up because
// its context ended, so the outcome of its work is unknown.
func (g *Guard) holds(err error) bool {
	return g.cfg.MinHold > 0 && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// heartbeat renews the lease on key every Config.Heartbeat while the
// guarded function runs. It returns the function's context, which is
// cancelled with cause ErrLeaseLost when a renewal finds the key taken
// over, and a stop function that ends the renewals and waits for them;
// the guard calls it before it records or releases anything, so no
// renewal outlives the call or races its completion.
//
// With Heartbeat 10s and DefaultLease 30s, outside Lambda:
//
//	claim   beat    beat    beat   fn returns: stop, wait, complete
//	  |-------|-------|-------|------|
//	  lease: +30s   +30s    +30s     (each beat moves the end to now+30s)
//	  a crash stops the beats: the key is free at most 30s later,
//	  instead of the fixed DefaultLease after the claim.
func (g *Guard) heartbeat(ctx context.Context, call Call, key, token string) (context.Context, func()) {
	// withHeartbeat calls it only with a positive Heartbeat, which New
	// allows only on a LeaseExtender.
	ext, ok := g.store.(LeaseExtender)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	tick, stopTicker := g.cfg.NewTicker(g.cfg.Heartbeat)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stopTicker()
		for {
			select {
			case <-done:
				return
			case <-tick:
			}
			now := g.cfg.Now()
			until := now.Add(g.lease(ctx, now))
			err := ext.Extend(context.WithoutCancel(ctx), ExtendRequest{
				Key: key, Token: token, Now: now,
				LeaseUntil: until, ExpiresAt: until.Add(g.retention(call)),
			})
			switch {
			case err == nil:
			case errors.Is(err, ErrLeaseLost):
				g.cfg.Logger.Warn("dedupe: lease lost during renewal, cancelling the work", "key", KeyRef(key), "err", err)
				cancel(fmt.Errorf("renew %s: %w", KeyRef(key), err))
				return
			default:
				// Transient: the lease still runs; try again next beat.
				g.cfg.Logger.Warn("dedupe: lease renewal failed", "key", KeyRef(key), "err", err)
			}
		}
	}()
	return ctx, func() {
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// newTicker is the default Config.NewTicker.
func newTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// withHeartbeat returns fn renewing its lease while it runs (see
// heartbeat). The renewals stop when fn returns or panics, before the
// guard completes or releases the key.
func (g *Guard) withHeartbeat(call Call, key, token string, fn Func) Func {
	if g.cfg.Heartbeat <= 0 {
		return fn
	}
	return func(ctx context.Context) (Result, error) {
		hctx, stop := g.heartbeat(ctx, call, key, token)
		defer stop()
		return fn(hctx)
	}
}
