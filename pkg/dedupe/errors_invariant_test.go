package dedupe_test

import (
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestRetryAfterHintFallsBackToTheLease states RetryAfterHint's bound:
// when there is no typical duration (0), or the owner has run at least
// as long as typical, the hint is the lease's end (RetryAfter), whatever
// the record's CreatedAt says, even a CreatedAt ahead of this clock
// (another container's).
func TestRetryAfterHintFallsBackToTheLease(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	lease := now.Add(30 * time.Second)
	for _, tt := range []struct {
		name    string
		created time.Time
		typical time.Duration
	}{
		{"no typical, created ahead of this clock", now.Add(10 * time.Second), 0},
		{"no typical, created now", now, 0},
		{"ran exactly typical", now.Add(-4 * time.Second), 4 * time.Second},
		{"ran longer than typical", now.Add(-5 * time.Second), 4 * time.Second},
	} {
		c := &dedupe.ConflictError{Err: dedupe.ErrInProgress, Record: dedupe.Record{CreatedAt: tt.created, LeaseExpiresAt: lease}}
		if got, want := c.RetryAfterHint(now, tt.typical), c.RetryAfter(now); got != want || want != 30*time.Second {
			t.Errorf("%s: RetryAfterHint = %v, want the lease's end %v (30s)", tt.name, got, want)
		}
	}
}
