package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// TestReapRetiresEveryStrandedRow: Reap retires every stranded row
// however many batches it takes, a full batch being followed by another
// statement, while the rows still in their lease or within the grace stay
// in flight. Five stranded rows in batches of two are retired 2, 2 and 1.
func TestReapRetiresEveryStrandedRow(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := newTable(t, p)
	s := newStore(t, p, pgstore.Options{Table: table})
	now := base.Add(time.Hour)
	for i := range 5 {
		k := fmt.Sprintf("stranded-%d", i)
		at := now.Add(-10 * time.Minute)
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: "tok", Now: at,
			LeaseUntil: at.Add(time.Minute), ExpiresAt: at.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"running", "within-grace"} {
		lease := map[string]time.Duration{"running": time.Minute, "within-grace": -time.Second}[k]
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: "tok", Now: now.Add(-time.Minute),
			LeaseUntil: now.Add(lease), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	report, err := s.Reap(ctx, pgstore.ReapOptions{Now: func() time.Time { return now }, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	// One short delete statement, then retirements of 2, 2 and 1.
	if report.Retired != 5 || report.Statements != 4 || report.Truncated {
		t.Errorf("report = %+v, want 5 retired in 3 statements after 1 delete, not truncated", report)
	}
	for i := range 5 {
		k := fmt.Sprintf("stranded-%d", i)
		if v := inflight(t, p, table, k); v == nil || *v {
			t.Errorf("%s inflight after Reap: got %v, want false (retired)", k, v)
		}
	}
	for _, k := range []string{"running", "within-grace"} {
		if v := inflight(t, p, table, k); v == nil || !*v {
			t.Errorf("%s inflight after Reap: got %v, want true (never retire a lease still running or within its grace)", k, v)
		}
	}
}

// TestReapZeroOptionsAreTheDefaults: a zero BatchSize is
// DefaultReapBatchSize, so a run with zero options deletes every expired
// row in full batches and a short one (DefaultReapBatchSize+1 rows: two
// delete statements, then one retirement), and is not truncated; a zero
// Margin is DefaultReapMargin, so inside it no statement starts.
func TestReapZeroOptionsAreTheDefaults(t *testing.T) {
	p := newPool(t)
	table := newTable(t, p)
	s := newStore(t, p, pgstore.Options{Table: table})
	n := pgstore.DefaultReapBatchSize + 1
	ctx := context.Background()
	if _, err := p.Exec(ctx, `INSERT INTO `+table+` (key, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at, res_status)
		SELECT convert_to('old-' || i, 'UTF8'), 'COMPLETED', 'fp', 'tok', 0, $1::bigint, 0, 0, 200 FROM generate_series(1, $2::integer) i`,
		base.Unix(), n); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return base.Add(time.Hour) }

	// Far from its deadline: a zero BatchSize that meant no rows per
	// statement would spin until the margin and report Truncated.
	far, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	report, err := s.Reap(far, pgstore.ReapOptions{Now: now})
	if err != nil || report.Deleted != n || report.Statements != 3 || report.Truncated {
		t.Errorf("Reap with zero options = %+v, %v; want %d deleted in 2 statements plus 1 retirement, not truncated", report, err, n)
	}

	// The defaults leave a margin before the deadline (else the run could
	// miss it) and a grace past the lease (else a retry could not take
	// its key over first).
	if pgstore.DefaultReapMargin <= 0 || pgstore.DefaultReapGrace <= 0 {
		t.Fatalf("DefaultReapMargin %v, DefaultReapGrace %v: want both positive", pgstore.DefaultReapMargin, pgstore.DefaultReapGrace)
	}
	// A deadline nearer than DefaultReapMargin: nothing starts.
	near, cancel := context.WithTimeout(ctx, pgstore.DefaultReapMargin/2)
	defer cancel()
	report, err = s.Reap(near, pgstore.ReapOptions{Now: now})
	if err != nil || !report.Truncated || report.Statements != 0 {
		t.Errorf("Reap with zero Margin, %v before its deadline = %+v, %v; want truncated before any statement", pgstore.DefaultReapMargin/2, report, err)
	}
}

// batchCounter records how many rows each statement sent through it
// deleted (Exec) or returned (Query).
type batchCounter struct {
	pgstore.Client
	mu   sync.Mutex
	rows []int64
}

func (c *batchCounter) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := c.Client.Exec(ctx, sql, args...)
	c.mu.Lock()
	c.rows = append(c.rows, tag.RowsAffected())
	c.mu.Unlock()
	return tag, err
}

func (c *batchCounter) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := c.Client.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows = append(c.rows, 0)
	return &countedRows{Rows: rows, c: c, i: len(c.rows) - 1}, nil
}

