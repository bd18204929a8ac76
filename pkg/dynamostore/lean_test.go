package dynamostore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestLean: a Lean store writes no in-flight index entry, refuses Reap,
// and still lets the same request take a stranded record over after its
// lease (a different one gets the mismatch until the record expires).
func TestLean(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{Lean: true})
	ctx := context.Background()
	key := "lean-" + rand.Text()
	claim := func(token, fp string, now time.Time) (dedupe.ClaimResult, error) {
		return s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: fp, Token: token, Now: now,
			LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	}
	if res, err := claim("A", "fp", base); err != nil || !res.Acquired {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	if _, ok := r.rawItem(t, key)["inflight_shard"]; ok {
		t.Error("a Lean claim wrote inflight_shard")
	}
	if _, err := s.Reap(ctx, dynamostore.ReapOptions{}); !errors.Is(err, dynamostore.ErrInvalidOptions) {
		t.Errorf("Reap on a Lean store = %v, want ErrInvalidOptions", err)
	}
	later := base.Add(2 * time.Minute) // A died: its lease has run out
	if res, err := claim("C", "other-fp", later); err != nil || res.Acquired {
		t.Errorf("a different request took the stranded key: %+v, %v", res, err)
	}
	if res, err := claim("B", "fp", later); err != nil || !res.Acquired {
		t.Fatalf("takeover by a retry: %+v, %v; want acquired", res, err)
	}
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "B", Now: later, ExpiresAt: later.Add(time.Hour),
		Result: dedupe.Result{StatusCode: 200}}); err != nil {
		t.Fatal(err)
	}
	if res, err := claim("D", "fp", later.Add(2*time.Hour)); err != nil || !res.Acquired {
		t.Errorf("after expiry: %+v, %v; want a new life", res, err)
	}
	for _, opts := range []dynamostore.Options{{Lean: true, Shards: 4}, {Lean: true, Index: "inflight"}} {
		opts.Table = r.table
		if _, err := dynamostore.New(r.client, opts); !errors.Is(err, dynamostore.ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", opts, err)
		}
	}
}
