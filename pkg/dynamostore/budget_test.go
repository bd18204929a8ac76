package dynamostore_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// TestBenchmarkClientsHaveNoListingBudget: the listing budget bounds a
// test's client only. A benchmark's Queries grow with b.N (BenchmarkReap
// makes one per shard per iteration, so 625 iterations, a fast machine or
// a -benchtime of a few seconds, spend the budget), and make mutate,
// whose looping mutants the budget is for, runs no benchmark. Here a
// benchmark's client makes more listings than the budget, answered
// without a server, and none is refused.
func TestBenchmarkClientsHaveNoListingBudget(t *testing.T) {
	var err error
	testing.Benchmark(func(b *testing.B) {
		c := testClient(b, answeredLocally)
		for range listingBudget + 1 {
			if _, err = c.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String("t")}); err != nil {
				return
			}
		}
	})
	if err != nil {
		t.Fatalf("a benchmark's listing beyond %d: %v; want no budget", listingBudget, err)
	}
}

// answeredLocally answers every call with an empty output, sending nothing.
func answeredLocally(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("answeredLocally",
			func(context.Context, middleware.InitializeInput, middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				return middleware.InitializeOutput{Result: &dynamodb.ScanOutput{}}, middleware.Metadata{}, nil
			}), middleware.After)
	})
}
