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

	"github.com/lambda-dedupe/dedupe/internal/conntest"
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

// Read decides whether to drop what it read after the read returns, not
// before it starts, so that a read already waiting when Write marks the
// reply as lost still drops it (pgstore's faultConn needs this for pgx's
// background reader; go-redis reads only after it writes, and the same
// rule keeps this harness right if that changes). Bytes that arrive after
// the mark are the command's reply: the server applied it.
func (c *faultConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	lose := c.lose
	c.lose = false
	c.mu.Unlock()
	if !lose || err != nil {
		return n, err
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

// TestFaultConnLosesReplyOfWaitingRead checks the harness itself: a reply
// lost by FaultLostReply is dropped even when the read that receives it
// was already waiting when the command was written (see faultConn.Read).
func TestFaultConnLosesReplyOfWaitingRead(t *testing.T) {
	conntest.LosesWaitingRead(t, func(c net.Conn) net.Conn {
		return &faultConn{Conn: c, inject: func(string) dedupetest.Fault { return dedupetest.FaultLostReply }}
	}, []byte("*1\r\n$4\r\nPING\r\n"), []byte("+PONG\r\n"))
}
