package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// newClusterClient returns a client of the test cluster
// (REDIS_CLUSTER_URL; skipped without it, failed in CI).
func newClusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	opts, err := redis.ParseClusterURL(redistest.ClusterURL(t))
	if err != nil {
		t.Fatalf("parse %s: %v", redistest.EnvClusterURL, err)
	}
	c := redis.NewClusterClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestAdminCluster runs the Admin contract on Redis Cluster: the pointer
// sets live in other slots than their records, and InFlight walks every
// master.
func TestAdminCluster(t *testing.T) {
	c := newClusterClient(t)
	dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store {
		return newStore(t, c, redisstore.Options{Prefix: "admintest:" + t.Name() + ":", RefIndex: true})
	})
}

// TestInFlightCluster: InFlight on a ClusterClient lists the records of
// every master; through a single-node client in front of one master, it
// would list that node's records only and say nothing, so it refuses.
func TestInFlightCluster(t *testing.T) {
	c := newClusterClient(t)
	ctx := context.Background()
	prefix := "inflightcluster:" + rand.Text() + ":"
	s := newStore(t, c, redisstore.Options{Prefix: prefix, RefIndex: true})
	now := time.Now()
	const n = 30
	for i := range n {
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: fmt.Sprintf("k%d", i), Fingerprint: "fp", Token: "tok",
			Now: now.Add(-time.Minute), LeaseUntil: now.Add(-30 * time.Second), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		recs, truncated, err := s.InFlight(ctx, now, 100)
		if err != nil || truncated || len(recs) != n {
			t.Fatalf("InFlight = %d records, truncated %v, %v; want %d", len(recs), truncated, err, n)
		}
	}
	one := redis.NewClient(&redis.Options{Addr: c.Options().Addrs[0]}) // one master
	t.Cleanup(func() { one.Close() })
	plain := newStore(t, one, redisstore.Options{Prefix: prefix})
	recs, _, err := plain.InFlight(ctx, now, 100)
	if !errors.Is(err, redisstore.ErrInvalidOptions) {
		t.Errorf("InFlight through one node of a cluster = %d of %d records, %v; want an error wrapping ErrInvalidOptions", len(recs), n, err)
	}
}

// TestAdminRing runs the Admin contract on a *redis.Ring of two servers
// (the test server and one started for it), and checks that InFlight
// lists the records of both shards, each once. A Ring sends SCAN to a
// random shard, so walking it as one server read each page of a cursor
// from any shard: some records listed twice, others never.
func TestAdminRing(t *testing.T) {
	second, err := redistest.Start(context.Background(), redistest.Options{})
	if errors.Is(err, redistest.ErrNotInstalled) && os.Getenv(redistest.EnvCI) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Stop() })
	opts, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": opts.Addr, "b": second.Addr()}})
	t.Cleanup(func() { ring.Close() })
	dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store {
		return newStore(t, ring, redisstore.Options{Prefix: "admintest:" + t.Name() + ":" + rand.Text() + ":", RefIndex: true})
	})

	ctx := context.Background()
	s := newStore(t, ring, redisstore.Options{Prefix: "inflightring:" + rand.Text() + ":"})
	now := time.Now()
	const n = 60
	for i := range n {
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: fmt.Sprintf("k%d", i), Fingerprint: "fp", Token: "tok",
			Now: now.Add(-time.Minute), LeaseUntil: now.Add(-30 * time.Second), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		recs, truncated, err := s.InFlight(ctx, now, 1000)
		seen := map[string]int{}
		for _, r := range recs {
			seen[r.Key]++
		}
		if err != nil || truncated || len(recs) != n || len(seen) != n {
			t.Fatalf("InFlight = %d records (%d distinct), truncated %v, %v; want %d, each once", len(recs), len(seen), truncated, err, n)
		}
	}
}

// twiceShards is a client whose ForEachShard names its one server twice,
// as a wrapper that names a master and its replica does: the same keys
// on two nodes.
type twiceShards struct{ *redis.Client }

func (c twiceShards) ForEachShard(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	for range 2 {
		if err := fn(ctx, c.Client); err != nil {
			return err
		}
	}
	return nil
}

// TestInFlightListsEachOnce: nodes that hold the same keys (a replica
// beside its master) list each record once.
func TestInFlightListsEachOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, twiceShards{newClient(t)}, redisstore.Options{Prefix: "inflightonce:" + rand.Text() + ":"})
	now := time.Now()
	for i := range 5 {
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: fmt.Sprintf("k%d", i), Fingerprint: "fp", Token: "tok",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if recs, _, err := s.InFlight(ctx, now, 100); err != nil || len(recs) != 5 {
		t.Errorf("InFlight = %d records, %v; want 5, each once", len(recs), err)
	}
}
