package redisstore_test

import (
	"context"
	"crypto/rand"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// newClient returns a client for the test server (REDIS_URL; skipped
// without it, failed in CI) with a pool wide enough for the contract
// suite's concurrent claims to use separate connections.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatalf("parse %s: %v", redistest.EnvURL, err)
	}
	opts.PoolSize = 256
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore returns a store on the test server, its keys under a prefix of
// their own, and the client it uses.
func newStore(t testing.TB, c redisstore.Client, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = "dedupetest:" + rand.Text() + ":"
	}
	if _, ok := c.(redisstore.Inspector); !ok {
		// A test wrapper (faults, counters) over the test server, whose
		// policy is the default, noeviction; TestEvictionPolicy checks
		// what New does without this.
		opts.NoEvictionVerified = true
	}
	s, err := redisstore.New(c, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// fault is what faultClient does to one call.
type fault int

const (
	faultNone      fault = iota
	faultLostReply       // applied on the server; the client sees a reset
	faultThrottle        // refused before sending: nothing applied
	faultTimeout         // not applied; the deadline passes
)

// Errors faultClient returns, shaped like what go-redis returns for the
// real failures.
var (
	errReset   = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
)

// faultClient passes calls through to Client unless inject, asked with
// the command's name (EvalSha, Eval, HGetAll) before each call, returns a
// fault.
type faultClient struct {
	redisstore.Client
	inject func(op string) fault
}

// do runs call under the fault inject chooses for op, returning the
// error the caller should see instead of call's reply, or nil.
func (f faultClient) do(op string, call func() error) error {
	switch f.inject(op) {
	case faultLostReply:
		if err := call(); err != nil {
			return err
		}
		return errReset
	case faultThrottle:
		return errRefused
	case faultTimeout:
		return context.DeadlineExceeded
	}
	return call()
}

func (f faultClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	var cmd *redis.Cmd
	if err := f.do("EvalSha", func() error { cmd = f.Client.EvalSha(ctx, sha, keys, args...); return cmd.Err() }); err != nil && (cmd == nil || cmd.Err() == nil) {
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(err)
	}
	return cmd
}

func (f faultClient) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	var cmd *redis.Cmd
	if err := f.do("Eval", func() error { cmd = f.Client.Eval(ctx, script, keys, args...); return cmd.Err() }); err != nil && (cmd == nil || cmd.Err() == nil) {
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(err)
	}
	return cmd
}

func (f faultClient) HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd {
	var cmd *redis.MapStringStringCmd
	if err := f.do("HGetAll", func() error { cmd = f.Client.HGetAll(ctx, key); return cmd.Err() }); err != nil && (cmd == nil || cmd.Err() == nil) {
		cmd = redis.NewMapStringStringCmd(ctx)
		cmd.SetErr(err)
	}
	return cmd
}

// counter counts the calls a client makes, by command.
type counter struct {
	redisstore.Client
	mu  sync.Mutex
	ops []string
}

func (c *counter) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, op)
}

// take returns the calls counted so far and forgets them.
func (c *counter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := c.ops
	c.ops = nil
	return ops
}

func (c *counter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.add("EvalSha")
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

func (c *counter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	c.add("Eval")
	return c.Client.Eval(ctx, script, keys, args...)
}

func (c *counter) HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd {
	c.add("HGetAll")
	return c.Client.HGetAll(ctx, key)
}
