package redisstore_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// TestCheck runs the randomized fault-injecting checker with faults
// injected into the connections go-redis dials (faultConn), below its
// own retries: a lost reply is really applied by the server and really
// resent by go-redis.
func TestCheck(t *testing.T) {
	url := redistest.URL(t)
	dedupetest.Check(t, dedupetest.CheckConfig{
		NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
			opts, err := redis.ParseURL(url)
			if err != nil {
				t.Fatal(err)
			}
			var d net.Dialer
			opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &faultConn{Conn: c, inject: inject}, nil
			}
			c := redis.NewClient(opts)
			t.Cleanup(func() { c.Close() })
			// Hidden from New's policy check (the faults would hit it;
			// TestEvictionPolicy covers it), so newStore sets
			// NoEvictionVerified: the test server runs noeviction.
			return newStore(t, struct{ redisstore.Client }{c}, redisstore.Options{})
		},
	})
}

// faultConn is a connection to Redis that asks inject, before each
// command it writes, what to do with it (the op is the command's name,
// such as EVALSHA or HGETALL):
//
//   - FaultLostReply sends the command, waits for the reply, drops it and
//     breaks the connection: the client sees a reset after the server
//     applied the command;
//   - FaultThrottle breaks the connection instead of sending: a reset
//     before anything was applied;
//   - FaultTimeout fails the write with a timeout, sending nothing.
type faultConn struct {
	net.Conn
	inject dedupetest.Injector

	mu   sync.Mutex
	lose bool // drop the next reply, then break
}

func (c *faultConn) Write(b []byte) (int, error) {
	if op, ok := commandName(b); ok {
		switch c.inject(op) {
		case dedupetest.FaultLostReply:
			c.mu.Lock()
			c.lose = true
			c.mu.Unlock()
		case dedupetest.FaultThrottle:
			c.Conn.Close()
			return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
		case dedupetest.FaultTimeout:
			c.Conn.Close()
			return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
		}
	}
	return c.Conn.Write(b)
}

func (c *faultConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	lose := c.lose
	c.lose = false
	c.mu.Unlock()
	if !lose {
		return c.Conn.Read(b)
	}
	// The reply arrives, so the server applied the command; drop it.
	if _, err := c.Conn.Read(b); err != nil {
		return 0, err
	}
	c.Conn.Close()
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// commandName returns the name of the RESP command b starts with:
// *N\r\n$LEN\r\nNAME\r\n...
func commandName(b []byte) (string, bool) {
	if len(b) == 0 || b[0] != '*' {
		return "", false
	}
	_, rest, ok := bytes.Cut(b, []byte("\r\n"))
	if !ok || len(rest) == 0 || rest[0] != '$' {
		return "", false
	}
	size, rest, ok := bytes.Cut(rest[1:], []byte("\r\n"))
	n, err := strconv.Atoi(string(size))
	if !ok || err != nil || n > len(rest) {
		return "", false
	}
	return string(bytes.ToUpper(rest[:n])), true
}
