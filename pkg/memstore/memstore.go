package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Store is an in-memory dedupe.Store. The zero value is not usable; call
// New. A Store is safe for concurrent use.
//
// It enforces the key limits of DynamoDB (dedupe.CheckStoreKey), so code
// tested against it fails the same way it would in production.
type Store struct {
	mu      sync.Mutex
	records map[string]dedupe.Record
}

var (
	_ dedupe.Store         = (*Store)(nil)
	_ dedupe.LeaseExtender = (*Store)(nil)
)

// New returns an empty Store.
func New() *Store {
	return &Store{records: make(map[string]dedupe.Record)}
}

// Claim implements dedupe.Store.
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("memstore: claim: %w", err)
	}
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("memstore: claim: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.records[req.Key]; ok && !rec.FreeFor(req.Now, req.Fingerprint, req.Token) {
		return dedupe.ClaimResult{Record: clone(rec)}, nil
	}
	rec := dedupe.Record{
		Key:            req.Key,
		Status:         dedupe.StatusInProgress,
		Fingerprint:    req.Fingerprint,
		Token:          req.Token,
		LeaseExpiresAt: req.LeaseUntil.Truncate(time.Millisecond),
		ExpiresAt:      time.Unix(req.ExpiresAt.Unix(), 0),
		CreatedAt:      req.Now.Truncate(time.Millisecond),
		UpdatedAt:      req.Now.Truncate(time.Millisecond),
		RequestID:      req.RequestID,
		Trace:          req.Trace,
	}
	s.records[req.Key] = rec
	return dedupe.ClaimResult{Acquired: true, Record: clone(rec)}, nil
}

// Complete implements dedupe.Store.
func (s *Store) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: complete: %w", err)
	}
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return fmt.Errorf("memstore: complete: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[req.Key]
	if !ok || rec.Token != req.Token || rec.Expired(req.Now) {
		return fmt.Errorf("memstore: complete %s: %w", dedupe.KeyRef(req.Key), dedupe.ErrLeaseLost)
	}
	rec.Status = dedupe.StatusCompleted
	if req.OmitResult {
		rec.Result, rec.ResultOmitted = nil, true
	} else {
		result := req.Result.Clone()
		rec.Result, rec.ResultOmitted = &result, false
	}
	rec.ExpiresAt = time.Unix(req.ExpiresAt.Unix(), 0)
	rec.UpdatedAt = req.Now.Truncate(time.Millisecond)
	rec.RequestID, rec.Trace = req.RequestID, req.Trace
	s.records[req.Key] = rec
	return nil
}

// Release implements dedupe.Store.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: release: %w", err)
	}
	if err := dedupe.CheckStoreKey(key); err != nil {
		return fmt.Errorf("memstore: release: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[key]
	if !ok || rec.Token != token || rec.Status != dedupe.StatusInProgress {
		return fmt.Errorf("memstore: release %s: %w", dedupe.KeyRef(key), dedupe.ErrLeaseLost)
	}
	rec.LeaseExpiresAt = time.UnixMilli(0)
	s.records[key] = rec
	return nil
}

// Extend implements dedupe.LeaseExtender.
func (s *Store) Extend(ctx context.Context, req dedupe.ExtendRequest) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: extend: %w", err)
	}
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return fmt.Errorf("memstore: extend: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[req.Key]
	if !ok || rec.Token != req.Token || rec.Status != dedupe.StatusInProgress || rec.Expired(req.Now) || rec.LeaseExpired(req.Now) {
		return fmt.Errorf("memstore: extend %s: %w", dedupe.KeyRef(req.Key), dedupe.ErrLeaseLost)
	}
	rec.LeaseExpiresAt = req.LeaseUntil.Truncate(time.Millisecond)
	rec.ExpiresAt = time.Unix(req.ExpiresAt.Unix(), 0)
	rec.UpdatedAt = req.Now.Truncate(time.Millisecond)
	s.records[req.Key] = rec
	return nil
}

// Get implements dedupe.Store.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (dedupe.Record, error) {
	if err := ctx.Err(); err != nil {
		return dedupe.Record{}, fmt.Errorf("memstore: get: %w", err)
	}
	if err := dedupe.CheckStoreKey(key); err != nil {
		return dedupe.Record{}, fmt.Errorf("memstore: get: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[key]
	if !ok {
		return dedupe.Record{}, fmt.Errorf("memstore: get %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	}
	if rec.Expired(now) {
		delete(s.records, key)
		return dedupe.Record{}, fmt.Errorf("memstore: get %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	}
	return clone(rec), nil
}

// Len returns the number of records held, expired ones included until a
// call drops them. It is meant for tests and diagnostics.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// clone returns a copy of rec that shares no memory with the store.
func clone(rec dedupe.Record) dedupe.Record {
	if rec.Result != nil {
		r := rec.Result.Clone()
		rec.Result = &r
	}
	return rec
}
