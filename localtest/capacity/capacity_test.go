package capacity_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/capacity"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestGuardCapacity pins the capacity units of one guarded request, by
// AWS's rules, in both modes: the in-flight index costs a write on the
// claim and one on the completion, and Lean writes neither.
func TestGuardCapacity(t *testing.T) {
	client := dynamotest.Client(t)
	table := dynamotest.IdempotencyTable(t, client)
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	tests := []struct {
		lean                    bool
		fresh, replay, conflict capacity.Units
	}{
		// The in-flight index is written on the claim and the completion;
		// the ref index only when the claim creates the item.
		{false, capacity.Units{Write: 2, IndexWrite: 3}, capacity.Units{Write: 1}, capacity.Units{Write: 1}},
		{true, capacity.Units{Write: 2, IndexWrite: 1}, capacity.Units{Write: 1}, capacity.Units{Write: 1}},
	}
	for _, tt := range tests {
		name := "default"
		if tt.lean {
			name = "lean"
		}
		t.Run(name, func(t *testing.T) {
			m := capacity.New(client, capacity.DefaultSchema(), true)
			s, err := dynamostore.New(m, dynamostore.Options{Table: table, Lean: tt.lean})
			if err != nil {
				t.Fatal(err)
			}
			g := dedupe.New(s, &dedupe.Config{Prefix: "cap", Now: func() time.Time { return now }})
			ok := func(context.Context) (dedupe.Result, error) {
				return dedupe.Result{StatusCode: 201, Body: []byte(`{"id":"pay_1","amount":1250}`)}, nil
			}
			key := rand.Text()
			m.Reset()
			if _, err := g.Run(ctx, key, "fp", ok); err != nil {
				t.Fatal(err)
			}
			if got := m.Units(); got != tt.fresh {
				t.Errorf("fresh: got %+v, want %+v", got, tt.fresh)
			}
			m.Reset()
			if out, err := g.Run(ctx, key, "fp", ok); err != nil || !out.Replayed {
				t.Fatalf("replay: %+v, %v", out, err)
			}
			if got := m.Units(); got != tt.replay {
				t.Errorf("replay: got %+v, want %+v", got, tt.replay)
			}
			held := rand.Text()
			if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: g.Key(held), Fingerprint: "fp", Token: "other", Now: now,
				LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			m.Reset()
			if _, err := g.Run(ctx, held, "fp", ok); !errors.Is(err, dedupe.ErrInProgress) {
				t.Fatalf("conflict: %v, want ErrInProgress", err)
			}
			if got := m.Units(); got != tt.conflict {
				t.Errorf("conflict: got %+v, want %+v", got, tt.conflict)
			}
		})
	}
}
