package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

var _ dedupe.Admin = (*Store)(nil)

// FindRef implements dedupe.Admin. The store is a map in memory: it
// compares the KeyRef of every live key, which costs no I/O.
func (s *Store) FindRef(ctx context.Context, ref string, now time.Time) ([]dedupe.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: find %s: %w", ref, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []dedupe.Record
	for k, rec := range s.records {
		if !rec.Expired(now) && dedupe.KeyRef(k) == ref {
			out = append(out, clone(rec))
		}
	}
	return out, nil
}

// InFlight implements dedupe.Admin.
func (s *Store) InFlight(ctx context.Context, now time.Time, limit int) ([]dedupe.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("memstore: in flight: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []dedupe.Record
	for _, rec := range s.records {
		if rec.Expired(now) || rec.Status != dedupe.StatusInProgress || rec.LeaseExpiresAt.UnixMilli() == 0 {
			continue // expired, completed, or released (as the stores' indexes drop them)
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, clone(rec))
	}
	return out, false, nil
}

// ReleaseSeen implements dedupe.Admin.
func (s *Store) ReleaseSeen(ctx context.Context, seen dedupe.Record) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: release: %w", err)
	}
	if err := dedupe.CheckStoreKey(seen.Key); err != nil {
		return fmt.Errorf("memstore: release: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[seen.Key]
	lease := seen.LeaseExpiresAt.UnixMilli()
	if !ok || rec.Token != seen.Token || rec.Status != dedupe.StatusInProgress || lease == 0 || rec.LeaseExpiresAt.UnixMilli() != lease {
		return fmt.Errorf("memstore: release %s: changed since it was read: %w", dedupe.KeyRef(seen.Key), dedupe.ErrLeaseLost)
	}
	rec.LeaseExpiresAt = time.UnixMilli(0)
	s.records[seen.Key] = rec
	return nil
}

// Forget implements dedupe.Admin.
func (s *Store) Forget(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: forget: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[key]
	switch {
	case !ok:
		return fmt.Errorf("memstore: forget %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	case rec.Token != token:
		return fmt.Errorf("memstore: forget %s: %w", dedupe.KeyRef(key), dedupe.ErrLeaseLost)
	}
	delete(s.records, key)
	return nil
}
