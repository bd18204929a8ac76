package redisstore_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// TestContractCluster runs the contract suite on a three-master Redis
// Cluster started for it, through a redis.ClusterClient: every script
// touches one key, so each runs on the node that owns the key's slot.
func TestContractCluster(t *testing.T) {
	cluster, err := redistest.StartCluster(context.Background(), redistest.Options{}, 3)
	if errors.Is(err, redistest.ErrNotInstalled) && os.Getenv(redistest.EnvCI) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop() })
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), PoolSize: 256})
	t.Cleanup(func() { c.Close() })
	dedupetest.Run(t, func(t *testing.T) dedupe.Store { return newStore(t, c, redisstore.Options{}) })
	// Admin too, in Cluster mode (InFlight walks every master).
	dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store { return newStore(t, c, redisstore.Options{RefIndex: true}) })

	// The suite's keys landed on every node.
	ctx := context.Background()
	var nodes atomic.Int32 // ForEachMaster calls fn concurrently
	err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		if size, err := n.DBSize(ctx).Result(); err == nil && size > 0 {
			nodes.Add(1)
		}
		return nil
	})
	if err != nil || nodes.Load() != 3 {
		t.Errorf("masters holding records: got %d (%v), want 3", nodes.Load(), err)
	}
}
