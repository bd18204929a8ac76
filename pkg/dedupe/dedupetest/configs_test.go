package dedupetest_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestCheckConfigs runs the checker over configurations on memstore: a
// short run here (DEDUPE_CONFIG_HISTORIES raises it).
func TestCheckConfigs(t *testing.T) {
	dedupetest.CheckConfigs(t, dedupetest.ConfigCheck{
		NewStore: func(t *testing.T) dedupe.Store { return memstore.New() },
	})
}
