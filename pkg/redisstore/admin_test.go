package redisstore_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

func TestAdmin(t *testing.T) {
	c := newClient(t)
	dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store {
		return newStore(t, c, redisstore.Options{Prefix: "admintest:" + t.Name() + ":", RefIndex: true})
	})
}

// TestRefPointerLivesWithItsRecord: the pointer set's server expiry is
// never before the record's, whatever moves the record's: the claim, a
// heartbeat that extends the lease and the expiry, the completion with
// the retention. Before, the pointer kept the claim's first expiry, and
// show key:… said "no live record" of a record that was live and
// replaying.
func TestRefPointerLivesWithItsRecord(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := "reftest:" + rand.Text() + ":"
	s := newStore(t, c, redisstore.Options{Prefix: prefix, RefIndex: true})
	now := time.Now() // server expiries run on the server's clock
	key := "ptr/" + rand.Text()
	ref := dedupe.KeyRef(key)
	check := func(step string, at time.Time) {
		t.Helper()
		rec, err := c.PExpireTime(ctx, prefix+key).Result()
		if err != nil {
			t.Fatal(err)
		}
		ptr, err := c.PExpireTime(ctx, prefix+"\xffrefs:"+ref).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ptr < rec {
			t.Errorf("after %s: pointer expires at %v, before its record (%v)", step, ptr, rec)
		}
		if recs, err := s.FindRef(ctx, ref, at); err != nil || len(recs) != 1 || recs[0].Key != key {
			t.Errorf("after %s: FindRef = %+v, %v; want the record", step, recs, err)
		}
	}
	if res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok", Now: now,
		LeaseUntil: now.Add(30 * time.Second), ExpiresAt: now.Add(time.Minute)}); err != nil || !res.Acquired {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	check("the claim", now)
	if err := s.Extend(ctx, dedupe.ExtendRequest{Key: key, Token: "tok", Now: now.Add(time.Second),
		LeaseUntil: now.Add(5 * time.Minute), ExpiresAt: now.Add(10 * time.Minute)}); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	check("a heartbeat", now.Add(time.Second))
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok", Result: dedupe.Result{StatusCode: 201},
		Now: now.Add(2 * time.Second), ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	check("the completion", now.Add(2*time.Second))
	// Past the claim's first expiry, the completed record is still found.
	if recs, err := s.FindRef(ctx, ref, now.Add(time.Hour)); err != nil || len(recs) != 1 {
		t.Errorf("FindRef an hour later = %+v, %v; want the completed record", recs, err)
	}
}

// TestRefPointerOldFormat: a pointer written before pointer sets (one
// string per ref, naming one key) is still read, beside the set.
func TestRefPointerOldFormat(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := "reftest:" + rand.Text() + ":"
	old := newStore(t, c, redisstore.Options{Prefix: prefix}) // writes no pointer
	s := newStore(t, c, redisstore.Options{Prefix: prefix, RefIndex: true})
	now := time.Now()
	claim := func(st *redisstore.Store, key string) {
		t.Helper()
		if res, err := st.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok-" + key, Now: now,
			LeaseUntil: now.Add(30 * time.Second), ExpiresAt: now.Add(time.Hour)}); err != nil || !res.Acquired {
			t.Fatalf("Claim = %+v, %v", res, err)
		}
	}
	key := "old/" + rand.Text()
	ref := dedupe.KeyRef(key)
	claim(old, key)
	// What the previous version's pointRef wrote.
	if err := c.Set(ctx, prefix+"\xffref:"+ref, key, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.FindRef(ctx, ref, now); err != nil || len(recs) != 1 || recs[0].Key != key {
		t.Errorf("FindRef through an old pointer = %+v, %v; want the record", recs, err)
	}
	// Claimed again by a writer of this version (a new life after a
	// forget): in the set and the old pointer, listed once.
	if err := s.Forget(ctx, key, "tok-"+key); err != nil {
		t.Fatal(err)
	}
	claim(s, key)
	if recs, err := s.FindRef(ctx, ref, now); err != nil || len(recs) != 1 {
		t.Errorf("FindRef through both pointers = %d records, %v; want 1", len(recs), err)
	}
	// InFlight never takes a pointer for a record.
	recs, _, err := s.InFlight(ctx, now, 100)
	if err != nil || len(recs) != 1 || recs[0].Key != key {
		t.Errorf("InFlight = %+v, %v; want the one record", recs, err)
	}
}
