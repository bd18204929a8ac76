package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestNewLifeNamesItsExecution: a claim that starts a new life over an
// expired record (still stored: DynamoDB's TTL deletes lazily, and the
// claim rewrites the whole item) names its own execution, as every claim
// does: the request ID and trace an operator looks the record up by
// (dedupe show) are the new claim's, never the old life's, and a claim
// without them leaves none.
func TestNewLifeNamesItsExecution(t *testing.T) {
	for name, r := range rigs(t) {
		t.Run(name, func(t *testing.T) {
			s := r.store(t, dynamostore.Options{})
			ctx := context.Background()
			k := "newlife/" + name
			lives := []struct {
				token, requestID, trace string
			}{
				{"tok-1", "req-1", "Root=1-00000000-000000000000000000000001"},
				{"tok-2", "req-2", "Root=1-00000000-000000000000000000000002"},
				{"tok-3", "", ""},
			}
			for i, life := range lives {
				// Each claim comes two hours after the last, whose record
				// expired an hour after its claim.
				now := base.Add(time.Duration(i) * 2 * time.Hour)
				req := lifeClaim(k, life.token, now)
				req.RequestID, req.Trace = life.requestID, life.trace
				res, err := s.Claim(ctx, req)
				if err != nil || !res.Acquired {
					t.Fatalf("claim %d: %+v, %v; want acquired", i, res, err)
				}
				rec, err := s.Get(ctx, k, now)
				if err != nil || rec.Token != life.token || rec.FirstToken != life.token {
					t.Fatalf("Get after claim %d = %+v, %v; want a new life of %s", i, rec, err, life.token)
				}
				if rec.RequestID != life.requestID || rec.Trace != life.trace {
					t.Errorf("life %d: RequestID, Trace = %q, %q; want %q, %q", i, rec.RequestID, rec.Trace, life.requestID, life.trace)
				}
			}
		})
	}
}

// TestInFlightCostOnAQuietIndex pins InFlight's documented cost: one Query
// per partition of the in-flight index its records are filed under (each
// shard and its retired partition), after one per partition it probes for
// writers with more shards (shards Shards to 2*Shards-1, and theirs), and
// one GetItem per item listed. It never scans: on a quiet index that is
// 4*Shards Queries and nothing else, however many records are completed.
func TestInFlightCostOnAQuietIndex(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	seedCompleted(t, r.client, r.table, 50, 0)
	ctx := context.Background()
	count := func(ops []string, op string) int {
		return len(slices.DeleteFunc(slices.Clone(ops), func(o string) bool { return o != op }))
	}

	r.calls.reset()
	recs, truncated, err := s.InFlight(ctx, base, 100)
	if err != nil || truncated || len(recs) != 0 {
		t.Fatalf("InFlight = %d records, truncated %v, %v; want none", len(recs), truncated, err)
	}
	ops, _ := r.calls.snapshot()
	if want := 4 * dynamostore.DefaultShards; len(ops) != want || count(ops, "Query") != want {
		t.Errorf("calls = %v, want %d Queries", ops, want)
	}

	keys, _ := seedInFlight(t, s, stranded{prefix: "cost", n: 2, claimed: 0, lease: time.Minute})
	r.calls.reset()
	recs, _, err = s.InFlight(ctx, base, 100)
	if err != nil || len(recs) != len(keys) {
		t.Fatalf("InFlight = %d records, %v; want %d", len(recs), err, len(keys))
	}
	ops, _ = r.calls.snapshot()
	if q, g := count(ops, "Query"), count(ops, "GetItem"); q != 4*dynamostore.DefaultShards || g != len(keys) || len(ops) != q+g {
		t.Errorf("calls = %v, want %d Queries and %d GetItems", ops, 4*dynamostore.DefaultShards, len(keys))
	}
}

// TestInFlightShardMismatchNamesTheFiledShard: when InFlight refuses a
// record filed under a shard its key does not have with the store's
// count, the refusal tells the operator where the writers filed it, in
// their numbering: the shard, marked "(retired)" when the record is in
// that shard's retired partition (Reap retired it), never the raw
// partition number. Shard 0, whose retired partition is -1, is a shard
// like any other.
func TestInFlightShardMismatchNamesTheFiledShard(t *testing.T) {
	for _, tt := range []struct {
		name    string
		shard   int  // the writers' shard of the key (of 4)
		retired bool // retired by the writers' Reap
	}{
		{"in shard 0", 0, false},
		{"in shard 2", 2, false},
		{"retired from shard 0", 0, true},
		{"retired from shard 2", 2, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			writer := r.store(t, dynamostore.Options{Shards: 4})
			reader := r.store(t, dynamostore.Options{Shards: 16})
			var k string
			for i := 0; k == ""; i++ {
				c := fmt.Sprintf("mismatch/%d", i)
				if writer.Shard(c) == tt.shard && reader.Shard(c) != tt.shard {
					k = c
				}
			}
			claimed := base
			if tt.retired {
				claimed = base.Add(-10 * time.Minute)
			}
			if res, err := writer.Claim(context.Background(), lifeClaim(k, "tok", claimed)); err != nil || !res.Acquired {
				t.Fatalf("claim: %+v, %v", res, err)
			}
			if tt.retired {
				if rep, err := writer.Reap(context.Background(), dynamostore.ReapOptions{Now: func() time.Time { return base }}); err != nil || rep.Cleared != 1 {
					t.Fatalf("writers' Reap = %+v, %v; want 1 cleared", rep, err)
				}
			}
			_, _, err := reader.InFlight(context.Background(), base, 100)
			filed := fmt.Sprintf("shard %d", tt.shard)
			if tt.retired {
				filed += " (retired)"
			}
			want := fmt.Sprintf("%s is filed under %s, but its key is in shard %d of 16", dedupe.KeyRef(k), filed, reader.Shard(k))
			if !errors.Is(err, dynamostore.ErrShardMismatch) || !strings.Contains(err.Error(), want) {
				t.Errorf("InFlight = %v; want ErrShardMismatch, saying %q", err, want)
			}
		})
	}
}
