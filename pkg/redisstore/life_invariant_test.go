package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// TestLastSecondIsLive: the store's scripts count a record live exactly
// as dedupe.Record.Expired does, to the second: at a now within the
// second of ExpiresAt (Expired false), the owner may still extend the
// lease and complete the record, and Get returns it.
func TestLastSecondIsLive(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newClient(t), redisstore.Options{})
	exp := base.Add(10 * time.Second) // base is a whole second
	last := exp.Add(500 * time.Millisecond)
	for _, tt := range []struct{ key string }{{"extend"}, {"complete"}} {
		if res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: tt.key, Fingerprint: "fp", Token: "tok", Now: base,
			LeaseUntil: exp.Add(time.Minute), ExpiresAt: exp}); err != nil || !res.Acquired {
			t.Fatalf("Claim = %+v, %v", res, err)
		}
		if rec, err := s.Get(ctx, tt.key, last); err != nil || rec.Expired(last) {
			t.Fatalf("Get in the last second = %+v, %v; want the live record", rec, err)
		}
	}
	if err := s.Extend(ctx, dedupe.ExtendRequest{Key: "extend", Token: "tok", Now: last,
		LeaseUntil: last.Add(time.Minute), ExpiresAt: last.Add(time.Hour)}); err != nil {
		t.Errorf("Extend in the record's last second: %v, want the lease extended", err)
	}
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: "complete", Token: "tok", Now: last,
		Result: dedupe.Result{StatusCode: 201}, ExpiresAt: last.Add(time.Hour)}); err != nil {
		t.Errorf("Complete in the record's last second: %v, want the record completed", err)
	}
	for _, k := range []string{"extend", "complete"} {
		if rec, err := s.Get(ctx, k, last.Add(time.Minute)); err != nil {
			t.Errorf("Get %s after the last second's write = %+v, %v; want the record, its expiry moved", k, rec, err)
		}
	}
}

// TestLeaseRunsToItsLastMillisecond: Extend counts a lease running
// exactly as dedupe.Record.LeaseExpired does, to the millisecond: at the
// lease's own end (LeaseExpired false) the owner still extends it; a
// millisecond later the lease has run out, and the renewal is refused.
func TestLeaseRunsToItsLastMillisecond(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newClient(t), redisstore.Options{})
	end := base.Add(30 * time.Second)
	for _, k := range []string{"at-end", "after-end"} {
		if res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: "tok", Now: base,
			LeaseUntil: end, ExpiresAt: base.Add(time.Hour)}); err != nil || !res.Acquired {
			t.Fatalf("Claim = %+v, %v", res, err)
		}
	}
	extend := func(k string, now time.Time) error {
		return s.Extend(ctx, dedupe.ExtendRequest{Key: k, Token: "tok", Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: base.Add(2 * time.Hour)})
	}
	if rec, _ := s.Get(ctx, "at-end", end); rec.LeaseExpired(end) {
		t.Fatalf("the lease has run out at its end: %+v", rec)
	}
	if err := extend("at-end", end); err != nil {
		t.Errorf("Extend at the lease's end: %v, want it extended", err)
	}
	if err := extend("after-end", end.Add(time.Millisecond)); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Extend a millisecond after the lease's end: %v, want ErrLeaseLost", err)
	}
}
