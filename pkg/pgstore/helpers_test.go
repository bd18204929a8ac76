package pgstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// newPool returns a pool on the test server (DATABASE_URL; skipped
// without it, failed in CI) wide enough for the contract suite's
// concurrent claims to use separate connections.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatalf("parse %s: %v", pgtest.EnvURL, err)
	}
	cfg.MaxConns = 210
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newTable creates a table of its own for the test and drops it when the
// test ends; it returns its name.
func newTable(t testing.TB, c pgstore.Client) string {
	t.Helper()
	table := "dedupetest_" + strings.ToLower(rand.Text()[:12])
	if err := pgstore.CreateSchema(context.Background(), c, table); err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	t.Cleanup(func() { c.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	return table
}

// newStore returns a store on a table of its own.
func newStore(t testing.TB, c pgstore.Client, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	if opts.Table == "" {
		opts.Table = newTable(t, c)
	}
	s, err := pgstore.New(c, opts)
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

// lostReply returns what pgx returns when the connection breaks while it
// waits for a reply.
func lostReply() error {
	return fmt.Errorf("failed to receive message: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
}

// refused returns what dialing a server that is down returns.
func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// faultClient passes calls through to Client unless inject, asked with
// the call's name (callName) before each call, returns a fault.
type faultClient struct {
	pgstore.Client
	inject func(call string) fault
}

// callName names the store's call that sends sql through the driver
// method op: "claim" and "complete" for the calls of the table's claim
// and completion functions, op itself (Exec, Query, QueryRow) for every
// other statement. The claim is matched first: its statement names the
// completion function too (see pgstore's claimSQL).
func callName(op, sql string) string {
	switch {
	case strings.Contains(sql, "_claim("):
		return "claim"
	case strings.Contains(sql, "_complete("):
		return "complete"
	}
	return op
}

func (f faultClient) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	switch f.inject(callName("Exec", sql)) {
	case faultLostReply:
		if tag, err := f.Client.Exec(ctx, sql, args...); err != nil {
			return tag, err
		}
		return pgconn.CommandTag{}, lostReply()
	case faultThrottle:
		return pgconn.CommandTag{}, refused()
	case faultTimeout:
		return pgconn.CommandTag{}, context.DeadlineExceeded
	}
	return f.Client.Exec(ctx, sql, args...)
}

func (f faultClient) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	switch f.inject(callName("Query", sql)) {
	case faultLostReply:
		rows, err := f.Client.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, lostReply()
	case faultThrottle:
		return nil, refused()
	case faultTimeout:
		return nil, context.DeadlineExceeded
	}
	return f.Client.Query(ctx, sql, args...)
}

func (f faultClient) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	switch f.inject(callName("QueryRow", sql)) {
	case faultLostReply:
		// Run the statement to its end, then lose its reply.
		rows, err := f.Client.Query(ctx, sql, args...)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			return errRow{err}
		}
		return errRow{lostReply()}
	case faultThrottle:
		return errRow{refused()}
	case faultTimeout:
		return errRow{context.DeadlineExceeded}
	}
	return f.Client.QueryRow(ctx, sql, args...)
}

// errRow is a pgx.Row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// counter counts the calls a client makes.
type counter struct {
	pgstore.Client
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

func (c *counter) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.add("Exec")
	return c.Client.Exec(ctx, sql, args...)
}

func (c *counter) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.add("Query")
	return c.Client.Query(ctx, sql, args...)
}

func (c *counter) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.add("QueryRow")
	return c.Client.QueryRow(ctx, sql, args...)
}

func itoa(n int) string { return strconv.Itoa(n) }

// portOf returns the port of a host:port address.
func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}
