package dedupe_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// BenchmarkGuard measures the guard's own overhead per request over the
// in-memory store: a fresh key (claim, run, complete) and a replay.
func BenchmarkGuard(b *testing.B) {
	ctx := context.Background()
	body := []byte(`{"id":"pay_1","amount":1000,"currency":"EUR","status":"succeeded"}`)
	fn := func(context.Context) (dedupe.Result, error) {
		return dedupe.Result{StatusCode: 201, Body: body}, nil
	}
	b.Run("fresh", func(b *testing.B) {
		g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "bench"})
		keys := make([]string, b.N)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := g.Do(ctx, dedupe.Call{Key: keys[i], Fingerprint: "fp"}, fn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "bench"})
		if _, err := g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, fn); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			out, err := g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, fn)
			if err != nil || !out.Replayed {
				b.Fatalf("got %+v, %v; want a replay", out, err)
			}
		}
	})
}
