package dynamostore_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// BenchmarkClaim measures Store.Claim alone against the test endpoint, in
// its three shapes: a fresh key (a new life), a duplicate of a held key,
// and a takeover of a stranded record by the same request (which keeps
// the record's life, FirstToken). It reports the DynamoDB calls per claim
// (calls/op).
func BenchmarkClaim(b *testing.B) {
	r := newRig(b)
	s := r.store(b, dynamostore.Options{})
	ctx := context.Background()
	req := func(k, tok string, now time.Time) dedupe.ClaimRequest {
		return dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: tok, Now: now,
			LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
	}
	run := func(b *testing.B, setup func(k string), claim func(i int, k string) dedupe.ClaimRequest, acquired bool) {
		prefix := rand.Text()
		i, calls := 0, 0
		for b.Loop() {
			b.StopTimer()
			k := prefix + strconv.Itoa(i)
			if setup != nil {
				setup(k)
			}
			r.calls.reset()
			b.StartTimer()
			res, err := s.Claim(ctx, claim(i, k))
			b.StopTimer()
			if err != nil || res.Acquired != acquired {
				b.Fatalf("claim = %+v, %v; want acquired %v", res, err, acquired)
			}
			ops, _ := r.calls.snapshot()
			calls += len(ops)
			i++
			b.StartTimer()
		}
		b.ReportMetric(float64(calls)/float64(i), "calls/op")
	}
	held := func(k string) {
		if res, err := s.Claim(ctx, req(k, "tok-a", base)); err != nil || !res.Acquired {
			b.Fatalf("setup claim = %+v, %v", res, err)
		}
	}
	b.Run("fresh", func(b *testing.B) {
		run(b, nil, func(i int, k string) dedupe.ClaimRequest { return req(k, "tok-a", base) }, true)
	})
	b.Run("duplicate", func(b *testing.B) {
		run(b, held, func(i int, k string) dedupe.ClaimRequest { return req(k, "tok-b", base) }, false)
	})
	b.Run("takeover", func(b *testing.B) {
		run(b, held, func(i int, k string) dedupe.ClaimRequest { return req(k, "tok-b", base.Add(2*time.Minute)) }, true)
	})
}
