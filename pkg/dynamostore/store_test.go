package dynamostore_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

func TestContract(t *testing.T) {
	r := newRig(t)
	dedupetest.Run(t, func(t *testing.T) dedupe.Store { return r.store(t, dynamostore.Options{}) })
}
