package redisstore_test

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// configHistories returns the number of configuration histories for a
// short run in make test, def, unless DEDUPE_CONFIG_HISTORIES asks for
// another number (0 leaves it to dedupetest.CheckConfigs, which reads
// it).
func configHistories(def int) int {
	if os.Getenv("DEDUPE_CONFIG_HISTORIES") != "" {
		return 0
	}
	return def
}

// TestCheckConfigs runs the configuration checker (issue 17) on
// redisstore on a standalone Redis (REDIS_URL): adapter, principal
// source, prefix, options and sharing drawn per history, each history
// under a key prefix of its own. The checker's own transient claim
// failures are its only faults; TestCheck and TestLinearizable inject
// faults on the wire.
func TestCheckConfigs(t *testing.T) {
	c := newClient(t)
	dedupetest.CheckConfigs(t, dedupetest.ConfigCheck{
		Histories: configHistories(60),
		NewStore: func(t *testing.T) dedupe.Store {
			return newStore(t, c, redisstore.Options{})
		},
	})
}

// TestCheckConfigsCluster does the same on a Redis Cluster of three
// masters (REDIS_CLUSTER_URL), through a redis.ClusterClient.
func TestCheckConfigsCluster(t *testing.T) {
	opts, err := redis.ParseClusterURL(redistest.ClusterURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClusterClient(opts)
	t.Cleanup(func() { c.Close() })
	dedupetest.CheckConfigs(t, dedupetest.ConfigCheck{
		Histories: configHistories(60),
		NewStore: func(t *testing.T) dedupe.Store {
			return newStore(t, c, redisstore.Options{})
		},
	})
}
