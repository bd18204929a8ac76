package payments_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"

	"github.com/lambda-dedupe/dedupe/functions/api/internal/payments"
)

// memoryRepo is a working in-memory Repository for fast tests: payments in
// a map, listed in ID order, with the last ID as cursor.
type memoryRepo struct {
	mu       sync.Mutex
	payments map[string]payments.Payment
}

func newMemoryRepo() *memoryRepo {
	return &memoryRepo{payments: map[string]payments.Payment{}}
}

func (r *memoryRepo) Put(_ context.Context, p payments.Payment) (payments.Payment, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if got, ok := r.payments[p.ID]; ok {
		if got.Owner == p.Owner && got.Amount == p.Amount && got.Currency == p.Currency && got.Source == p.Source && got.Status == p.Status {
			return got, nil // a retried write
		}
		return payments.Payment{}, fmt.Errorf("put payment %s: %w", p.ID, payments.ErrConflict)
	}
	r.payments[p.ID] = p
	return p, nil
}

func (r *memoryRepo) Get(_ context.Context, id string) (payments.Payment, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.payments[id]
	if !ok {
		return payments.Payment{}, fmt.Errorf("get payment %s: %w", id, payments.ErrNotFound)
	}
	return p, nil
}

func (r *memoryRepo) List(_ context.Context, owner string, limit int, cursor string) ([]payments.Payment, string, error) {
	after, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || (cursor != "" && len(after) == 0) {
		return nil, "", fmt.Errorf("list payments: %w", payments.ErrInvalidCursor)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range r.payments {
			if id > string(after) && r.payments[id].Owner == owner && owner != "" && !yield(id) {
				return
			}
		}
	})
	var next string
	if len(ids) > limit {
		ids = ids[:limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(ids[limit-1]))
	}
	page := make([]payments.Payment, len(ids))
	for i, id := range ids {
		page[i] = r.payments[id]
	}
	return page, next, nil
}
