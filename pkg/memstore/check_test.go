package memstore_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest/linearize"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestCheck runs the randomized fault-injecting checker on memstore, with
// dedupetest.FaultyStore standing in for a client library's retries.
func TestCheck(t *testing.T) {
	dedupetest.Check(t, dedupetest.CheckConfig{
		NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
			return &dedupetest.FaultyStore{Store: memstore.New(), Inject: inject}
		},
	})
}

// TestCheckNeverFaultsConstruction checks that the checkers fault only
// the history, never the calls a store's New makes (dynamostore's
// DescribeTable): a fault there fails New, which is not under test, and
// once made make test's moto pass fail one run in a few hundred.
func TestCheckNeverFaultsConstruction(t *testing.T) {
	shared := memstore.New() // linearize's clients share one store
	newStore := func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
		for i := range 200 {
			if f := inject("DescribeTable"); f != dedupetest.FaultNone {
				t.Fatalf("construction call %d was faulted (%v)", i, f)
			}
		}
		return &dedupetest.FaultyStore{Store: shared, Inject: inject}
	}
	t.Run("Check", func(t *testing.T) {
		dedupetest.Check(t, dedupetest.CheckConfig{Histories: 2, NewStore: newStore})
	})
	t.Run("linearize", func(t *testing.T) {
		linearize.Check(t, linearize.Config{Histories: 2, NewStore: newStore})
	})
}
