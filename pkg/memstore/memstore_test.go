package memstore_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

func TestContract(t *testing.T) {
	dedupetest.Run(t, func(*testing.T) dedupe.Store { return memstore.New() })
}

func TestAdmin(t *testing.T) {
	dedupetest.RunAdmin(t, func(*testing.T) dedupe.Store { return memstore.New() })
}
