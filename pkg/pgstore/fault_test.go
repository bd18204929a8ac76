package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lambda-dedupe/dedupe/localtest/faultproxy"
	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// script returns an injector that applies faults in order to the calls
// named op (see callName), and faultNone to everything else and
// afterwards. The test fails if a fault is left unused when it ends: a
// script that never matches would test nothing.
func script(t *testing.T, op string, faults ...fault) func(string) fault {
	t.Helper()
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if len(faults) > 0 {
			t.Errorf("faults %v for %q never injected", faults, op)
		}
	})
	return func(got string) fault {
		mu.Lock()
		defer mu.Unlock()
		if got != op || len(faults) == 0 {
			return faultNone
		}
		f := faults[0]
		faults = faults[1:]
		return f
	}
}

// TestDriverFaults injects each fault into the claim and the completion
// of a store that sends each call once (Attempts 1), and checks the
// error the store returns, what the table holds afterwards, and that a
// retry with the same token is recognised.
func TestDriverFaults(t *testing.T) {
	p := newPool(t)
	table := newTable(t, p)
	ctx := context.Background()
	plain := newStore(t, p, pgstore.Options{Table: table})
	for _, tt := range []struct {
		name    string
		f       fault
		applied bool
	}{
		{"lost reply", faultLostReply, true},
		{"throttle", faultThrottle, false},
		{"timeout", faultTimeout, false},
	} {
		t.Run("claim/"+tt.name, func(t *testing.T) {
			k := "claim/" + tt.name
			s := newStore(t, faultClient{Client: p, inject: script(t, "claim", tt.f)}, pgstore.Options{Table: table, Attempts: 1})
			if _, err := s.Claim(ctx, claim(k, "fp", "tok", base)); !errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Fatalf("faulted Claim: got %v, want ErrStoreUnavailable", err)
			}
			rec, err := plain.Get(ctx, k, base)
			if tt.applied != (err == nil) {
				t.Fatalf("after the fault Get = %+v, %v; want applied %v", rec, err, tt.applied)
			}
			res, err := s.Claim(ctx, claim(k, "fp", "tok", base.Add(10*time.Millisecond)))
			if err != nil || !res.Acquired || res.Record.Token != "tok" {
				t.Fatalf("retried Claim: got %+v, %v; want acquired by tok", res, err)
			}
			if res, err := plain.Claim(ctx, claim(k, "fp", "tok-2", base.Add(time.Second))); err != nil || res.Acquired {
				t.Errorf("other Claim: got %+v, %v; want held", res, err)
			}
		})
		t.Run("complete/"+tt.name, func(t *testing.T) {
			k := "complete/" + tt.name
			s := newStore(t, faultClient{Client: p, inject: script(t, "complete", tt.f)}, pgstore.Options{Table: table, Attempts: 1})
			if _, err := s.Claim(ctx, claim(k, "fp", "tok", base)); err != nil {
				t.Fatal(err)
			}
			req := dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: dedupe.Result{StatusCode: 201, Body: []byte("ok")}}
			if err := s.Complete(ctx, req); !errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Fatalf("faulted Complete: got %v, want ErrStoreUnavailable", err)
			}
			rec, _ := plain.Get(ctx, k, base)
			if got := rec.Status == dedupe.StatusCompleted; got != tt.applied {
				t.Fatalf("after the fault: record %+v, want completed %v", rec, tt.applied)
			}
			if err := s.Complete(ctx, req); err != nil {
				t.Fatalf("retried Complete: %v", err)
			}
			rec, err := plain.Get(ctx, k, base)
			if err != nil || rec.Status != dedupe.StatusCompleted || string(rec.Result.Body) != "ok" {
				t.Errorf("after the retry: %+v, %v; want COMPLETED ok", rec, err)
			}
		})
	}
}

