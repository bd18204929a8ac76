package redisstore_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// BenchmarkRedis measures one request three ways, side by side, against
// the test server:
//
//   - guard: dedupe.Guard.Do over the store (key scoping, fingerprint,
//     claim, the handler, completion);
//   - store: the store's calls alone (Claim, then Complete);
//   - raw: the floor, the plainest commands doing the same round trips
//     (SET NX PX, then SET XX; a replay is one GET).
//
// calls/op counts round trips per request. Compare ns/op across the rows.
func BenchmarkRedis(b *testing.B) {
	c := newClient(b)
	ctx := context.Background()
	counted := &counter{Client: c}
	s := newStore(b, counted, redisstore.Options{})
	warm := newStore(b, c, redisstore.Options{})
	g := dedupe.New(s, &dedupe.Config{Prefix: "bench", Now: func() time.Time { return base }})
	body := []byte(`{"id":"pay_1","amount":1250,"currency":"EUR","status":"succeeded"}`)
	fn := func(context.Context) (dedupe.Result, error) {
		return dedupe.Result{StatusCode: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: body}, nil
	}
	if _, err := warm.Claim(ctx, claim("warm", "fp", "tok", base)); err != nil {
		b.Fatal(err)
	}
	if err := warm.Complete(ctx, dedupe.CompleteRequest{Key: "warm", Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	calls := func(b *testing.B, n int) {
		b.ReportMetric(float64(len(counted.take()))/float64(n), "calls/op")
	}

	b.Run("guard/fresh", func(b *testing.B) {
		prefix, n := rand.Text(), 0
		counted.take()
		for b.Loop() {
			n++
			if _, err := g.Do(ctx, dedupe.Call{Key: prefix + strconv.Itoa(n), Fingerprint: "fp"}, fn); err != nil {
				b.Fatal(err)
			}
		}
		calls(b, n)
	})
	b.Run("guard/replay", func(b *testing.B) {
		k := rand.Text()
		if _, err := g.Do(ctx, dedupe.Call{Key: k, Fingerprint: "fp"}, fn); err != nil {
			b.Fatal(err)
		}
		n := 0
		counted.take()
		for b.Loop() {
			n++
			if out, err := g.Do(ctx, dedupe.Call{Key: k, Fingerprint: "fp"}, fn); err != nil || !out.Replayed {
				b.Fatalf("replay = %+v, %v", out, err)
			}
		}
		calls(b, n)
	})
	res, _ := fn(ctx)
	b.Run("store/fresh", func(b *testing.B) {
		prefix, n := rand.Text(), 0
		counted.take()
		for b.Loop() {
			n++
			k := prefix + strconv.Itoa(n)
			if _, err := s.Claim(ctx, claim(k, "fp", "tok", base)); err != nil {
				b.Fatal(err)
			}
			if err := s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: res}); err != nil {
				b.Fatal(err)
			}
		}
		calls(b, n)
	})
	b.Run("store/replay", func(b *testing.B) {
		k := rand.Text()
		s.Claim(ctx, claim(k, "fp", "tok", base))
		s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: res})
		n := 0
		counted.take()
		for b.Loop() {
			n++
			if r, err := s.Claim(ctx, claim(k, "fp", "tok-2", base)); err != nil || r.Acquired {
				b.Fatalf("claim = %+v, %v", r, err)
			}
		}
		calls(b, n)
	})
	b.Run("raw/fresh", func(b *testing.B) {
		prefix, n := "raw:"+rand.Text(), 0
		for b.Loop() {
			n++
			k := prefix + strconv.Itoa(n)
			if ok, err := c.SetNX(ctx, k, "IN_PROGRESS", time.Hour).Result(); err != nil || !ok {
				b.Fatal(ok, err)
			}
			if err := c.SetXX(ctx, k, body, time.Hour).Err(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(2, "calls/op")
	})
	b.Run("raw/replay", func(b *testing.B) {
		k := "raw:" + rand.Text()
		c.Set(ctx, k, body, time.Hour)
		for b.Loop() {
			if err := c.Get(ctx, k).Err(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(1, "calls/op")
	})
}
