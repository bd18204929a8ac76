package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

var _ dedupe.Admin = (*Store)(nil)

// refExpr is the KeyRef of a row's key in SQL, exactly as the expression
// index dedupe_records_ref_idx of MigrationProvenance computes it, so that FindRef's
// lookup uses the index.
const refExpr = `('key:' || left(encode(sha256(key), 'hex'), 12))`

const (
	findRefSQL = `SELECT key, ` + recordColumns + ` FROM dedupe_records WHERE ` + refExpr + ` = $1::text`
	// inFlightSQL reads the rows in flight and those Reap retired, each
	// through its partial index (001's, MigrationRetired's).
	inFlightSQL = `(SELECT key, ` + recordColumns + ` FROM dedupe_records
  WHERE inflight AND expires_at >= $1::bigint ORDER BY lease_expires_at LIMIT $2::bigint)
UNION ALL
(SELECT key, ` + recordColumns + ` FROM dedupe_records
  WHERE inflight IS FALSE AND status = 'IN_PROGRESS' AND expires_at >= $1::bigint ORDER BY lease_expires_at LIMIT $2::bigint)
ORDER BY lease_expires_at LIMIT $2::bigint`
	forgetSQL = `DELETE FROM dedupe_records WHERE key = $1::bytea AND owner = $2::text`
	// releaseSeenSQL is releaseSQL fenced also by the lease end read.
	releaseSeenSQL = `UPDATE dedupe_records SET lease_expires_at = 0, inflight = NULL
WHERE key = $1::bytea AND owner = $2::text AND status = 'IN_PROGRESS' AND lease_expires_at = $3::bigint`
	existsSQL = `SELECT true FROM dedupe_records WHERE key = $1::bytea`
)

// FindRef implements dedupe.Admin with one SELECT through the expression
// index on the key's KeyRef (MigrationProvenance's dedupe_records_ref_idx).
func (s *Store) FindRef(ctx context.Context, ref string, now time.Time) ([]dedupe.Record, error) {
	if !dedupe.ValidRef(ref) {
		return nil, fmt.Errorf("pgstore: find %q: not a key reference (key: and 12 hex digits)", ref)
	}
	recs, err := s.list(ctx, forTable(findRefSQL, s.table), ref)
	if err != nil {
		return nil, wrap("pgstore: find "+ref, err)
	}
	out := recs[:0]
	for _, r := range recs {
		if !r.Expired(now) {
			out = append(out, r)
		}
	}
	return out, nil
}

// InFlight implements dedupe.Admin with one SELECT through the partial
// in-flight index and the index of retired rows (MigrationRetired),
// oldest lease first: the rows in flight and the stranded ones Reap
// retired (inflight false), which the reaper counted. Released and
// completed rows (inflight NULL) are not listed.
func (s *Store) InFlight(ctx context.Context, now time.Time, limit int) ([]dedupe.Record, bool, error) {
	recs, err := s.list(ctx, forTable(inFlightSQL, s.table), now.Unix(), int64(limit)+1)
	if err != nil {
		return nil, false, wrap("pgstore: in flight", err)
	}
	if len(recs) > limit {
		return recs[:limit], true, nil
	}
	return recs, false, nil
}

// list runs a query whose rows are a key and recordColumns.
func (s *Store) list(ctx context.Context, sql string, args ...any) ([]dedupe.Record, error) {
	var out []dedupe.Record
	err := s.send(ctx, func() error {
		out = out[:0]
		rows, err := s.c.Query(ctx, sql, s.args(args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key []byte
			var row rowValues
			if err := rows.Scan(append([]any{&key}, row.dest()...)...); err != nil {
				return err
			}
			rec, err := row.record(string(key))
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return rows.Err()
	})
	return out, err
}

// ReleaseSeen implements dedupe.Admin with one UPDATE fenced by the
// owner token, the IN_PROGRESS status and the lease end read, which
// otherwise does what Release does.
func (s *Store) ReleaseSeen(ctx context.Context, seen dedupe.Record) error {
	if err := dedupe.CheckStoreKey(seen.Key); err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	lease := seen.LeaseExpiresAt.UnixMilli()
	if lease == 0 {
		return fmt.Errorf("pgstore: release %s: released already: %w", dedupe.KeyRef(seen.Key), dedupe.ErrLeaseLost)
	}
	var tag pgconn.CommandTag
	err := s.send(ctx, func() (err error) {
		tag, err = s.c.Exec(ctx, forTable(releaseSeenSQL, s.table), s.args([]byte(seen.Key), seen.Token, lease)...)
		return err
	})
	switch {
	case err != nil:
		return wrapErr("release", seen.Key, err)
	case tag.RowsAffected() == 0:
		return fmt.Errorf("pgstore: release %s: changed since it was read: %w", dedupe.KeyRef(seen.Key), dedupe.ErrLeaseLost)
	}
	return nil
}

// Forget implements dedupe.Admin with one DELETE conditioned on the owner
// token (and a SELECT to tell a missing row from another owner's).
func (s *Store) Forget(ctx context.Context, key, token string) error {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return fmt.Errorf("pgstore: forget: %w", err)
	}
	var tag pgconn.CommandTag
	err := s.send(ctx, func() (err error) {
		tag, err = s.c.Exec(ctx, forTable(forgetSQL, s.table), s.args([]byte(key), token)...)
		return err
	})
	if err != nil {
		return wrapErr("forget", key, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var exists bool
	err = s.send(ctx, func() error {
		return s.c.QueryRow(ctx, forTable(existsSQL, s.table), s.args([]byte(key))...).Scan(&exists)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstore: forget %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	case err != nil:
		return wrapErr("forget", key, err)
	}
	return fmt.Errorf("pgstore: forget %s: %w", dedupe.KeyRef(key), dedupe.ErrLeaseLost)
}