// TestStoreRetries injects one fault, then two, into each call of a
// store with the default three attempts: the store absorbs them, and a
// lost reply's resend is recognised by its token.
func TestStoreRetries(t *testing.T) {
	p := newPool(t)
	table := newTable(t, p)
	ctx := context.Background()
	for _, faults := range [][]fault{
		{faultLostReply}, {faultThrottle}, {faultTimeout}, {faultLostReply, faultLostReply}, {faultTimeout, faultLostReply},
	} {
		k := fmt.Sprint(faults)
		t.Run(k, func(t *testing.T) {
			claims := newStore(t, faultClient{Client: p, inject: script(t, "claim", faults...)}, pgstore.Options{Table: table})
			res, err := claims.Claim(ctx, claim(k, "fp", "tok", base))
			if err != nil || !res.Acquired {
				t.Fatalf("Claim: %+v, %v; want acquired", res, err)
			}
			completes := newStore(t, faultClient{Client: p, inject: script(t, "complete", faults...)}, pgstore.Options{Table: table})
			req := dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: dedupe.Result{StatusCode: 201}}
			if err := completes.Complete(ctx, req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			rec, err := claims.Get(ctx, k, base)
			if err != nil || rec.Status != dedupe.StatusCompleted {
				t.Errorf("Get: %+v, %v; want COMPLETED", rec, err)
			}
		})
	}
	t.Run("three faults", func(t *testing.T) {
		s := newStore(t, faultClient{Client: p, inject: script(t, "claim", faultThrottle, faultThrottle, faultThrottle)}, pgstore.Options{Table: table})
		if _, err := s.Claim(ctx, claim("three", "fp", "tok", base)); !errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("Claim after three faults: got %v, want ErrStoreUnavailable", err)
		}
	})
	t.Run("release resent after a lost reply", func(t *testing.T) {
		plain := newStore(t, p, pgstore.Options{Table: table})
		if _, err := plain.Claim(ctx, claim("release", "fp", "tok", base)); err != nil {
			t.Fatal(err)
		}
		ops := &counter{Client: faultClient{Client: p, inject: script(t, "Exec", faultLostReply)}}
		s := newStore(t, ops, pgstore.Options{Table: table})
		if err := s.Release(ctx, "release", "tok"); err != nil {
			t.Errorf("Release with a lost reply: got %v, want nil after the resend", err)
		}
		if got := ops.take(); len(got) != 2 {
			t.Errorf("release calls: got %v, want two", got)
		}
		if rec, err := plain.Get(ctx, "release", base); err != nil || !rec.LeaseExpired(base) {
			t.Errorf("Get after the release: %+v, %v; want the record with its lease ended", rec, err)
		}
	})
}

// TestGuardSurvivesLostCompletion runs a guarded call whose completion is
// applied but whose reply is lost: the guard retries the completion with
// the same token, and a duplicate is replayed, not run again.
func TestGuardSurvivesLostCompletion(t *testing.T) {
	p := newPool(t)
	s := newStore(t, faultClient{Client: p, inject: script(t, "complete", faultLostReply)}, pgstore.Options{Table: newTable(t, p)})
	g := dedupe.New(s, &dedupe.Config{Prefix: "fault-test", Now: func() time.Time { return base }})
	runs := 0
	fn := func(context.Context) (dedupe.Result, error) {
		runs++
		return dedupe.Result{StatusCode: 201, Body: []byte("charged")}, nil
	}
	ctx := context.Background()
	if _, err := g.Do(ctx, dedupe.Call{Key: "order-1", Fingerprint: "fp"}, fn); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	out, err := g.Do(ctx, dedupe.Call{Key: "order-1", Fingerprint: "fp"}, fn)
	if err != nil || !out.Replayed || string(out.Result.Body) != "charged" {
		t.Fatalf("duplicate Run: %+v, %v; want the replay", out, err)
	}
	if runs != 1 {
		t.Errorf("runs = %d, want 1", runs)
	}
}

// TestRealConnectionReset puts a TCP proxy between pgx and the server and
// breaks real connections: a lost reply after the claim was applied, and
// a server that refuses connections. The store resends the claim on a new
// connection and it is recognised by its token; with one attempt the
// reset surfaces as dedupe.ErrStoreUnavailable.
func TestRealConnectionReset(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	target := cfg.ConnConfig.Host + ":" + itoa(int(cfg.ConnConfig.Port))
	px, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(portOf(px.Addr()))
	cfg.ConnConfig.Fallbacks = nil
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	table := newTable(t, pool)
	s := newStore(t, pool, pgstore.Options{Table: table})
	once := newStore(t, pool, pgstore.Options{Table: table, Attempts: 1})
	// Open the connection first, so the lost reply is the claim's own.
	if _, err := s.Get(ctx, "warm-up", base); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatal(err)
	}
	px.LoseNextReply()
	res, err := s.Claim(ctx, claim("k", "fp", "tok", base))
	if err != nil || !res.Acquired {
		t.Fatalf("Claim through a reset: %+v, %v; want acquired on the resend", res, err)
	}
	if px.Lost() != 1 {
		t.Fatalf("replies lost = %d, want 1", px.Lost())
	}
	px.LoseNextReply()
	if _, err := once.Claim(ctx, claim("k2", "fp", "tok", base)); !errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Fatalf("Claim through a reset, one attempt: got %v, want ErrStoreUnavailable", err)
	}
	res, err = once.Claim(ctx, claim("k2", "fp", "tok", base.Add(time.Millisecond)))
	if err != nil || !res.Acquired {
		t.Fatalf("retried Claim: %+v, %v; want acquired by its own token", res, err)
	}
	px.Refuse(true)
	if _, err := s.Get(ctx, "k", base); !errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Errorf("Get from a refusing server: got %v, want ErrStoreUnavailable", err)
	}
	px.Refuse(false)
	if _, err := s.Get(ctx, "k", base); err != nil {
		t.Errorf("Get once the server is back: %v", err)
	}
}
