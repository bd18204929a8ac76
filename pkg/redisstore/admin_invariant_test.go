package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// TestInFlightAsksWhetherItScansOneClusterNode: through a client of one
// server, InFlight first asks the server whether it is a Cluster node
// (INFO cluster), since a SCAN there would list that node's records only.
// When the server does not answer, InFlight fails with
// dedupe.ErrStoreUnavailable rather than scan what may be one node of
// many; when the server refuses the question (INFO denied), there is no
// answer to wait for, and InFlight scans.
func TestInFlightAsksWhetherItScansOneClusterNode(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := "inflightask:" + rand.Text() + ":"
	now := time.Now()
	s := newStore(t, c, redisstore.Options{Prefix: prefix})
	if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: "k", Fingerprint: "fp", Token: "tok",
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		infoErr error
		want    error // nil: the record listed
	}{
		{"INFO unanswered", errRefused, dedupe.ErrStoreUnavailable},
		{"INFO denied", errNoPerm, nil},
		{"INFO answered", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// New's own INFO cluster (a wrapper may hide a Cluster)
			// ignores a failure; its policy read passes through.
			w := newStore(t, inspectFaults{Client: c, infoErr: tt.infoErr}, redisstore.Options{Prefix: prefix})
			recs, _, err := w.InFlight(ctx, now, 10)
			switch {
			case tt.want != nil && (!errors.Is(err, tt.want) || len(recs) != 0):
				t.Errorf("InFlight = %d records, %v; want none, an error wrapping %v", len(recs), err, tt.want)
			case tt.want == nil && (err != nil || len(recs) != 1):
				t.Errorf("InFlight = %d records, %v; want the one record", len(recs), err)
			}
		})
	}
}

// TestInFlightTruncatedOnlyBeyondLimit: InFlight reports truncated only
// when more records are in flight than the limit lets it list. Exactly
// limit records are listed in full, not truncated; one more is
// truncated, with limit records listed.
func TestInFlightTruncatedOnlyBeyondLimit(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	s := newStore(t, c, redisstore.Options{Prefix: "inflightlimit:" + rand.Text() + ":"})
	now := time.Now()
	for i := range 3 {
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: fmt.Sprintf("k%d", i), Fingerprint: "fp", Token: "tok",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
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
	}
}