// countedRows counts the rows read into c.rows[i].
type countedRows struct {
	pgx.Rows
	c *batchCounter
	i int
}

func (r *countedRows) Next() bool {
	ok := r.Rows.Next()
	if ok {
		r.c.mu.Lock()
		r.c.rows[r.i]++
		r.c.mu.Unlock()
	}
	return ok
}

// TestReapStatementsHonourBatchSize: no statement of Reap deletes or
// retires more than BatchSize rows, whatever plan PostgreSQL picks for
// it. Before, on a small table the planner ran the batch's subquery once
// per outer row, and its FOR UPDATE SKIP LOCKED, skipping the rows the
// statement had already changed, fed it the next ones: one statement
// retired every stranded row of the table.
func TestReapStatementsHonourBatchSize(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := newTable(t, p)
	s := newStore(t, p, pgstore.Options{Table: table})
	now := base.Add(2 * time.Hour)
	for i := range 5 {
		// Expired an hour ago, and stranded (lease out for an hour).
		if _, err := s.Claim(ctx, claim(fmt.Sprintf("expired-%d", i), "fp", "tok", base)); err != nil {
			t.Fatal(err)
		}
		at := now.Add(-time.Hour)
		if _, err := s.Claim(ctx, claim(fmt.Sprintf("stranded-%d", i), "fp", "tok", at)); err != nil {
			t.Fatal(err)
		}
	}
	const batch = 2
	c := &batchCounter{Client: p}
	rs := newStore(t, c, pgstore.Options{Table: table})
	report, err := rs.Reap(ctx, pgstore.ReapOptions{Now: func() time.Time { return now }, BatchSize: batch})
	if err != nil || report.Deleted != 5 || report.Retired != 5 || report.Truncated {
		t.Errorf("Reap = %+v, %v; want 5 deleted, 5 retired, not truncated", report, err)
	}
	for i, n := range c.rows {
		if n > batch {
			t.Errorf("statement %d of %v changed %d rows, want at most BatchSize %d", i, c.rows, n, batch)
		}
	}
}

// TestReapNeverRetiresARunningLease: whatever the Grace, a row whose
// lease still runs at Reap's now stays in flight; a negative Grace means
// no grace (a row is retired as soon as its lease has run out), never a
// cutoff in the future.
func TestReapNeverRetiresARunningLease(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := newTable(t, p)
	s := newStore(t, p, pgstore.Options{Table: table})
	now := base.Add(time.Hour)
	for k, lease := range map[string]time.Duration{"running": time.Millisecond, "ran-out": -time.Millisecond} {
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: "tok", Now: now.Add(-time.Minute),
			LeaseUntil: now.Add(lease), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	report, err := s.Reap(ctx, pgstore.ReapOptions{Now: func() time.Time { return now }, Grace: -time.Hour})
	if err != nil || report.Retired != 1 {
		t.Errorf("Reap with a negative Grace = %+v, %v; want the one row whose lease ran out retired", report, err)
	}
	if v := inflight(t, p, table, "running"); v == nil || !*v {
		t.Errorf("running inflight after Reap: got %v, want true (its lease still runs)", v)
	}
	if v := inflight(t, p, table, "ran-out"); v == nil || *v {
		t.Errorf("ran-out inflight after Reap: got %v, want false (retired)", v)
	}
}

// slowStatements is a client whose every statement runs until its context
// ends, as one does that waits on locks past the deadline, or fails at
// once with err when err is set.
type slowStatements struct {
	pgstore.Client
	err error
}

func (c slowStatements) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.err != nil {
		return pgconn.CommandTag{}, c.err
	}
	<-ctx.Done()
	return pgconn.CommandTag{}, ctx.Err()
}

// TestReapCutByItsDeadline: a statement cut by the deadline Reap set
// itself (the context's deadline less Margin) ends the run as Truncated
// with no error: the run did what its time allowed, and the next one
// goes on. A statement that fails for another reason is an error.
func TestReapCutByItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := pgstore.New(slowStatements{}, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		report, err := s.Reap(ctx, pgstore.ReapOptions{Margin: time.Second})
		if err != nil || !report.Truncated || report.Statements != 1 {
			t.Errorf("Reap cut by its deadline = %+v, %v; want truncated after 1 statement, no error", report, err)
		}

		boom := errors.New("boom")
		if s, err = pgstore.New(slowStatements{err: boom}, pgstore.Options{}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		report, err = s.Reap(ctx, pgstore.ReapOptions{Margin: time.Second})
		if !errors.Is(err, boom) || !report.Truncated {
			t.Errorf("Reap with a failing statement = %+v, %v; want truncated, an error wrapping boom", report, err)
		}
	})
}
