package dynamostore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// BenchmarkGuardDynalite measures a guarded request against the test
// endpoint and reports the DynamoDB calls it makes (calls/op), counted by
// the SDK middleware.
func BenchmarkGuardDynalite(b *testing.B) {
	r := newRig(b)
	s := r.store(b, dynamostore.Options{})
	g := dedupe.New(s, &dedupe.Config{Prefix: "bench", Now: func() time.Time { return base }})
	ctx := context.Background()
	fn := func(context.Context) (dedupe.Result, error) {
		return dedupe.Result{StatusCode: 201, Body: []byte(`{"id":"pay_1"}`)}, nil
	}
	b.Run("fresh", func(b *testing.B) {
		prefix := rand.Text()
		r.calls.reset()
		i := 0
		for b.Loop() {
			i++
			if _, err := g.Do(ctx, dedupe.Call{Key: prefix + strconv.Itoa(i), Fingerprint: "fp"}, fn); err != nil {
				b.Fatal(err)
			}
		}
		ops, _ := r.calls.snapshot()
		b.ReportMetric(float64(len(ops))/float64(i), "calls/op")
	})
	b.Run("replay", func(b *testing.B) {
		key := rand.Text()
		if _, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, fn); err != nil {
			b.Fatal(err)
		}
		r.calls.reset()
		i := 0
		for b.Loop() {
			i++
			out, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, fn)
			if err != nil || !out.Replayed {
				b.Fatalf("replay = %+v, %v", out, err)
			}
		}
		ops, _ := r.calls.snapshot()
		b.ReportMetric(float64(len(ops))/float64(i), "calls/op")
	})
}

// reapSizes are the numbers of completed records BenchmarkReap seeds.
// Seeding 100,000 into dynalite takes about 20 seconds (8 writers,
// BatchWriteItem), so with -short (make test's run of every benchmark,
// once) it seeds the first size only.
func reapSizes() []int {
	if testing.Short() {
		return []int{1_000}
	}
	return []int{1_000, 100_000}
}

// BenchmarkReap shows that a reap's cost follows what is stranded, not the
// table: for each table size it seeds the completed records once, then per
// iteration strands 10 records (untimed) and reaps them. It reports the
// index items read per run (read from the Query counts) and fails if a run
// reads more than the stranded items. Compare ns/op across the sizes.
func BenchmarkReap(b *testing.B) {
	const strandedPerRun = 10
	for _, n := range reapSizes() {
		b.Run(fmt.Sprintf("completed=%d", n), func(b *testing.B) {
			r := newRig(b)
			s := r.store(b, dynamostore.Options{})
			start := time.Now()
			seedCompleted(b, r.client, r.table, n, 0)
			b.Logf("seeded %d completed records in %v", n, time.Since(start).Round(time.Millisecond))
			opts := dynamostore.ReapOptions{Now: func() time.Time { return base }}
			var read, pages, runs int
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				seedInFlight(b, s, stranded{prefix: "bench", n: strandedPerRun, claimed: 10 * time.Minute, lease: time.Minute})
				b.StartTimer()
				report, err := s.Reap(context.Background(), opts)
				if err != nil {
					b.Fatal(err)
				}
				if report.Cleared != strandedPerRun || report.ItemsRead > strandedPerRun {
					b.Fatalf("report %+v: want %d cleared and at most %d items read", report, strandedPerRun, strandedPerRun)
				}
				if report.Pages > dynamostore.DefaultShards {
					b.Fatalf("report %+v: want one page per shard", report)
				}
				read += report.ItemsRead
				pages += report.Pages
				runs++
			}
			b.ReportMetric(float64(read)/float64(runs), "items-read/op")
			b.ReportMetric(float64(pages)/float64(runs), "pages/op")
		})
	}
}
