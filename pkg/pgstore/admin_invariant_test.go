package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// TestInFlightTruncatedOnlyBeyondLimit: InFlight reports truncated only
// when more records are in flight than the limit lets it list. Exactly
// limit records are listed in full, not truncated; one more is
// truncated, with limit records listed.
func TestInFlightTruncatedOnlyBeyondLimit(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	s := newStore(t, p, pgstore.Options{})
	for i := range 3 {
		if _, err := s.Claim(ctx, claim(fmt.Sprintf("k%d", i), "fp", "tok", base)); err != nil {
			t.Fatal(err)
		}
	}
	now := base.Add(time.Second)
	for _, tt := range []struct {
		limit, want int
		truncated   bool
	}{
		{4, 3, false},
		{3, 3, false},
		{2, 2, true},
	} {
		recs, truncated, err := s.InFlight(ctx, now, tt.limit)
		if err != nil || len(recs) != tt.want || truncated != tt.truncated {
			t.Errorf("InFlight(limit %d) with 3 in flight = %d records, truncated %v, %v; want %d, truncated %v",
				tt.limit, len(recs), truncated, err, tt.want, tt.truncated)
		}
		for _, r := range recs {
			if r.Status != dedupe.StatusInProgress {
				t.Errorf("InFlight(limit %d) listed %+v, want IN_PROGRESS only", tt.limit, r)
			}
		}
	}
}
