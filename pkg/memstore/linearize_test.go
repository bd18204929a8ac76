package memstore_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest/linearize"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// store is what the checker needs: a Store that extends leases.
type store interface {
	dedupe.Store
	dedupe.LeaseExtender
}

// faulty plays the part of a client library in front of a store that has
// none: each call makes up to three attempts, each of which asks inject
// first. A lost reply applies the call and reports a reset; a throttle
// or timeout applies nothing.
type faulty struct {
	s      store
	inject dedupetest.Injector
}

var errReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

func (f faulty) attempt(op func() error) error {
	var last error
	for range 3 {
		switch f.inject("") {
		case dedupetest.FaultNone:
			return op()
		case dedupetest.FaultLostReply:
			_ = op()
			last = errReset
		default:
			last = context.DeadlineExceeded
		}
	}
	return fmt.Errorf("faulty: %w: %w", dedupe.ErrStoreUnavailable, last)
}

func (f faulty) Claim(ctx context.Context, req dedupe.ClaimRequest) (res dedupe.ClaimResult, err error) {
	err = f.attempt(func() (err error) { res, err = f.s.Claim(ctx, req); return err })
	return res, err
}

func (f faulty) Get(ctx context.Context, key string, now time.Time) (rec dedupe.Record, err error) {
	err = f.attempt(func() (err error) { rec, err = f.s.Get(ctx, key, now); return err })
	return rec, err
}

func (f faulty) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	return f.attempt(func() error { return f.s.Complete(ctx, req) })
}

func (f faulty) Release(ctx context.Context, key, token string) error {
	return f.attempt(func() error { return f.s.Release(ctx, key, token) })
}

func (f faulty) Extend(ctx context.Context, req dedupe.ExtendRequest) error {
	return f.attempt(func() error { return f.s.Extend(ctx, req) })
}

// TestLinearizable checks memstore, the specification, against its own
// model: it proves the model and the recorder agree with the code they
// describe, with faults (lost replies and retries) injected in front of it.
func TestLinearizable(t *testing.T) {
	s := memstore.New()
	linearize.Check(t, linearize.Config{
		StrictFirstToken: true,
		NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
			return faulty{s: s, inject: inject}
		},
	})
}

// TestLinearizeCatchesMutants proves the checker catches a store that
// drops one of the contract's checks: each mutant is memstore with one
// check removed, and the checker must find a history it cannot
// linearize.
func TestLinearizeCatchesMutants(t *testing.T) {
	for _, drop := range []string{dropCompleteOwner, dropReleaseOwner, dropTakeoverFingerprint, dropExtendOwner} {
		t.Run(drop, func(t *testing.T) {
			m := &mutant{drop: drop, records: map[string]dedupe.Record{}}
			linearize.ExpectViolation(t, linearize.Config{
				StrictFirstToken: true,
				Histories:        20,
				NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
					return faulty{s: m, inject: inject}
				},
			})
		})
	}
}

// The checks a mutant drops.
const (
	dropCompleteOwner       = "complete-without-owner-check"
	dropReleaseOwner        = "release-without-owner-check"
	dropTakeoverFingerprint = "takeover-without-fingerprint-check"
	dropExtendOwner         = "extend-without-owner-check"
)

// mutant is a copy of memstore's logic with the check named by drop
// removed. It exists only to be caught.
type mutant struct {
	drop    string
	mu      sync.Mutex
	records map[string]dedupe.Record
}

func (m *mutant) Claim(_ context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[req.Key]
	free := !ok || rec.FreeFor(req.Now, req.Fingerprint, req.Token)
	if ok && !free && m.drop == dropTakeoverFingerprint {
		free = rec.Status == dedupe.StatusInProgress && rec.LeaseExpired(req.Now)
	}
	if !free {
		return dedupe.ClaimResult{Record: rec}, nil
	}
	first := req.Token
	if ok && !rec.Expired(req.Now) {
		first = rec.Life()
	}
	rec = dedupe.Record{Key: req.Key, Status: dedupe.StatusInProgress, Fingerprint: req.Fingerprint, Token: req.Token,
		FirstToken: first, LeaseExpiresAt: req.LeaseUntil.Truncate(time.Millisecond), ExpiresAt: time.Unix(req.ExpiresAt.Unix(), 0),
		CreatedAt: req.Now.Truncate(time.Millisecond), UpdatedAt: req.Now.Truncate(time.Millisecond)}
	m.records[req.Key] = rec
	return dedupe.ClaimResult{Acquired: true, Record: rec}, nil
}

func (m *mutant) Complete(_ context.Context, req dedupe.CompleteRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[req.Key]
	if !ok || (rec.Token != req.Token && m.drop != dropCompleteOwner) || rec.Expired(req.Now) {
		return dedupe.ErrLeaseLost
	}
	rec.Status = dedupe.StatusCompleted
	if req.OmitResult {
		rec.Result, rec.ResultOmitted = nil, true
	} else {
		r := req.Result.Clone()
		rec.Result, rec.ResultOmitted = &r, false
	}
	rec.ExpiresAt = time.Unix(req.ExpiresAt.Unix(), 0)
	rec.UpdatedAt = req.Now.Truncate(time.Millisecond)
	m.records[req.Key] = rec
	return nil
}

func (m *mutant) Release(_ context.Context, key, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[key]
	if !ok || (rec.Token != token && m.drop != dropReleaseOwner) || rec.Status != dedupe.StatusInProgress {
		return dedupe.ErrLeaseLost
	}
	rec.LeaseExpiresAt = time.UnixMilli(0)
	m.records[key] = rec
	return nil
}

func (m *mutant) Extend(_ context.Context, req dedupe.ExtendRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[req.Key]
	if !ok || (rec.Token != req.Token && m.drop != dropExtendOwner) || rec.Status != dedupe.StatusInProgress || rec.Expired(req.Now) || rec.LeaseExpired(req.Now) {
		return dedupe.ErrLeaseLost
	}
	rec.LeaseExpiresAt = req.LeaseUntil.Truncate(time.Millisecond)
	rec.ExpiresAt = time.Unix(req.ExpiresAt.Unix(), 0)
	rec.UpdatedAt = req.Now.Truncate(time.Millisecond)
	m.records[req.Key] = rec
	return nil
}

func (m *mutant) Get(_ context.Context, key string, now time.Time) (dedupe.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[key]
	if !ok || rec.Expired(now) {
		return dedupe.Record{}, dedupe.ErrNotFound
	}
	return rec, nil
}
