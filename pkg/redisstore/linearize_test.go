package redisstore_test

import (
	"context"
	"crypto/rand"
	"net"
	"sync/atomic"
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
//
// The faults start once armed is set: New reads the server's eviction
// policy through the same client, and a fault there would fail the
// history before it starts.
func faultDialer(inject dedupetest.Injector, armed *atomic.Bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	inject0 := inject
	inject = func(op string) dedupetest.Fault {
		if !armed.Load() {
			return dedupetest.FaultNone
		}
		return inject0(op)
	}
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
		StrictFirstToken: true,
		NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
			opts, err := redis.ParseURL(url)
			if err != nil {
				t.Fatal(err)
			}
			var armed atomic.Bool
			opts.Dialer = faultDialer(inject, &armed)
			c := redis.NewClient(opts)
			t.Cleanup(func() { c.Close() })
			s := newStore(t, c, redisstore.Options{Prefix: prefix})
			armed.Store(true)
			return s
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
		StrictFirstToken: true,
		Keys:             3,
		NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
			opts, err := redis.ParseClusterURL(url)
			if err != nil {
				t.Fatal(err)
			}
			var armed atomic.Bool
			opts.Dialer = faultDialer(inject, &armed)
			c := redis.NewClusterClient(opts)
			t.Cleanup(func() { c.Close() })
			s := newStore(t, c, redisstore.Options{Prefix: prefix})
			armed.Store(true)
			return s
		},
	})
}
