package redisstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// checkTimeout bounds New's reading of the servers' eviction policy.
const checkTimeout = 5 * time.Second

// safePolicy is the only maxmemory-policy under which Redis never drops a
// live record: every record carries a TTL, so the volatile-* policies may
// evict it as readily as the allkeys-* ones.
const safePolicy = "noeviction"

// Inspector is what New calls to read a server's eviction policy:
// CONFIG GET maxmemory-policy, and INFO where CONFIG is renamed or
// forbidden (as on managed services). *redis.Client, *redis.ClusterClient
// and *redis.Ring satisfy it; a Client that wraps one of them should
// implement it too, or New cannot check the policy (see
// Options.NoEvictionVerified).
type Inspector interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

// shards is implemented by *redis.ClusterClient and *redis.Ring, whose
// nodes New checks one by one.
type shards interface {
	ForEachShard(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
}

// checkEviction refuses a deployment that may evict records: it reads
// maxmemory-policy on every node c reaches (every master and replica of a
// Cluster, every shard of a Ring) and fails unless each one is
// noeviction. A node whose policy cannot be read fails the check unless
// verified is set.
func checkEviction(c Client, verified bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if sh, ok := c.(shards); ok {
		err := sh.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
			return checkNode(ctx, n, n.Options().Addr, verified, false)
		})
		if err != nil && !errors.Is(err, ErrEvictionPolicy) && !errors.Is(err, dedupe.ErrStoreUnavailable) {
			if transient(err) {
				return fmt.Errorf("redisstore: read maxmemory-policy: %w: %w", dedupe.ErrStoreUnavailable, err)
			}
			return fmt.Errorf("redisstore: read maxmemory-policy: %w", err)
		}
		return err
	}
	in, ok := c.(Inspector)
	if !ok {
		if verified {
			return nil
		}
		return fmt.Errorf("%w: the client (%T) cannot read the server's maxmemory-policy: it implements neither ConfigGet and Info (redisstore.Inspector) nor ForEachShard; "+
			"pass the go-redis client itself, or make sure every node runs with maxmemory-policy noeviction and set Options.NoEvictionVerified",
			ErrEvictionPolicy, c)
	}
	addr := "the server"
	if rc, ok := c.(*redis.Client); ok {
		addr = rc.Options().Addr
	}
	// A wrapper may hide a Cluster behind one Client: then only one node
	// would be checked, so ask the node whether it is in a cluster.
	_, plain := c.(*redis.Client)
	return checkNode(ctx, in, addr, verified, !plain)
}

// checkNode reads and judges the policy of one node. With askCluster, a
// node that reports cluster mode is refused: the client in front of it
// hides the other nodes.
func checkNode(ctx context.Context, n Inspector, addr string, verified, askCluster bool) error {
	policy, how, err := readPolicy(ctx, n)
	switch {
	case err != nil && transient(err):
		return fmt.Errorf("redisstore: read maxmemory-policy on %s: %w: %w", addr, dedupe.ErrStoreUnavailable, err)
	case err != nil:
		return err
	case policy == "" && !verified:
		return fmt.Errorf("%w: cannot read maxmemory-policy on %s (CONFIG GET and INFO are refused, as on some managed services); "+
			"make sure every node runs with maxmemory-policy noeviction (the parameter group on ElastiCache), then set Options.NoEvictionVerified",
			ErrEvictionPolicy, addr)
	case policy != "" && policy != safePolicy:
		return fmt.Errorf("%w: %s runs with maxmemory-policy %s (read with %s), which can evict live records "+
			"(every record has a TTL, so volatile-* policies evict them too) and let a retry run the work again; "+
			"set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, or the parameter group on ElastiCache), "+
			"and size maxmemory for the records",
			ErrEvictionPolicy, addr, policy, how)
	}
	if askCluster {
		info, err := n.Info(ctx, "cluster").Result()
		if err == nil && infoField(info, "cluster_enabled") == "1" {
			return fmt.Errorf("%w: %s is a Redis Cluster node, but the client does not implement ForEachShard, so the other nodes cannot be checked; "+
				"pass the *redis.ClusterClient itself, or implement ForEachShard in the wrapper",
				ErrEvictionPolicy, addr)
		}
	}
	return nil
}

// readPolicy returns the node's maxmemory-policy and the command that
// read it, or an empty policy when both CONFIG GET and INFO are refused
// (unknown command, renamed, or denied by an ACL). Only transient
// failures are returned as errors.
func readPolicy(ctx context.Context, n Inspector) (policy, how string, err error) {
	m, err := n.ConfigGet(ctx, "maxmemory-policy").Result()
	if err == nil && m["maxmemory-policy"] != "" {
		return m["maxmemory-policy"], "CONFIG GET", nil
	}
	if err != nil && transient(err) {
		return "", "", err
	}
	info, err := n.Info(ctx, "memory").Result()
	if err != nil {
		if transient(err) {
			return "", "", err
		}
		return "", "", nil
	}
	return infoField(info, "maxmemory_policy"), "INFO memory", nil
}

// infoField returns the value of field in an INFO reply, or "".
func infoField(info, field string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), field+":"); ok {
			return v
		}
	}
	return ""
}
