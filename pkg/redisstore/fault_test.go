package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/localtest/faultproxy"
	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// script returns an injector that applies faults in order to the calls
// named op, and faultNone to everything else and afterwards.
func script(op string, faults ...fault) func(string) fault {
	var mu sync.Mutex
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

// TestDriverFaults injects each fault into each script call and checks
// the error the store returns, what the server holds afterwards, and
// that a retry with the same token (what a client library or the guard
// sends) is recognised.
func TestDriverFaults(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	warmScripts(t, c)
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
			prefix := "fault:" + rand.Text() + ":"
			plain := newStore(t, c, redisstore.Options{Prefix: prefix})
			s := newStore(t, faultClient{Client: c, inject: script("EvalSha", tt.f)}, redisstore.Options{Prefix: prefix})
			_, err := s.Claim(ctx, claim("k", "fp", "tok", base))
			if !errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Fatalf("faulted Claim: got %v, want ErrStoreUnavailable", err)
			}
			rec, err := plain.Get(ctx, "k", base)
			if tt.applied != (err == nil) {
				t.Fatalf("after the fault Get = %+v, %v; want applied %v", rec, err, tt.applied)
			}
			// The same call again (a client library's retry): acquired,
			// whether or not the first attempt was applied.
			res, err := s.Claim(ctx, claim("k", "fp", "tok", base.Add(10*time.Millisecond)))
			if err != nil || !res.Acquired || res.Record.Token != "tok" {
				t.Fatalf("retried Claim: got %+v, %v; want acquired by tok", res, err)
			}
			// Anyone else is still held off.
			if res, err := plain.Claim(ctx, claim("k", "fp", "tok-2", base.Add(time.Second))); err != nil || res.Acquired {
				t.Errorf("other Claim: got %+v, %v; want held", res, err)
			}
		})
		t.Run("complete/"+tt.name, func(t *testing.T) {
			prefix := "fault:" + rand.Text() + ":"
			plain := newStore(t, c, redisstore.Options{Prefix: prefix})
			s := newStore(t, faultClient{Client: c, inject: script("EvalSha", faultNone, tt.f)}, redisstore.Options{Prefix: prefix})
			if _, err := s.Claim(ctx, claim("k", "fp", "tok", base)); err != nil {
				t.Fatal(err)
			}
			req := dedupe.CompleteRequest{Key: "k", Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: dedupe.Result{StatusCode: 201, Body: []byte("ok")}}
			if err := s.Complete(ctx, req); !errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Fatalf("faulted Complete: got %v, want ErrStoreUnavailable", err)
			}
			rec, _ := plain.Get(ctx, "k", base)
			if got := rec.Status == dedupe.StatusCompleted; got != tt.applied {
				t.Fatalf("after the fault: record %+v, want completed %v", rec, tt.applied)
			}
			if err := s.Complete(ctx, req); err != nil {
				t.Fatalf("retried Complete: %v", err)
			}
			rec, err := plain.Get(ctx, "k", base)
			if err != nil || rec.Status != dedupe.StatusCompleted || string(rec.Result.Body) != "ok" {
				t.Errorf("after the retry: %+v, %v; want COMPLETED ok", rec, err)
			}
		})
		t.Run("get/"+tt.name, func(t *testing.T) {
			s := newStore(t, faultClient{Client: c, inject: script("HGetAll", tt.f)}, redisstore.Options{})
			if _, err := s.Get(ctx, "k", base); !errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Errorf("faulted Get: got %v, want ErrStoreUnavailable", err)
			}
		})
	}
}

// warmScripts runs every script once, so that the server has them cached
// and the calls faults are injected into are EVALSHAs that succeed.
func warmScripts(t *testing.T, c redisstore.Client) {
	t.Helper()
	ctx := context.Background()
	s := newStore(t, c, redisstore.Options{})
	if _, err := s.Claim(ctx, claim("warm", "fp", "tok", base)); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "warm", "tok"); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: "warm", Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// TestGuardSurvivesLostCompletion runs a guarded call whose completion is
// applied but whose reply is lost: the guard retries the completion with
// the same token, and a duplicate is replayed, not run again.
func TestGuardSurvivesLostCompletion(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	warmScripts(t, c)
	s := newStore(t, faultClient{Client: c, inject: script("EvalSha", faultNone, faultLostReply)}, redisstore.Options{})
	g := dedupe.New(s, &dedupe.Config{Prefix: "fault-test", Now: func() time.Time { return base }})
	runs := 0
	fn := func(context.Context) (dedupe.Result, error) {
		runs++
		return dedupe.Result{StatusCode: 201, Body: []byte("charged")}, nil
	}
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

// TestRealConnectionReset puts a TCP proxy between go-redis and the
// server, and loses the reply to a claim after the server applied it.
// go-redis resends the script on a new connection (MaxRetries), and the
// store recognises the claim by its token: one call, acquired.
func TestRealConnectionReset(t *testing.T) {
	opts, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(opts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	opts.Addr = p.Addr()
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	s := newStore(t, c, redisstore.Options{})
	// Load the script first, so the lost reply is the claim's own.
	if _, err := s.Get(ctx, "warm-up", base); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, claim("warm-up", "fp", "tok-0", base)); err != nil {
		t.Fatal(err)
	}

	p.LoseNextReply()
	res, err := s.Claim(ctx, claim("k", "fp", "tok", base))
	if err != nil || !res.Acquired {
		t.Fatalf("Claim through a reset: %+v, %v; want acquired after the client's retry", res, err)
	}
	if p.Lost() != 1 {
		t.Fatalf("replies lost = %d, want 1", p.Lost())
	}
	// With retries off, the reset surfaces as ErrStoreUnavailable.
	opts.MaxRetries = -1
	c2 := redis.NewClient(opts)
	defer c2.Close()
	s2 := newStore(t, c2, redisstore.Options{})
	if _, err := s2.Get(ctx, "warm-up", base); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatal(err)
	}
	p.LoseNextReply()
	if _, err := s2.Get(ctx, "k", base); !errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Errorf("Get through a reset without retries: got %v, want ErrStoreUnavailable", err)
	}
	// A server that refuses connections is unavailable too.
	p.Refuse(true)
	if _, err := s2.Get(ctx, "k", base); !errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Errorf("Get from a refusing server: got %v, want ErrStoreUnavailable", err)
	}
}
