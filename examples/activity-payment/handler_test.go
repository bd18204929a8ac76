package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/examples/internal/exampletest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// lossy loses the completions while lose is set.
type lossy struct {
	dedupe.Store
	lose bool
}

func (s *lossy) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	if s.lose {
		return fmt.Errorf("throttled: %w", dedupe.ErrStoreUnavailable)
	}
	return s.Store.Complete(ctx, req)
}

func TestHandle(t *testing.T) {
	exampletest.ForEachStore(t, func(t *testing.T, store dedupe.Store) {
		now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		s := &lossy{Store: store, lose: true}
		p := NewFakeProcessor()
		h := &Handler{Guard: dedupe.New(s, &dedupe.Config{Prefix: "activity-" + rand.Text(), Now: func() time.Time { return now }}), Processor: p}
		in := Input{ExecutionID: "exec-1", Step: "capture", OrderID: "o-1", Amount: 1250}
		ctx := context.Background()

		first, err := h.Handle(ctx, in) // captured, but the record is lost
		if err != nil {
			t.Fatal(err)
		}
		s.lose = false
		now = now.Add(dedupe.DefaultLease + time.Second) // the lost record's lease runs out
		second, err := h.Handle(ctx, in)                 // Step Functions retries: the activity runs again
		if err != nil {
			t.Fatal(err)
		}
		third, err := h.Handle(ctx, in) // and once more: a replay now
		if err != nil {
			t.Fatal(err)
		}
		if first.ChargeID != second.ChargeID || second.ChargeID != third.ChargeID || p.Captured != 1 || second.Replayed || !third.Replayed {
			t.Errorf("charges %q %q %q (replayed %v %v), %d captures; want one charge, captured once, the third replayed",
				first.ChargeID, second.ChargeID, third.ChargeID, second.Replayed, third.Replayed, p.Captured)
		}
		if _, err := h.Handle(ctx, Input{OrderID: "o-1"}); err == nil {
			t.Errorf("input without execution and step: want an error")
		}
	})
}
