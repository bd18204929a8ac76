package redistest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of Redis Cluster.
const clusterSlots = 16384

// Cluster is a running Redis Cluster of masters only, started by
// [StartCluster], for tests that the store works when every key may live
// on another node.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts n redis-server nodes (n at least 3) with cluster
// mode on and persistence off, gives each an equal range of the 16384
// slots, joins them (CLUSTER MEET) and returns once every node reports
// cluster_state:ok. Stop it with [Cluster.Stop].
func StartCluster(ctx context.Context, opts Options, n int) (*Cluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, not %d", n)
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &Cluster{}
	for range n {
		s, err := startWith(ctx, opts, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	if err := c.join(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("start redis cluster: %w: %v", ErrNotReady, err)
	}
	return c, nil
}

// join assigns the slots, introduces the nodes and waits for the cluster.
func (c *Cluster) join(ctx context.Context) error {
	clients := make([]*redis.Client, len(c.nodes))
	for i, s := range c.nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		defer clients[i].Close()
	}
	per := clusterSlots / len(c.nodes)
	for i, cl := range clients {
		first, last := i*per, (i+1)*per-1
		if i == len(clients)-1 {
			last = clusterSlots - 1
		}
		slots := make([]int, 0, last-first+1)
		for slot := first; slot <= last; slot++ {
			slots = append(slots, slot)
		}
		if err := cl.ClusterAddSlots(ctx, slots...).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTS on %s: %w", c.nodes[i].Addr(), err)
		}
		if i > 0 {
			if err := cl.ClusterMeet(ctx, "127.0.0.1", c.nodes[0].Addr()[len("127.0.0.1:"):]).Err(); err != nil {
				return fmt.Errorf("CLUSTER MEET from %s: %w", c.nodes[i].Addr(), err)
			}
		}
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok := true
		for _, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(clients))) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("cluster_state never became ok on every node")
		case <-tick.C:
		}
	}
}

// Addrs returns the nodes' addresses, the seeds of a redis.ClusterClient.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Stop stops every node and removes their directories.
func (c *Cluster) Stop() error {
	var errs []error
	for _, s := range c.nodes {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}
