package pgstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// TestCheck runs the randomized fault-injecting checker with faults
// injected into the connections pgx dials (faultConn): a lost reply is
// really applied by the server, and the connection really breaks. pgx
// does not resend a statement once it is sent; the store's own attempts
// (Options.Attempts) do.
func TestCheck(t *testing.T) {
	url := pgtest.URL(t)
	setup := newPool(t)
	table := newTable(t, setup)
	dedupetest.Check(t, dedupetest.CheckConfig{
		NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
			cfg, err := pgxpool.ParseConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			var d net.Dialer
			cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &faultConn{Conn: c, inject: inject}, nil
			}
			p, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			return newStore(t, p, pgstore.Options{Table: table})
		},
	})
}

// faultConn is a connection to PostgreSQL that asks inject, before each
// write that runs a statement (a simple Query, or an Execute of the
// extended protocol), what to do with it; the op is "Query" or
// "Execute":
//
//   - FaultLostReply sends it, waits for the server to be ready again
//     (ReadyForQuery: the statement committed), drops the reply and
//     breaks the connection;
//   - FaultThrottle breaks the connection instead of sending;
//   - FaultTimeout fails the write with a timeout, sending nothing.
type faultConn struct {
	net.Conn
	inject dedupetest.Injector

	mu   sync.Mutex
	lose bool
}

func (c *faultConn) Write(b []byte) (int, error) {
	if op, ok := statementOp(b); ok {
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

// readyForQuery is the ReadyForQuery message without its status byte.
var readyForQuery = []byte{'Z', 0, 0, 0, 5}

func (c *faultConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	lose := c.lose
	c.lose = false
	c.mu.Unlock()
	if !lose {
		return c.Conn.Read(b)
	}
	var seen []byte
	for {
		n, err := c.Conn.Read(b)
		if err != nil {
			return 0, err
		}
		seen = append(seen, b[:n]...)
		if i := len(seen) - 6; i >= 0 && bytes.Equal(seen[i:i+5], readyForQuery) {
			break
		}
	}
	c.Conn.Close()
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// statementOp reports whether the frontend messages in b run a statement:
// a simple Query ('Q') or an Execute ('E'). Writes before the session is
// up (the startup message, which has no type byte) are never faulted.
func statementOp(b []byte) (string, bool) {
	if len(b) == 0 || (b[0] != 'Q' && b[0] != 'P' && b[0] != 'B') {
		return "", false
	}
	for len(b) >= 5 {
		typ := b[0]
		n := int(binary.BigEndian.Uint32(b[1:5]))
		switch typ {
		case 'Q':
			return "Query", true
		case 'E':
			return "Execute", true
		}
		if n < 4 || 1+n > len(b) {
			return "", false
		}
		b = b[1+n:]
	}
	return "", false
}
