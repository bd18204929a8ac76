package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lambda-dedupe/dedupe/internal/dynamoitem"
	"github.com/lambda-dedupe/dedupe/internal/headerenc"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Store is an in-memory dedupe.Store. The zero value is not usable; call
// New. A Store is safe for concurrent use.
//
// It enforces the key and item limits of DynamoDB as pkg/dynamostore
// applies them with its default options, so code tested against it fails
// the same way it would in production: keys are checked with
// dedupe.CheckStoreKey, and a result whose completed item would not fit
// (dynamostore.DefaultMaxItemBytes, after gzip-compressing a body above
// dynamostore.DefaultCompressAbove when that helps) is not stored; see
// Complete.
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
	first := req.Token // a new life
	if rec, ok := s.records[req.Key]; ok {
		if !rec.FreeFor(req.Now, req.Fingerprint, req.Token) {
			return dedupe.ClaimResult{Record: clone(rec)}, nil
		}
		if !rec.Expired(req.Now) {
			first = rec.Life() // a takeover or the owner's own re-claim
		}
	}
	rec := dedupe.Record{
		Key:            req.Key,
		Status:         dedupe.StatusInProgress,
		Fingerprint:    req.Fingerprint,
		Token:          req.Token,
		FirstToken:     first,
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

// Complete implements dedupe.Store. A result that pkg/dynamostore would
// not store with its default options is not stored here either: the
// record becomes COMPLETED with ResultOmitted, and Complete returns an
// error wrapping dedupe.ErrResultTooLarge. The size is dynamostore's
// estimate of the completed item (key, tokens, encoded headers, the body
// as stored, gzip-compressed above 4 KiB when that makes it smaller),
// against its limit of 400 KB less a 2 KiB margin.
func (s *Store) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: complete: %w", err)
	}
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return fmt.Errorf("memstore: complete: %w", err)
	}
	tooLarge := 0
	if !req.OmitResult {
		if size := completedSize(req); size > dynamoitem.MaxItemBytes {
			tooLarge = size
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[req.Key]
	if !ok || rec.Token != req.Token || rec.Expired(req.Now) {
		return fmt.Errorf("memstore: complete %s: %w", dedupe.KeyRef(req.Key), dedupe.ErrLeaseLost)
	}
	rec.Status = dedupe.StatusCompleted
	if req.OmitResult || tooLarge > 0 {
		rec.Result, rec.ResultOmitted = nil, true
	} else {
		result := req.Result.Clone()
		rec.Result, rec.ResultOmitted = &result, false
	}
	rec.ExpiresAt = time.Unix(req.ExpiresAt.Unix(), 0)
	rec.UpdatedAt = req.Now.Truncate(time.Millisecond)
	rec.RequestID, rec.Trace = req.RequestID, req.Trace
	s.records[req.Key] = rec
	if tooLarge > 0 {
		return fmt.Errorf("memstore: complete %s: item of about %d bytes exceeds %d, stored without result: %w",
			dedupe.KeyRef(req.Key), tooLarge, dynamoitem.MaxItemBytes, dedupe.ErrResultTooLarge)
	}
	return nil
}

// completedSize is the size pkg/dynamostore estimates for the item that
// completing req leaves, with its default options.
func completedSize(req dedupe.CompleteRequest) int {
	body, enc := dynamoitem.Compress(req.Result.Body, dynamoitem.CompressAbove)
	return dynamoitem.CompletedSize(dynamoitem.DefaultNames(), dynamoitem.Completed{
		Key: req.Key, Token: req.Token, RequestID: req.RequestID, Trace: req.Trace, Ref: dedupe.KeyRef(req.Key),
		Headers: headerenc.Encode(req.Result.Headers), Body: body, Encoding: enc,
	})
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
