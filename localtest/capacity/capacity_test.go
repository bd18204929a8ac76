package capacity_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/capacity"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestGuardCapacity pins the capacity units of one guarded request, by
// AWS's rules, in both modes and on both key schemas: the in-flight index
// costs a write on the claim and one on the completion, and Lean writes
// neither; a classic table's ref index costs one more when the claim
// creates the item, and a table keyed by reference has none. The figures
// docs/cost.md states (its per-request table, the one statement of them)
// and docs/compared.md repeats must be these.
func TestGuardCapacity(t *testing.T) {
	doc := costDoc(t)
	client := dynamotest.Client(t)
	table := dynamotest.IdempotencyTable(t, client)
	classic := dynamotest.ClassicIdempotencyTable(t, client)
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	tests := []struct {
		lean, classic           bool
		fresh, replay, conflict capacity.Units
	}{
		// The in-flight index is written on the claim and the completion;
		// a classic table's ref index only when the claim creates the item.
		{false, false, capacity.Units{Write: 2, IndexWrite: 2}, capacity.Units{Write: 1}, capacity.Units{Write: 1}},
		{true, false, capacity.Units{Write: 2, IndexWrite: 0}, capacity.Units{Write: 1}, capacity.Units{Write: 1}},
		{false, true, capacity.Units{Write: 2, IndexWrite: 3}, capacity.Units{Write: 1}, capacity.Units{Write: 1}},
		{true, true, capacity.Units{Write: 2, IndexWrite: 1}, capacity.Units{Write: 1}, capacity.Units{Write: 1}},
	}
	for _, tt := range tests {
		name := "default"
		if tt.lean {
			name = "lean"
		}
		schema, on := capacity.DefaultSchema(), table
		if tt.classic {
			name += ", classic schema"
			schema, on = capacity.ClassicSchema(), classic
		}
		t.Run(name, func(t *testing.T) {
			m := capacity.New(client, schema, true)
			s, err := dynamostore.New(m, dynamostore.Options{Table: on, Lean: tt.lean})
			if err != nil {
				t.Fatal(err)
			}
			g := dedupe.New(s, &dedupe.Config{Prefix: "cap", Now: func() time.Time { return now }})
			ok := func(context.Context) (dedupe.Result, error) {
				return dedupe.Result{StatusCode: 201, Body: []byte(`{"id":"pay_1","amount":1250}`)}, nil
			}
			key := rand.Text()
			m.Reset()
			if _, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, ok); err != nil {
				t.Fatal(err)
			}
			if got := m.Units(); got != tt.fresh {
				t.Errorf("fresh: got %+v, want %+v", got, tt.fresh)
			}
			m.Reset()
			if out, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, ok); err != nil || !out.Replayed {
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
			if _, err := g.Do(ctx, dedupe.Call{Key: held, Fingerprint: "fp"}, ok); !errors.Is(err, dedupe.ErrInProgress) {
				t.Fatalf("conflict: %v, want ErrInProgress", err)
			}
			if got := m.Units(); got != tt.conflict {
				t.Errorf("conflict: got %+v, want %+v", got, tt.conflict)
			}
			if tt.classic {
				return // docs/cost.md's per-request table is the default schema's
			}
			col := 0
			if tt.lean {
				col = 1
			}
			for scenario, want := range map[string]string{
				"fresh":    fmt.Sprintf("%g + %g = **%g**", tt.fresh.Write, tt.fresh.IndexWrite, tt.fresh.Write+tt.fresh.IndexWrite),
				"replay":   fmt.Sprintf("%g", tt.replay.Write+tt.replay.IndexWrite),
				"conflict": fmt.Sprintf("%g", tt.conflict.Write+tt.conflict.IndexWrite),
			} {
				if got := doc[scenario][col]; got != want {
					t.Errorf("docs/cost.md says %q for a %s request (%s), the store costs %q", got, scenario, name, want)
				}
			}
		})
	}
	// docs/compared.md repeats them, with a link.
	page, err := os.ReadFile("../../docs/compared.md")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("| %g (%g with `Lean`); replay %g; conflict %g ([cost.md](cost.md)) |",
		tests[0].fresh.Write+tests[0].fresh.IndexWrite, tests[1].fresh.Write+tests[1].fresh.IndexWrite, tests[0].replay.Write, tests[0].conflict.Write)
	if !strings.Contains(string(page), want) {
		t.Errorf("docs/compared.md does not say %q", want)
	}
}

// costDoc reads docs/cost.md's per-request table: scenario (fresh,
// replay, conflict) to its default and Lean cells.
func costDoc(t *testing.T) map[string][2]string {
	t.Helper()
	page, err := os.ReadFile("../../docs/cost.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]string{}
	for _, line := range strings.Split(string(page), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 4 {
			continue
		}
		for _, scenario := range []string{"fresh", "replay", "conflict"} {
			if strings.HasPrefix(cells[0], scenario+" ") || strings.HasPrefix(cells[0], scenario+",") {
				out[scenario] = [2]string{cells[1], cells[2]}
			}
		}
	}
	if len(out) != 3 {
		t.Fatalf("docs/cost.md's per-request table: found %v, want the fresh, replay and conflict rows", out)
	}
	return out
}
