package redistest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// EnvClusterURL holds the URL of the Redis Cluster tests use, in the form
// redis.ParseClusterURL reads: redis://HOST:PORT?addr=HOST:PORT&addr=...
// (one seed node in the authority, the others as addr parameters).
// localtest/cmd/withservers sets it to a cluster of three masters.
const EnvClusterURL = "REDIS_CLUSTER_URL"

// URL returns the cluster's URL in the form [EnvClusterURL] holds.
func (c *Cluster) URL() string {
	addrs := c.Addrs()
	var q []string
	for _, a := range addrs[1:] {
		q = append(q, "addr="+a)
	}
	return "redis://" + addrs[0] + "?" + strings.Join(q, "&")
}

// ClusterURL returns the Redis Cluster URL for a test that needs a
// cluster: the value of REDIS_CLUSTER_URL. When it is empty, ClusterURL
// fails the test if CI is set and skips it otherwise; `make test` sets it
// by running the tests under localtest/cmd/withservers, which starts a
// three-master cluster of redis-server processes.
func ClusterURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvClusterURL); u != "" {
		return u
	}
	msg := fmt.Sprintf("%s is not set: run make test, which starts a Redis Cluster of redis-server processes (install it with `%s`), or point %s at a cluster of your own", EnvClusterURL, InstallHint, EnvClusterURL)
	if os.Getenv(EnvCI) != "" {
		t.Fatalf("Redis Cluster required in CI: %s", msg)
		return ""
	}
	t.Skip(msg)
	return ""
}
