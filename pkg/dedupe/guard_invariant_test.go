package dedupe_test

import (
	"context"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// The tests in this file pin decisions of guard.go that mutation testing
// (make mutate PKG=./pkg/dedupe) found no test of the package noticing.

// ownClaimNotAcquired is a store that reports every claim it grants as
// not acquired, returning the record the claim wrote: what a store
// answers when an SDK retry of an applied conditional write fails its
// condition on the guard's own record and the store reads it back.
type ownClaimNotAcquired struct{ dedupe.Store }

func (s ownClaimNotAcquired) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, req)
	res.Acquired = false
	return res, err
}

// TestOwnClaimIsRecognized: a claim answered with the guard's own
// IN_PROGRESS record (its token) is the guard's, even from a store that
// says it was not acquired. The function runs once and its result is
// stored, rather than the guard claiming again until it gives up with a
// 409 for a record that is its own.
func TestOwnClaimIsRecognized(t *testing.T) {
	store := memstore.New()
	g := dedupe.New(ownClaimNotAcquired{store}, nil)
	runs := 0
	out, err := g.Run(context.Background(), "k", "fp", counter(&runs, "x"))
	if err != nil || runs != 1 || !out.Stored {
		t.Fatalf("got stored %v, %v after %d runs; want one stored run", out.Stored, err, runs)
	}
	// The record is complete: a retry through a conforming store replays.
	out, err = dedupe.New(store, nil).Run(context.Background(), "k", "fp", counter(&runs, "y"))
	if err != nil || !out.Replayed || string(out.Result.Body) != "x" || runs != 1 {
		t.Errorf("retry: got replayed %v %q, %v after %d runs; want the replay of x", out.Replayed, out.Result.Body, err, runs)
	}
}
