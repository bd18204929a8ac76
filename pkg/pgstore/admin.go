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
	findRefSQL  = `SELECT key, ` + recordColumns + ` FROM dedupe_records WHERE ` + refExpr + ` = $1::text`
	inFlightSQL = `SELECT key, ` + recordColumns + ` FROM dedupe_records
WHERE inflight AND expires_at >= $1::bigint ORDER BY lease_expires_at LIMIT $2::bigint`
	forgetSQL = `DELETE FROM dedupe_records WHERE key = $1::bytea AND owner = $2::text`
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
// in-flight index, oldest lease first. Released and retired rows have
// left it (inflight NULL) and are not listed.
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
