package dynamostore_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestAdmin runs the operator's contract on the template's table, whose
// ref index FindRef queries.
func TestAdmin(t *testing.T) {
	r := newRig(t)
	dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store { return r.store(t, dynamostore.Options{}) })
}
