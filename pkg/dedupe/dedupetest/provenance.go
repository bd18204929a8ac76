package dedupetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// testProvenance checks that a record names the execution it belongs to:
// the claim's request ID and trace while in flight, the completing
// execution's once completed, on Get and on a duplicate's Claim alike.
func testProvenance(t *testing.T, s dedupe.Store) {
	ctx := context.Background()
	k := key(t)
	req := claimReq(k, "tok-a", base, 30*time.Second)
	req.RequestID, req.Trace = "req-claim", "Root=1-00000000-000000000000000000000001;Sampled=1"
	mustClaim(t, s, req, true)
	got, err := s.Get(ctx, k, base)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.RequestID != req.RequestID || got.Trace != req.Trace {
		t.Errorf("in flight: RequestID, Trace = %q, %q; want %q, %q", got.RequestID, got.Trace, req.RequestID, req.Trace)
	}
	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	err = s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok-a", Result: sampleResult(),
		Now: base.Add(time.Second), ExpiresAt: base.Add(time.Hour), RequestID: "req-done", Trace: trace})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	dup := mustClaim(t, s, claimReq(k, "tok-b", base.Add(2*time.Second), 30*time.Second), false)
	got, err = s.Get(ctx, k, base.Add(2*time.Second))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	for name, rec := range map[string]dedupe.Record{"Claim": dup, "Get": got} {
		if rec.RequestID != "req-done" || rec.Trace != trace {
			t.Errorf("completed, %s: RequestID, Trace = %q, %q; want %q, %q", name, rec.RequestID, rec.Trace, "req-done", trace)
		}
	}
	// A record written without them reads with them empty.
	k2 := key(t) + "/none"
	mustClaim(t, s, claimReq(k2, "tok-c", base, 30*time.Second), true)
	if err := complete(s, k2, "tok-c", base.Add(time.Second), sampleResult()); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got, err := s.Get(ctx, k2, base.Add(time.Second)); err != nil || got.RequestID != "" || got.Trace != "" {
		t.Errorf("Get without provenance = %q, %q, %v; want empty", got.RequestID, got.Trace, err)
	}
}

// collidingKeys are two keys whose KeyRefs are equal (key:7a743c048cb0):
// a collision of 48-bit references, found with Pollard's rho in about
// 2^25 SHA-256 computations (ten seconds on one core), as anyone could
// plant one.
var collidingKeys = [2]string{"collide/297653359cfa", "collide/34d17601cd45"}

