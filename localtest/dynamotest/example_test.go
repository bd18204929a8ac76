package dynamotest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// A test on the template's idempotency table, as pkg/dynamostore's tests
// write it. Client skips the test without AWS_ENDPOINT_URL_DYNAMODB (fails
// it in CI); the table is deleted when the test ends.
func ExampleCreateTables() {
	_ = func(t *testing.T) {
		client := dynamotest.Client(t)
		names := dynamotest.CreateTables(t, client, "IdempotencyTable")
		store, err := dynamostore.New(client, dynamostore.Options{Table: names["IdempotencyTable"]})
		if err != nil {
			t.Fatal(err)
		}
		_ = store // Claim, Complete, ...
	}
}

func ExampleUniqueName() {
	name := dynamotest.UniqueName("dedupe-test")
	fmt.Println(strings.HasPrefix(name, "dedupe-test-"), len(name))
	// Output: true 24
}

// A test in another module: no template.yaml needed.
func ExampleIdempotencyTable() {
	_ = func(t *testing.T) {
		client := dynamotest.Client(t)
		store, err := dynamostore.New(client, dynamostore.Options{Table: dynamotest.IdempotencyTable(t, client)})
		if err != nil {
			t.Fatal(err)
		}
		_ = store
	}
}
