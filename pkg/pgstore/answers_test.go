package pgstore_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// TestClaimBehindAHeldRowIsInFlight classifies a claim that waits past
// lock_timeout for the row of its key (issue 29, the rule): the first
// request's transaction holds it (the store runs on a pgx.Tx, the claim
// uncommitted), so the duplicate has met a concurrent writer of that very
// key. It is answered in flight, never as unavailable, and FailOpen does
// not run it.
func TestClaimBehindAHeldRowIsInFlight(t *testing.T) {
	p := newPool(t)
	table := newTable(t, p)
	ctx := context.Background()
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	first := newStore(t, tx, pgstore.Options{Table: table})
	if res, err := first.Claim(ctx, claim("held", "fp", "tok-a", base)); err != nil || !res.Acquired {
		t.Fatalf("first claim in its transaction: %+v, %v", res, err)
	}

	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "100ms"
	impatient, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	second := newStore(t, impatient, pgstore.Options{Table: table, Attempts: 2})
	res, err := second.Claim(ctx, claim("held", "fp", "tok-b", base))
	if !errors.Is(err, dedupe.ErrInProgress) || errors.Is(err, dedupe.ErrStoreUnavailable) || res.Acquired {
		t.Fatalf("Claim behind the held row = %+v, %v; want in flight (ErrInProgress), never unavailable", res, err)
	}

	g := dedupe.New(second, &dedupe.Config{Prefix: "", Unprefixed: true, FailOpen: true,
		Now: func() time.Time { return base }, Logger: slog.New(slog.DiscardHandler)})
	runs := 0
	_, err = g.Do(ctx, dedupe.Call{Key: "held", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { runs++; return dedupe.Result{StatusCode: 201}, nil })
	var conflict *dedupe.ConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, dedupe.ErrInProgress) || runs != 0 {
		t.Errorf("Run = %v after %d runs; want a ConflictError in progress, no run (FailOpen on)", err, runs)
	}
}