// RunAdmin checks a store's dedupe.Admin: FindRef finds a record from its
// KeyRef in flight and completed, and every record that shares a
// colliding ref; InFlight lists what is in flight (or refuses with
// errors.ErrUnsupported, as dedupe.Admin allows); ReleaseSeen releases
// only the record as it was read; and Forget is fenced by the owner
// token. newStore is called once per case, as in Run; stores may share a
// backend, but InFlight is only checked for the records the case wrote.
func RunAdmin(t *testing.T, newStore func(t *testing.T) dedupe.Store) {
	t.Helper()
	t.Run("FindRefCollision", func(t *testing.T) {
		s := newStore(t)
		a := asAdmin(t, s)
		ctx := context.Background()
		ref := dedupe.KeyRef(collidingKeys[0])
		if dedupe.KeyRef(collidingKeys[1]) != ref || collidingKeys[0] == collidingKeys[1] {
			t.Fatalf("the keys do not collide")
		}
		// The keys are fixed: clear what an earlier run on a shared
		// backend left.
		now := base.Add(3000 * time.Hour)
		forgetAll := func() {
			recs, _ := a.FindRef(ctx, ref, now)
			for _, r := range recs {
				_ = a.Forget(ctx, r.Key, r.Token)
			}
		}
		forgetAll()
		t.Cleanup(forgetAll)
		mustClaim(t, s, claimReq(collidingKeys[0], "tok-alice", now, 30*time.Second), true)
		if err := complete(s, collidingKeys[0], "tok-alice", now.Add(time.Second), sampleResult()); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		// The later claim of the colliding key must not hide the first.
		mustClaim(t, s, claimReq(collidingKeys[1], "tok-mallory", now.Add(2*time.Second), 30*time.Second), true)
		recs, err := a.FindRef(ctx, ref, now.Add(2*time.Second))
		got := map[string]string{}
		for _, r := range recs {
			got[r.Key] = r.Token
		}
		if err != nil || len(recs) != 2 || got[collidingKeys[0]] != "tok-alice" || got[collidingKeys[1]] != "tok-mallory" {
			t.Errorf("FindRef of a colliding ref = %v, %v; want both records, each with its own key and token", got, err)
		}
	})
	t.Run("ReleaseSeenIsFenced", func(t *testing.T) {
		s := newStore(t)
		a := asAdmin(t, s)
		ctx := context.Background()
		k := key(t)
		mustClaim(t, s, claimReq(k, "tok-a", base, 30*time.Second), true)
		seen, err := s.Get(ctx, k, base)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if ext, ok := s.(dedupe.LeaseExtender); ok {
			// A heartbeat after the read moves the lease: refused.
			if err := ext.Extend(ctx, dedupe.ExtendRequest{Key: k, Token: "tok-a", Now: base.Add(time.Second),
				LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			if err := a.ReleaseSeen(ctx, seen); !errors.Is(err, dedupe.ErrLeaseLost) {
				t.Errorf("ReleaseSeen after a heartbeat = %v, want ErrLeaseLost", err)
			}
			if seen, err = s.Get(ctx, k, base.Add(time.Second)); err != nil {
				t.Fatalf("Get: %v", err)
			}
		}
		other := seen
		other.Token = "tok-other"
		if err := a.ReleaseSeen(ctx, other); !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Errorf("ReleaseSeen with another token = %v, want ErrLeaseLost", err)
		}
		if err := a.ReleaseSeen(ctx, seen); err != nil {
			t.Fatalf("ReleaseSeen: %v", err)
		}
		released, err := s.Get(ctx, k, base.Add(time.Second))
		if err != nil || released.LeaseExpiresAt.UnixMilli() != 0 || released.Token != "tok-a" || released.Fingerprint != seen.Fingerprint {
			t.Fatalf("after ReleaseSeen = %+v, %v; want the record kept, its lease ended", released, err)
		}
		// The guard's own release keeps the token: a second release,
		// of the record seen before or of the released one, is refused.
		if err := a.ReleaseSeen(ctx, seen); !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Errorf("ReleaseSeen of the record seen before the release = %v, want ErrLeaseLost", err)
		}
		if err := a.ReleaseSeen(ctx, released); !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Errorf("ReleaseSeen of a released record = %v, want ErrLeaseLost", err)
		}
		// A completed record has no lease to release.
		k2 := key(t) + "/done"
		mustClaim(t, s, claimReq(k2, "tok-b", base, 30*time.Second), true)
		done, _ := s.Get(ctx, k2, base)
		if err := complete(s, k2, "tok-b", base.Add(time.Second), sampleResult()); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if err := a.ReleaseSeen(ctx, done); !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Errorf("ReleaseSeen of a completed record = %v, want ErrLeaseLost", err)
		}
	})
	t.Run("FindRefInFlightAndCompleted", func(t *testing.T) {
		s := newStore(t)
		a := asAdmin(t, s)
		ctx := context.Background()
		k := key(t)
		req := claimReq(k, "tok-a", base, 30*time.Second)
		req.RequestID = "req-a"
		mustClaim(t, s, req, true)
		recs, err := a.FindRef(ctx, dedupe.KeyRef(k), base)
		if err != nil || len(recs) != 1 || recs[0].Key != k || recs[0].Status != dedupe.StatusInProgress || recs[0].RequestID != "req-a" {
			t.Fatalf("FindRef in flight = %+v, %v; want the one IN_PROGRESS record", recs, err)
		}
		if err := complete(s, k, "tok-a", base.Add(time.Second), sampleResult()); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		recs, err = a.FindRef(ctx, dedupe.KeyRef(k), base.Add(time.Second))
		if err != nil || len(recs) != 1 || recs[0].Key != k || recs[0].Status != dedupe.StatusCompleted {
			t.Fatalf("FindRef completed = %+v, %v; want the one COMPLETED record", recs, err)
		}
		if recs, err := a.FindRef(ctx, dedupe.KeyRef(k+"/other"), base); err != nil || len(recs) != 0 {
			t.Errorf("FindRef of an unknown ref = %+v, %v; want none", recs, err)
		}
		if recs, err := a.FindRef(ctx, dedupe.KeyRef(k), base.Add(2*time.Hour)); err != nil || len(recs) != 0 {
			t.Errorf("FindRef after expiry = %+v, %v; want none", recs, err)
		}
	})
	t.Run("InFlight", func(t *testing.T) {
		s := newStore(t)
		a := asAdmin(t, s)
		ctx := context.Background()
		// Far from base, so that records of other cases sharing the
		// backend are expired and not listed.
		now := base.Add(1000 * time.Hour)
		k1, k2, k3 := key(t)+"/1", key(t)+"/2", key(t)+"/3"
		mustClaim(t, s, claimReq(k1, "tok-1", now, 30*time.Second), true)
		mustClaim(t, s, claimReq(k2, "tok-2", now, 30*time.Second), true)
		mustClaim(t, s, claimReq(k3, "tok-3", now, 30*time.Second), true)
		if err := complete(s, k3, "tok-3", now, sampleResult()); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		later := now.Add(time.Minute) // both leases have run out: stranded
		recs, truncated, err := a.InFlight(ctx, later, 100)
		if errors.Is(err, errors.ErrUnsupported) {
			// The contract's refusal (a store mode without an in-flight
			// index): loud, never an empty answer.
			if len(recs) != 0 || truncated {
				t.Errorf("InFlight refused with %d records, truncated %v: want none", len(recs), truncated)
			}
			t.Logf("InFlight refused: %v", err)
			return
		}
		if err != nil {
			t.Fatalf("InFlight: %v", err)
		}
		seen := map[string]bool{}
		for _, r := range recs {
			seen[r.Key] = true
			if r.Key == k1 && (!r.Stranded(later) || r.Token != "tok-1") {
				t.Errorf("InFlight record %+v: want stranded, token tok-1", r)
			}
		}
		if !seen[k1] || !seen[k2] || seen[k3] || truncated {
			t.Errorf("InFlight = %d records (truncated %v): k1 %v, k2 %v, k3 %v; want k1 and k2, not the completed k3",
				len(recs), truncated, seen[k1], seen[k2], seen[k3])
		}
		if recs, truncated, err := a.InFlight(ctx, later, 1); err != nil || len(recs) != 1 || !truncated {
			t.Errorf("InFlight(limit 1) = %d records, truncated %v, %v; want 1, true", len(recs), truncated, err)
		}
	})
	t.Run("ForgetIsFenced", func(t *testing.T) {
		s := newStore(t)
		a := asAdmin(t, s)
		ctx := context.Background()
		k := key(t)
		mustClaim(t, s, claimReq(k, "tok-a", base, 30*time.Second), true)
		if err := complete(s, k, "tok-a", base.Add(time.Second), sampleResult()); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if err := a.Forget(ctx, k, "tok-other"); !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Fatalf("Forget with another token = %v, want ErrLeaseLost", err)
		}
		if _, err := s.Get(ctx, k, base.Add(time.Second)); err != nil {
			t.Fatalf("Get after a refused Forget: %v", err)
		}
		if err := a.Forget(ctx, k, "tok-a"); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		if _, err := s.Get(ctx, k, base.Add(time.Second)); !errors.Is(err, dedupe.ErrNotFound) {
			t.Errorf("Get after Forget = %v, want ErrNotFound", err)
		}
		if err := a.Forget(ctx, k, "tok-a"); !errors.Is(err, dedupe.ErrNotFound) {
			t.Errorf("Forget again = %v, want ErrNotFound", err)
		}
		// The key runs again.
		mustClaim(t, s, claimReq(k, "tok-b", base.Add(2*time.Second), 30*time.Second), true)
	})
}

// asAdmin returns s as a dedupe.Admin, failing the test if it is none.
func asAdmin(t *testing.T, s dedupe.Store) dedupe.Admin {
	t.Helper()
	a, ok := s.(dedupe.Admin)
	if !ok {
		t.Fatalf("%T does not implement dedupe.Admin", s)
	}
	return a
}
