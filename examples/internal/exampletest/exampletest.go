// Package exampletest provides the stores the examples' tests run on.
package exampletest

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// ForEachStore runs test once on a memstore and once on a dynamostore
// over a fresh idempotency table on the test endpoint
// (AWS_ENDPOINT_URL_DYNAMODB: that run is skipped without it, or fails in
// CI), each as a subtest named for the store.
func ForEachStore(t *testing.T, test func(t *testing.T, store dedupe.Store)) {
	t.Run("memstore", func(t *testing.T) { test(t, memstore.New()) })
	t.Run("dynamostore", func(t *testing.T) {
		client := dynamotest.Client(t)
		store, err := dynamostore.New(client, dynamostore.Options{Table: dynamotest.IdempotencyTable(t, client)})
		if err != nil {
			t.Fatal(err)
		}
		test(t, store)
	})
}
