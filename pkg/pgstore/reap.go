package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Defaults applied by Store.Reap for zero fields of ReapOptions.
const (
	DefaultReapGrace     = 30 * time.Second
	DefaultReapBatchSize = 500
	DefaultReapMargin    = 2 * time.Second
)

// ReapOptions configures Store.Reap. The zero value (or a zero field)
// means the defaults.
type ReapOptions struct {
	// Now is the clock. Nil means time.Now. It is the writers' kind of
	// clock, compared with the times they stored; the server's clock is
	// never used.
	Now func() time.Time

	// Grace is how long past its lease an in-flight row must be before it
	// is retired; it leaves room for the request's retry to take the key
	// over first. Zero means DefaultReapGrace; a negative value means no
	// grace.
	Grace time.Duration

	// BatchSize bounds the rows each statement deletes or retires. Zero
	// means DefaultReapBatchSize.
	BatchSize int

	// Margin is how long before the context's deadline Reap stops
	// starting statements, so that it returns its report in time. Zero
	// means DefaultReapMargin.
	Margin time.Duration

	// Logger receives one line per retired row (by dedupe.KeyRef, never
	// the key). Nil means no logging.
	Logger *slog.Logger
}

// withDefaults returns a copy of o with every zero field defaulted.
func (o ReapOptions) withDefaults() ReapOptions {
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.Grace == 0:
		o.Grace = DefaultReapGrace
	case o.Grace < 0:
		o.Grace = 0
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultReapBatchSize
	}
	if o.Margin <= 0 {
		o.Margin = DefaultReapMargin
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// ReapReport is what one Reap run did.
type ReapReport struct {
	// Deleted counts the expired rows deleted.
	Deleted int `json:"deleted"`
	// Retired counts the stranded rows (IN_PROGRESS, lease run out more
	// than Grace ago) taken out of the in-flight index. They stay until
	// they expire; a count above zero means invocations died mid-flight,
	// and is worth an alarm.
	Retired int `json:"retired"`
	// Statements counts the statements run.
	Statements int `json:"statements"`
	// Truncated reports that the run stopped before it ran out of work
	// (deadline, cancellation or an error): the next run goes on.
	Truncated bool `json:"truncated"`
}

// reapExpiredSQL deletes up to $2 expired rows, oldest expiry first, a
// range of the expires_at index. Rows locked by a claim are skipped, and
// the outer condition is checked again on the row it locks, so a row
// claimed anew meanwhile is kept.
//
// The batch is a MATERIALIZED CTE, chosen once. As a plain IN (subquery),
// a nested-loop plan runs the subquery again for each outer row, and its
// FOR UPDATE SKIP LOCKED then skips the rows the statement itself has
// already deleted and yields the next ones: one statement went through
// every matching row, whatever $2 said.
//
//	$1 now_s  $2 batch
const reapExpiredSQL = `
WITH batch AS MATERIALIZED (
    SELECT key FROM dedupe_records
    WHERE expires_at < $1::bigint
    ORDER BY expires_at
    LIMIT $2::integer
    FOR UPDATE SKIP LOCKED)
DELETE FROM dedupe_records
WHERE key IN (SELECT key FROM batch)
  AND expires_at < $1::bigint`

// retireStrandedSQL sets inflight to false on up to $2 stranded rows, a
// range of the partial in-flight index, and returns what the log line
// needs: the rows leave that index for the one of retired rows
// (MigrationRetired), which InFlight reads and Reap does not. Its batch
// is a MATERIALIZED CTE, as reapExpiredSQL's.
//
//	$1 cutoff_ms  $2 batch
const retireStrandedSQL = `
WITH batch AS MATERIALIZED (
    SELECT key FROM dedupe_records
    WHERE inflight AND lease_expires_at < $1::bigint
    ORDER BY lease_expires_at
    LIMIT $2::integer
    FOR UPDATE SKIP LOCKED)
UPDATE dedupe_records SET inflight = false
WHERE key IN (SELECT key FROM batch)
  AND inflight AND status = 'IN_PROGRESS' AND lease_expires_at < $1::bigint
RETURNING key, created_at, lease_expires_at`

// Reap deletes expired rows and retires stranded in-flight ones.
//
// Expired rows (expires_at before now, in epoch seconds) count as absent
// already; deleting them only reclaims space. They are found through the
// expires_at index, in batches of opts.BatchSize, so the cost of a run
// follows the rows it deletes, never the size of the table.
//
// Stranded rows are IN_PROGRESS rows whose lease ran out more than
// opts.Grace ago: their invocation died. They are not deleted, because a
// deleted row would let a different request take the key, where the
// contract lets only the same request (the same fingerprint) take it
// over, and a different one must keep getting its mismatch until the
// record expires. Reap retires them instead: it sets their inflight
// column to false, so the partial index that finds them holds only rows
// still in flight, logs each one and counts it in Retired. A retired row
// is still listed by InFlight (dedupe stranded: what the reaper counted,
// the operator finds), through the index of MigrationRetired. A takeover
// claim puts a row back in flight.
//
//	claim      lease end   now - grace       now          expires_at
//	  |------------|------------|-------------|----------------|
//	  in flight    | stranded: a retry of the | retired: still | deleted
//	               | same request may take it | refused to     | by Reap
//	               | over                     | others         |
//
// Each statement is a single-statement transaction that skips rows a
// claim holds (FOR UPDATE SKIP LOCKED), so Reap never blocks writers and
// two Reaps at once are harmless. Reap stops starting statements
// opts.Margin before the context's deadline and reports Truncated.
func (s *Store) Reap(ctx context.Context, opts ReapOptions) (ReapReport, error) {
	o := opts.withDefaults()
	now := o.Now()
	var report ReapReport
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-o.Margin))
		defer cancel()
	}

	for {
		if ctx.Err() != nil {
			report.Truncated = true
			return report, nil
		}
		tag, err := s.c.Exec(ctx, s.sql.reapExpired, s.args(now.Unix(), o.BatchSize)...)
		report.Statements++
		if err != nil {
			report.Truncated = true
			return report, s.reapErr(ctx, "delete expired rows", err)
		}
		report.Deleted += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(o.BatchSize) {
			break
		}
	}

	cutoff := now.Add(-o.Grace).UnixMilli()
	for {
		if ctx.Err() != nil {
			report.Truncated = true
			return report, nil
		}
		n, err := s.retire(ctx, o, now, cutoff)
		report.Statements++
		report.Retired += n
		if err != nil {
			report.Truncated = true
			return report, s.reapErr(ctx, "retire stranded rows", err)
		}
		if n < o.BatchSize {
			return report, nil
		}
	}
}

// retire runs one retireStrandedSQL batch and logs the rows it retired.
func (s *Store) retire(ctx context.Context, o ReapOptions, now time.Time, cutoff int64) (int, error) {
	rows, err := s.c.Query(ctx, s.sql.retireStranded, s.args(cutoff, o.BatchSize)...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key []byte
		var created, lease int64
		if err := rows.Scan(&key, &created, &lease); err != nil {
			return n, err
		}
		n++
		o.Logger.LogAttrs(ctx, slog.LevelWarn, "pgstore: retired a stranded in-flight record",
			slog.String("key", dedupe.KeyRef(string(key))),
			slog.Duration("age", now.Sub(time.UnixMilli(created))),
			slog.Duration("leaseExpiredFor", now.Sub(time.UnixMilli(lease))))
	}
	return n, rows.Err()
}

// reapErr wraps a failed reap statement; a deadline that Reap's own
// margin set is reported as truncation only, not as an error.
func (s *Store) reapErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return wrap(fmt.Sprintf("pgstore: reap %s: %s", s.table, what), err)
}
