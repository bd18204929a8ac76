package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
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
