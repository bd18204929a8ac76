package dedupetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// ResultFault is what a store's reads of a result kept outside its
// records (dynamostore's LargeResults, in S3) meet, for
// RunExternalResults.
type ResultFault int

// The faults RunExternalResults asks for.
const (
	// ResultReadable lets the read through.
	ResultReadable ResultFault = iota
	// ResultUnreadableNow fails the read in a way a retry may cure: a
	// throttle, a timeout, a transfer cut mid-body.
	ResultUnreadableNow
	// ResultGone fails the read for good: the result is missing, or may
	// not be read.
	ResultGone
)

// ExternalResults configures RunExternalResults.
type ExternalResults struct {
	// NewStore returns a store that keeps every result of more than
	// Threshold bytes outside its record, and whose reads of such a
	// result meet, at the time of each read, the fault fault returns.
	NewStore func(t *testing.T, fault func() ResultFault) dedupe.Store
	// Threshold is the size, in bytes of body, above which the store
	// keeps a result outside its record.
	Threshold int
}

// RunExternalResults checks the part of the dedupe.Store contract that
// only a store keeping results outside its records exercises: a COMPLETED
// record whose result cannot be read is an answer. Claim and Get return
// the record, every field but Result as stored, with an error wrapping
// dedupe.ErrResultUnreadable (a retry may read it) or
// dedupe.ErrResultOmitted (never), and never dedupe.ErrStoreUnavailable,
// whatever the claim's fingerprint; a result kept in the record is not
// affected; once reads work again the result replays byte for byte.
//
// A store that keeps every result in its records (memstore, redisstore,
// pgstore) never returns either error, which Run checks.
func RunExternalResults(t *testing.T, cfg ExternalResults) {
	t.Helper()
	fault := ResultReadable
	s := cfg.NewStore(t, func() ResultFault { return fault })
	ctx := context.Background()
	big := dedupe.Result{StatusCode: 201, Headers: map[string][]string{"X-Latin1": {"caf\xe9"}}, Body: make([]byte, cfg.Threshold+1024)}
	rand.Read(big.Body)
	small := sampleResult()

	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, 30*time.Second), true)
	if err := complete(s, k, "tok-a", base.Add(time.Second), big); err != nil {
		t.Fatalf("Complete of a result of %d bytes: %v", len(big.Body), err)
	}
	inline := key(t) + "/inline"
	mustClaim(t, s, claimReq(inline, "tok-a", base, 30*time.Second), true)
	if err := complete(s, inline, "tok-a", base.Add(time.Second), small); err != nil {
		t.Fatalf("Complete of a small result: %v", err)
	}

	now := base.Add(2 * time.Second)
	for _, tt := range []struct {
		name  string
		fault ResultFault
		want  error
	}{
		{"unreadable now", ResultUnreadableNow, dedupe.ErrResultUnreadable},
		{"gone", ResultGone, dedupe.ErrResultOmitted},
	} {
		fault = tt.fault
		answer := func(what string, rec dedupe.Record, err error) {
			t.Helper()
			switch {
			case !errors.Is(err, tt.want) || errors.Is(err, dedupe.ErrStoreUnavailable):
				t.Errorf("%s, %s: error %v; want %v, never ErrStoreUnavailable", tt.name, what, err, tt.want)
			case rec.Key != k || rec.Status != dedupe.StatusCompleted || rec.Fingerprint != "fp-1" || rec.Token != "tok-a" ||
				rec.ExpiresAt.Unix() != base.Add(time.Second+time.Hour).Unix() || rec.Result != nil || rec.ResultOmitted:
				t.Errorf("%s, %s: record %+v; want the completed record as stored, without its Result", tt.name, what, rec)
			}
		}
		rec, err := s.Get(ctx, k, now)
		answer("Get", rec, err)
		res, err := s.Claim(ctx, claimReq(k, "tok-b", now, 30*time.Second))
		if res.Acquired {
			t.Errorf("%s: Claim acquired a completed key", tt.name)
		}
		answer("Claim", res.Record, err)
		other := claimReq(k, "tok-c", now, 30*time.Second)
		other.Fingerprint = "fp-other"
		res, err = s.Claim(ctx, other)
		if res.Acquired {
			t.Errorf("%s: Claim with another fingerprint acquired a completed key", tt.name)
		}
		answer("Claim with another fingerprint", res.Record, err)
		if got, err := s.Get(ctx, inline, now); err != nil || got.Result == nil || !equalResult(*got.Result, small) {
			t.Errorf("%s: Get of a result kept in its record = %+v, %v; want it, unaffected", tt.name, got, err)
		}
	}
	fault = ResultReadable
	rec, err := s.Get(ctx, k, now)
	if err != nil || rec.Result == nil || !bytes.Equal(rec.Result.Body, big.Body) || rec.Result.Headers["X-Latin1"][0] != "caf\xe9" {
		t.Errorf("Get once reads work again = %v; want the result byte for byte", err)
	}
}
