package dedupetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// testExtend checks the optional dedupe.LeaseExtender; it passes with a
// note for a store that does not implement it.
func testExtend(t *testing.T, s dedupe.Store) {
	ext, ok := s.(dedupe.LeaseExtender)
	if !ok {
		t.Log("the store does not implement dedupe.LeaseExtender (optional): nothing to check")
		return
	}
	ctx := context.Background()
	extend := func(k, tok string, now time.Time, until time.Duration) error {
		return ext.Extend(ctx, dedupe.ExtendRequest{Key: k, Token: tok, Now: now,
			LeaseUntil: now.Add(until), ExpiresAt: now.Add(until + time.Hour)})
	}

	k := key(t)
	if _, err := s.Claim(ctx, claimReq(k, "tok-a", base, time.Minute)); err != nil {
		t.Fatal(err)
	}
	at := base.Add(30 * time.Second)
	if err := extend(k, "tok-a", at, 2*time.Minute); err != nil {
		t.Fatalf("owner's Extend = %v, want nil", err)
	}
	rec, err := s.Get(ctx, k, at)
	if err != nil || rec.LeaseExpiresAt.UnixMilli() != at.Add(2*time.Minute).UnixMilli() ||
		rec.ExpiresAt.Unix() != at.Add(2*time.Minute+time.Hour).Unix() || rec.Status != dedupe.StatusInProgress {
		t.Fatalf("after Extend: %+v, %v; want the new lease and expiry, still in progress", rec, err)
	}
	// Past the claim's lease, inside the renewed one: still held.
	if res, err := s.Claim(ctx, claimReq(k, "tok-b", base.Add(90*time.Second), time.Minute)); err != nil || res.Acquired {
		t.Errorf("claim inside the renewed lease = %+v, %v; want held", res.Acquired, err)
	}
	if err := extend(k, "tok-b", at, time.Minute); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Extend by another token = %v, want ErrLeaseLost", err)
	}
	if err := extend(k, "tok-a", base.Add(3*time.Minute), time.Minute); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Extend after the lease ran out = %v, want ErrLeaseLost", err)
	}

	released := key(t)
	s.Claim(ctx, claimReq(released, "tok-a", base, time.Minute))
	if err := s.Release(ctx, released, "tok-a"); err != nil {
		t.Fatal(err)
	}
	if err := extend(released, "tok-a", base.Add(time.Second), time.Minute); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Extend after Release = %v, want ErrLeaseLost", err)
	}

	done := key(t)
	s.Claim(ctx, claimReq(done, "tok-a", base, time.Minute))
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: done, Token: "tok-a", Now: base, ExpiresAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := extend(done, "tok-a", base.Add(time.Second), time.Minute); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Extend after Complete = %v, want ErrLeaseLost", err)
	}
	if err := extend(key(t), "tok-a", base, time.Minute); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Extend of a missing key = %v, want ErrLeaseLost", err)
	}
}
