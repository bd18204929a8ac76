package memstore_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
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
