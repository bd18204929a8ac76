package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestAdmin runs the operator's contract on the template's table, whose
// ref index FindRef queries.
func TestAdmin(t *testing.T) {
	r := newRig(t)
	dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store { return r.store(t, dynamostore.Options{}) })
}

// TestReapRefusesShardMismatch: writers on 4 shards, a reaper on 16. The
// reaper finds records in shards 0 to 3 whose keys its own count would
// file elsewhere, and reports errors wrapping ErrShardMismatch instead of
// looking healthy. (The check cannot see a reaper whose count divides the
// writers', 4 against 16: the low shards agree, the others go unread. The
// template's infra test covers the deployed pair.)
func TestReapRefusesShardMismatch(t *testing.T) {
	r := newRig(t)
	writer := r.store(t, dynamostore.Options{Shards: 4})
	seedInFlight(t, writer, stranded{prefix: "mismatch", n: 40, claimed: 10 * time.Minute, lease: time.Minute})
	reaper, err := dynamostore.New(r.client, dynamostore.Options{Table: r.table, Shards: 16})
	if err != nil {
		t.Fatal(err)
	}
	report, err := reaper.Reap(context.Background(), dynamostore.ReapOptions{Now: func() time.Time { return base }})
	if !errors.Is(err, dynamostore.ErrShardMismatch) || report.Errors == 0 {
		t.Errorf("Reap = %+v, %v; want errors wrapping ErrShardMismatch", report, err)
	}
}
