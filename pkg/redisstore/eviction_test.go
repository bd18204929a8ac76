package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// startServer starts a redis-server of the test's own, so that changing
// its configuration cannot disturb other tests on REDIS_URL.
func startServer(t *testing.T) *redistest.Server {
	t.Helper()
	srv, err := redistest.Start(context.Background(), redistest.Options{})
	if errors.Is(err, redistest.ErrNotInstalled) && os.Getenv(redistest.EnvCI) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	return srv
}

// TestEvictionPolicy sets each maxmemory-policy on a server of its own
// with CONFIG SET and checks that New accepts noeviction only, naming the
// policy and the fix. It then takes CONFIG away (an ACL user without it,
// as managed services rename or deny it): New reads the policy from INFO
// instead; with INFO gone too, New refuses unless NoEvictionVerified,
// and the flag never overrides a policy New can read.
func TestEvictionPolicy(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { admin.Close() })
	setPolicy := func(t *testing.T, p string) {
		t.Helper()
		if err := admin.ConfigSet(ctx, "maxmemory-policy", p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	client := func(t *testing.T, user string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: "pw"})
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, u := range []struct {
		name  string
		rules []any
	}{
		{"noconfig", []any{"-config"}},
		{"noconfig-noinfo", []any{"-config", "-info"}},
	} {
		args := append([]any{"ACL", "SETUSER", u.name, "on", ">pw", "~*", "+@all"}, u.rules...)
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}

	policies := []string{"noeviction", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
		"allkeys-lru", "allkeys-lfu", "allkeys-random"}
	for _, user := range []string{"default", "noconfig"} {
		for _, p := range policies {
			t.Run(user+"/"+p, func(t *testing.T) {
				setPolicy(t, p)
				c := admin
				if user != "default" {
					c = client(t, user)
				}
				for _, verified := range []bool{false, true} {
					_, err := redisstore.New(c, redisstore.Options{NoEvictionVerified: verified})
					if p == "noeviction" {
						if err != nil {
							t.Errorf("New (verified %v): %v", verified, err)
						}
						continue
					}
					if !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "noeviction") {
						t.Errorf("New (verified %v): got %v, want ErrEvictionPolicy naming %s and the fix", verified, err, p)
					}
					if how := map[string]string{"default": "CONFIG GET", "noconfig": "INFO memory"}[user]; err != nil && !strings.Contains(err.Error(), how) {
						t.Errorf("New (verified %v): got %v, want the policy read with %s", verified, err, how)
					}
				}
			})
		}
	}
	setPolicy(t, "noeviction")

	t.Run("policy unreadable", func(t *testing.T) {
		c := client(t, "noconfig-noinfo")
		_, err := redisstore.New(c, redisstore.Options{})
		if !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), "NoEvictionVerified") {
			t.Errorf("New: got %v, want ErrEvictionPolicy naming NoEvictionVerified", err)
		}
		if _, err := redisstore.New(c, redisstore.Options{NoEvictionVerified: true}); err != nil {
			t.Errorf("New with NoEvictionVerified: %v", err)
		}
	})

	t.Run("client that cannot inspect", func(t *testing.T) {
		c := struct{ redisstore.Client }{admin}
		if _, err := redisstore.New(c, redisstore.Options{}); !errors.Is(err, redisstore.ErrEvictionPolicy) {
			t.Errorf("New: got %v, want ErrEvictionPolicy", err)
		}
		if _, err := redisstore.New(c, redisstore.Options{NoEvictionVerified: true}); err != nil {
			t.Errorf("New with NoEvictionVerified: %v", err)
		}
	})
}

// TestEvictionPolicyCluster checks every node of a Cluster: one master
// with an evicting policy is enough to refuse, and a wrapper that hides
// the nodes is refused rather than checked on one node.
func TestEvictionPolicyCluster(t *testing.T) {
	cluster, err := redistest.StartCluster(context.Background(), redistest.Options{}, 3)
	if errors.Is(err, redistest.ErrNotInstalled) && os.Getenv(redistest.EnvCI) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop() })
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { c.Close() })
	if _, err := redisstore.New(c, redisstore.Options{Prefix: rand.Text()}); err != nil {
		t.Fatalf("New on a noeviction cluster: %v", err)
	}
	// A wrapper exposing ConfigGet and Info, but not ForEachShard.
	w := struct {
		redisstore.Client
		redisstore.Inspector
	}{c, c}
	if _, err := redisstore.New(w, redisstore.Options{}); !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), "ForEachShard") {
		t.Errorf("New through a wrapper hiding the cluster: got %v, want ErrEvictionPolicy naming ForEachShard", err)
	}
	last := cluster.Addrs()[len(cluster.Addrs())-1]
	node := redis.NewClient(&redis.Options{Addr: last})
	t.Cleanup(func() { node.Close() })
	if err := node.ConfigSet(ctx, "maxmemory-policy", "volatile-ttl").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := redisstore.New(c, redisstore.Options{NoEvictionVerified: true}); !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), last) {
		t.Errorf("New with one evicting master: got %v, want ErrEvictionPolicy naming %s", err, last)
	}
}
