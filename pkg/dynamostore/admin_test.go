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

// TestAdmin runs the operator's contract on both key schemas: the
// template's table keyed by reference, and a classic one with the ref index.
func TestAdmin(t *testing.T) {
	for name, r := range rigs(t) {
		t.Run(name, func(t *testing.T) {
			dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store { return r.store(t, dynamostore.Options{}) })
		})
	}
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

// TestStrandedListsWhatReapCounted is the stranded-records alarm's first
// step: every record Reap found and counted is still listed by InFlight
// afterwards (dedupe stranded), as stranded, until a retry takes it over
// or an operator releases it.
func TestStrandedListsWhatReapCounted(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	ctx := context.Background()
	keys, tokens := seedInFlight(t, s, stranded{prefix: "alarm", n: 12, claimed: 10 * time.Minute, lease: time.Minute})
	live, _ := seedInFlight(t, s, stranded{prefix: "alarm-live", n: 2, claimed: 0, lease: 5 * time.Minute})
	report, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base }})
	if err != nil || report.Found != len(keys) || report.Cleared != len(keys) {
		t.Fatalf("Reap = %+v, %v; want %d found and cleared", report, err, len(keys))
	}
	listed := func() map[string]bool {
		t.Helper()
		recs, truncated, err := s.InFlight(ctx, base, 100)
		if err != nil || truncated {
			t.Fatalf("InFlight = %d records, truncated %v, %v", len(recs), truncated, err)
		}
		m := map[string]bool{}
		for _, rec := range recs {
			m[rec.Key] = rec.Stranded(base)
		}
		return m
	}
	got := listed()
	for _, k := range keys {
		if stranded, ok := got[k]; !ok || !stranded || !r.retired(t, k) {
			t.Errorf("%s: listed %v, stranded %v, retired %v; want all three", k, ok, stranded, r.retired(t, k))
		}
	}
	for _, k := range live {
		if stranded, ok := got[k]; !ok || stranded {
			t.Errorf("live %s: listed %v, stranded %v; want listed, running", k, ok, stranded)
		}
	}
	// A second run finds nothing new: the alarm counts each record once.
	if again, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base.Add(time.Minute) }}); err != nil || again.Found != 0 {
		t.Errorf("second Reap = %+v, %v; want nothing found", again, err)
	}
	// A retry of the same request takes one over: back in its shard,
	// running. An operator releases another: out of the index.
	res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: keys[0], Fingerprint: "fp", Token: "retry", Now: base,
		LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
	if err != nil || !res.Acquired || !r.inIndex(t, keys[0]) {
		t.Fatalf("takeover = %+v, %v; in its shard %v", res, err, r.inIndex(t, keys[0]))
	}
	seen, err := s.Get(ctx, keys[1], base)
	if err != nil || seen.Token != tokens[1] {
		t.Fatalf("Get = %+v, %v", seen, err)
	}
	if err := s.ReleaseSeen(ctx, seen); err != nil {
		t.Fatalf("ReleaseSeen: %v", err)
	}
	got = listed()
	if stranded, ok := got[keys[0]]; !ok || stranded {
		t.Errorf("taken over: listed %v, stranded %v; want listed, running", ok, stranded)
	}
	if _, ok := got[keys[1]]; ok {
		t.Errorf("released: still listed")
	}
}

// TestInFlightRefusesShardMismatch: writers on 16 shards, an operator's
// store on the default 8, as in the report: InFlight listed the records
// of shards 0 to 7 only and said nothing. It now probes shards 8 to 15
// and refuses. Writers on 4 shards, a store on 16: records filed under a
// shard that 16 would not give their keys are refused as the reaper
// refuses them.
func TestInFlightRefusesShardMismatch(t *testing.T) {
	for _, tt := range []struct {
		name            string
		writers, reader int
	}{
		{"writers on more shards", 16, 0},
		{"writers on fewer shards", 4, 16},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			writer := r.store(t, dynamostore.Options{Shards: tt.writers})
			keys, _ := seedInFlight(t, writer, stranded{prefix: "shards", n: 24, claimed: 10 * time.Minute, lease: time.Minute})
			if _, err := writer.Reap(context.Background(), dynamostore.ReapOptions{Now: func() time.Time { return base }}); err != nil {
				t.Fatalf("writers' Reap: %v", err)
			}
			reader := r.store(t, dynamostore.Options{Shards: tt.reader})
			recs, _, err := reader.InFlight(context.Background(), base, 100)
			if !errors.Is(err, dynamostore.ErrShardMismatch) {
				t.Errorf("InFlight with %d shards = %d records, %v; want ErrShardMismatch", tt.reader, len(recs), err)
			}
			// With the writers' count, every record is listed.
			recs, _, err = writer.InFlight(context.Background(), base, 100)
			if err != nil || len(recs) != len(keys) {
				t.Errorf("InFlight with the writers' count = %d records, %v; want %d", len(recs), err, len(keys))
			}
		})
	}
}

// TestInFlightIgnoresExpiredLeftovers: after the writers' shard count
// changed, the index still holds the in-flight items of the old count
// until TTL deletes them, days after they expired (DynamoDB), or never
// (dynalite). Expired, they are absent, and are no sign that a writer
// still uses another count: InFlight lists the live records, where it
// refused until the last leftover was deleted, whatever --shards said.
func TestInFlightIgnoresExpiredLeftovers(t *testing.T) {
	for _, tt := range []struct {
		name        string
		old, reader int
	}{
		{"from 16 shards to 8", 16, 8},
		{"from 4 shards to 8", 4, 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			old := r.store(t, dynamostore.Options{Shards: tt.old})
			// Claimed two hours ago, expired an hour ago: running or
			// stranded ones, and stranded ones the old reaper retired.
			seedInFlight(t, old, stranded{prefix: "leftover", n: 24, claimed: 2 * time.Hour, lease: 10 * time.Minute, expires: time.Hour})
			retired, _ := seedInFlight(t, old, stranded{prefix: "leftover-retired", n: 24, claimed: 2 * time.Hour, lease: 10 * time.Minute, expires: time.Hour})
			if _, err := old.Reap(context.Background(), dynamostore.ReapOptions{Now: func() time.Time { return base.Add(-90 * time.Minute) }}); err != nil {
				t.Fatalf("the old reaper: %v", err)
			}
			for _, k := range retired {
				if !r.retired(t, k) {
					t.Fatalf("%s not retired by the old reaper", k)
				}
			}
			reader := r.store(t, dynamostore.Options{Shards: tt.reader})
			live, _ := seedInFlight(t, reader, stranded{prefix: "live", n: 6, claimed: 10 * time.Minute, lease: time.Minute})
			recs, truncated, err := reader.InFlight(context.Background(), base, 100)
			if err != nil || truncated || len(recs) != len(live) {
				t.Errorf("InFlight with %d shards = %d records, truncated %v, %v; want the %d live ones", tt.reader, len(recs), truncated, err, len(live))
			}
		})
	}
}
