package dedupetest_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestCheckHandlers runs the checker over Handler, its types and its
// expressions on memstore: a short run here (DEDUPE_HANDLER_HISTORIES
// raises it).
func TestCheckHandlers(t *testing.T) {
	dedupetest.CheckHandlers(t, dedupetest.ConfigCheck{
		NewStore: func(t *testing.T) dedupe.Store { return memstore.New() },
	})
}
