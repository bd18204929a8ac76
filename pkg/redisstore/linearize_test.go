package redisstore_test

import (
	"context"
	"crypto/rand"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest/linearize"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// faultDialer returns a dialer whose connections ask inject before each
// command (faultConn): lost replies, resets and timeouts below go-redis's
// own retries.
func faultDialer(inject dedupetest.Injector) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &faultConn{Conn: c, inject: inject}, nil
	}
}

// TestLinearizable checks that redisstore on a standalone Redis is
// linearizable against memstore's semantics, under concurrent clients
// with faults injected into the connections go-redis dials.
func TestLinearizable(t *testing.T) {
	url := redistest.URL(t)
	prefix := "lin:" + rand.Text() + ":"
	linearize.Check(t, linearize.Config{
		NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
			opts, err := redis.ParseURL(url)
			if err != nil {
				t.Fatal(err)
			}
			opts.Dialer = faultDialer(inject)
			c := redis.NewClient(opts)
			t.Cleanup(func() { c.Close() })
			return newStore(t, c, redisstore.Options{Prefix: prefix})
		},
	})
}

// TestLinearizableCluster does the same on a Redis Cluster of three
// masters (REDIS_CLUSTER_URL), through a redis.ClusterClient: a history's
// keys land on different nodes.
func TestLinearizableCluster(t *testing.T) {
	url := redistest.ClusterURL(t)
	prefix := "lin:" + rand.Text() + ":"
	linearize.Check(t, linearize.Config{
		Keys: 3,
		NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
			opts, err := redis.ParseClusterURL(url)
			if err != nil {
				t.Fatal(err)
			}
			opts.Dialer = faultDialer(inject)
			c := redis.NewClusterClient(opts)
			t.Cleanup(func() { c.Close() })
			return newStore(t, c, redisstore.Options{Prefix: prefix})
		},
	})
}
